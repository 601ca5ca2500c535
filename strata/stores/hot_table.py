"""One user's memories of one collection, searchable in process memory.

``HotTable`` holds what recall needs, computed when a memory is written (or loaded): the
records, a float32 matrix of their vectors, BM25 postings over ``strata.stores.lexical``'s
terms (statistics of this user's corpus), and each episode's token vectors for late
interaction (``strata.recall.late.pack_tokens``, kept as compact bytes). Searches are numpy
over the rows that pass the filter; they return what the Milvus adapter returns (raw cosine
and BM25 scores, the same filter semantics), so the ranking code above cannot tell them apart.

Deleted or replaced rows are marked dead and compacted away once they are a third of the
table. Not thread-safe: ``strata.stores.hot.HotIndexStore`` locks around it.
"""

from __future__ import annotations

import base64
import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from strata.models import MemoryStatus, RecordFilter, SearchHit, StoredRecord
from strata.stores.lexical import BM25_B, BM25_K1, tokenize
from strata.stores.ports import fuse_rrf
from strata.stores.row_filter import matches

__all__ = ["RECORD_OVERHEAD_BYTES", "HotTable"]

# Python objects per row (the record model, its payload dict, the term Counter, postings and
# index entries, the matrix's spare capacity): tracemalloc measured 18.9 KB a row for 419
# LoCoMo turns as episodes against 16.4 KB counted without it (bench/hot_index_memory.py);
# vectors, token vectors and text are counted exactly.
RECORD_OVERHEAD_BYTES = 5000
# the filter masks kept between writes: a handful of fixed filters, plus those of the dates
# queries name (strata.recall.service's search of the turns said then)
MAX_MASKS = 64


class HotTable:
    """Rows of one (user, collection): see the module docstring."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._records: list[StoredRecord | None] = []
        self._row: dict[str, int] = {}
        self._matrix = np.zeros((16, dim), dtype=np.float32)
        self._lengths = np.zeros(16, dtype=np.float32)
        self._norms = np.zeros(16, dtype=np.float32)
        self._terms: list[Counter[str] | None] = []
        self._postings: dict[str, dict[int, int]] = {}
        self._tokens: dict[int, bytes] = {}
        self._by_text: dict[str, int] = {}
        self._masks: dict[str, npt.NDArray[np.bool_]] = {}
        self._total_length = 0.0
        self.nbytes = 0
        # the people speaking in the user's multi-party conversations (``metadata.speaker``);
        # kept when their rows go (a name the query strips is only a name)
        self.speakers: set[str] = set()

    # -- writes --------------------------------------------------------------------------
    def put(self, record: StoredRecord, vector: Sequence[float] | npt.NDArray[np.float32],
            tokens: bytes | None) -> None:
        """Add or replace a record (its vector, and its packed token vectors if any)."""
        self._kill(record.id)
        row = len(self._records)
        if row == len(self._matrix):
            self._matrix = np.concatenate([self._matrix, np.zeros_like(self._matrix)])
            self._lengths = np.concatenate([self._lengths, np.zeros_like(self._lengths)])
            self._norms = np.concatenate([self._norms, np.zeros_like(self._norms)])
        slim = record.model_copy(update={"vector": None, "tokens": None})
        self._records.append(slim)
        self._row[record.id] = row
        self._matrix[row] = np.asarray(vector, dtype=np.float32)
        self._norms[row] = np.linalg.norm(self._matrix[row])
        terms = Counter(tokenize(record.text))
        self._terms.append(terms)
        self._lengths[row] = sum(terms.values())
        self._total_length += self._lengths[row]
        for term, tf in terms.items():
            self._postings.setdefault(term, {})[row] = tf
        if tokens:
            self._tokens[row] = tokens
        self._by_text[record.text] = row
        speaker = (record.payload.get("metadata") or {}).get("speaker")
        if isinstance(speaker, str) and speaker.strip():
            self.speakers.add(speaker.strip())
        self.nbytes += self._row_bytes(slim, tokens)
        self._masks.clear()

    def replace_fields(self, record_id: str, status: MemoryStatus | None = None,
                       payload: dict[str, object] | None = None) -> StoredRecord | None:
        """Change a record's status or payload in place (text and vector unchanged)."""
        row = self._row.get(record_id)
        if row is None:
            return None
        current = self._records[row]
        assert current is not None
        update: dict[str, object] = {}
        if status is not None:
            update["status"] = status
            self._masks.clear()
        if payload is not None:
            update["payload"] = payload
        self._records[row] = current.model_copy(update=update)
        return self._records[row]

    def delete(self, ids: Sequence[str]) -> int:
        removed = sum(1 for i in ids if self._kill(i))
        if removed:
            self._masks.clear()
        return removed

    def _kill(self, record_id: str) -> bool:
        row = self._row.pop(record_id, None)
        if row is None:
            return False
        record, terms = self._records[row], self._terms[row]
        assert record is not None and terms is not None
        for term in terms:
            posting = self._postings.get(term)
            if posting is not None:
                posting.pop(row, None)
                if not posting:
                    del self._postings[term]
        self._total_length -= self._lengths[row]
        self.nbytes -= self._row_bytes(record, self._tokens.pop(row, None))
        if self._by_text.get(record.text) == row:
            del self._by_text[record.text]
        self._records[row] = None
        self._terms[row] = None
        if len(self._records) >= 64 and len(self._row) < 2 * len(self._records) // 3:
            self._compact()
        return True

    def _compact(self) -> None:
        keep = [(r, self._matrix[i].copy(), self._tokens.get(i))
                for i, r in enumerate(self._records) if r is not None]
        fresh = HotTable(self.dim)
        for record, vector, tokens in keep:
            fresh.put(record, vector, tokens)
        self.__dict__.update(fresh.__dict__)

    def _row_bytes(self, record: StoredRecord, tokens: bytes | None) -> int:
        return (self.dim * 4 + len(tokens or b"") + len(record.text.encode("utf-8"))
                + RECORD_OVERHEAD_BYTES)

    # -- reads ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._row)

    def ids(self) -> list[str]:
        return list(self._row)

    def record(self, record_id: str, with_vector: bool = False) -> StoredRecord | None:
        row = self._row.get(record_id)
        if row is None:
            return None
        record = self._records[row]
        assert record is not None
        if not with_vector:
            return record
        tokens = self._tokens.get(row)
        return record.model_copy(update={
            "vector": self._matrix[row].tolist(),
            "tokens": base64.b64encode(tokens).decode("ascii") if tokens else None})

    def tokens_of(self, record_id: str) -> bytes | None:
        row = self._row.get(record_id)
        return None if row is None else self._tokens.get(row)

    def tokens_for_text(self, text: str) -> bytes | None:
        row = self._by_text.get(text)
        return None if row is None else self._tokens.get(row)

    def terms_for_text(self, text: str) -> Counter[str] | None:
        row = self._by_text.get(text)
        return None if row is None else self._terms[row]

    def set_tokens(self, record_id: str, tokens: bytes) -> None:
        row = self._row[record_id]
        self.nbytes += len(tokens) - len(self._tokens.get(row, b""))
        self._tokens[row] = tokens

    def filtered(self, flt: RecordFilter | None, limit: int | None = None
                 ) -> list[StoredRecord]:
        mask = self._mask(flt)
        rows = np.flatnonzero(mask)[:limit]
        return [r for r in (self._records[i] for i in rows) if r is not None]

    def _mask(self, flt: RecordFilter | None) -> npt.NDArray[np.bool_]:
        n = len(self._records)
        if flt is not None and flt.ids is not None:
            mask = np.zeros(n, dtype=bool)
            rows = [self._row[i] for i in flt.ids if i in self._row]
            mask[rows] = True
            rest = flt.model_copy(update={"ids": None})
            return mask & self._mask(rest)
        key = flt.model_dump_json() if flt is not None else ""
        cached = self._masks.get(key)
        if cached is None:
            cached = np.fromiter((r is not None and matches(r, flt) for r in self._records),
                                 dtype=bool, count=n)
            if len(self._masks) >= MAX_MASKS:  # filters that vary (a query's dates): bounded
                self._masks.clear()
            self._masks[key] = cached
        return cached

    def cosines(self, vector: Sequence[float]) -> npt.NDArray[np.float32]:
        query = np.asarray(vector, dtype=np.float32)
        norm = float(np.linalg.norm(query)) or 1.0
        n = len(self._records)
        matrix = self._matrix[:n]
        norms = self._norms[:n] * norm
        return np.asarray(matrix @ query / np.where(norms == 0, 1.0, norms), dtype=np.float32)

    def bm25(self, text: str) -> npt.NDArray[np.float32]:
        """BM25 of every row against ``text`` (IDF and lengths of this user's corpus)."""
        scores = np.zeros(len(self._records), dtype=np.float32)
        alive = len(self._row)
        if not alive:
            return scores
        avg = (self._total_length / alive) or 1.0
        for term in set(tokenize(text)):
            posting = self._postings.get(term)
            if not posting:
                continue
            idf = math.log(1.0 + (alive - len(posting) + 0.5) / (len(posting) + 0.5))
            rows = np.fromiter(posting.keys(), dtype=np.int64, count=len(posting))
            tf = np.fromiter(posting.values(), dtype=np.float32, count=len(posting))
            norm = tf + BM25_K1 * (1 - BM25_B + BM25_B * self._lengths[rows] / avg)
            scores[rows] += idf * tf * (BM25_K1 + 1) / norm
        return scores

    def _top(self, scores: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_], k: int,
             positive: bool) -> list[SearchHit]:
        keep = mask & (scores > 0) if positive else mask
        rows = np.flatnonzero(keep)
        if not len(rows) or k <= 0:
            return []
        order = rows[np.argsort(-scores[rows], kind="stable")[:k]]
        out = []
        for i in order:
            record = self._records[i]
            assert record is not None
            out.append(SearchHit(record=record, score=float(scores[i])))
        return out

    def search_dense(self, vector: Sequence[float], k: int,
                     flt: RecordFilter | None) -> list[SearchHit]:
        return self._top(self.cosines(vector), self._mask(flt), k, positive=False)

    def search_lexical(self, text: str, k: int, flt: RecordFilter | None) -> list[SearchHit]:
        return self._top(self.bm25(text), self._mask(flt), k, positive=True)

    def search_hybrid(self, vector: Sequence[float], text: str, k: int,
                      flt: RecordFilter | None) -> list[SearchHit]:
        """RRF of the dense and BM25 top ``k``; every hit carries both raw similarities
        (computed for every row, so none is missing)."""
        mask = self._mask(flt)
        dense, lexical = self.cosines(vector), self.bm25(text)
        fused = fuse_rrf(self._top(dense, mask, k, positive=False),
                         self._top(lexical, mask, k, positive=True), k)
        for hit in fused:
            row = self._row[hit.record.id]
            hit.parts.setdefault("dense", float(dense[row]))
            hit.parts.setdefault("lexical", float(lexical[row]))
        return fused
