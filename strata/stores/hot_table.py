"""One user's memories of one collection, searchable in process memory.

``HotTable`` holds what recall needs, computed when a memory is written (or loaded): the
records (by column, each built again when read: ``hot_records.RecordColumns``), a float32
matrix of their vectors, BM25 postings over ``strata.stores.lexical``'s terms (statistics of
this user's corpus), and each episode's token vectors for late interaction
(``strata.recall.late.pack_tokens``, kept as compact bytes, in the heap or in a local spill
file, ``TokenSpill``). Searches are numpy over the rows that pass the filter; they return
what the Milvus adapter returns (raw cosine and BM25 scores, the same filter semantics), so
the ranking code above cannot tell them apart.

Deleted or replaced rows are marked dead and compacted away once they are a third of the
table. Not thread-safe: ``strata.stores.hot.HotIndexStore`` locks around it.

Why this module is long: it is one data structure, and every read and write of it must keep
its parallel columns in step (the records, the matrix and its norms, the postings and
lengths, the token vectors, the text index, the cached filter masks); split across modules,
a change to one column would have to find its partners elsewhere.
"""

from __future__ import annotations

import base64
import math
import sys
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from strata.models import MemoryStatus, RecordFilter, SearchHit, StoredRecord
from strata.stores.hot_records import RecordColumns
from strata.stores.lexical import BM25_B, BM25_K1, tokenize
from strata.stores.ports import RRF_K
from strata.stores.row_filter import matches
from strata.stores.token_spill import TokenSpill

__all__ = ["RECORD_OVERHEAD_BYTES", "HotTable", "TokenSpill"]

# Python objects per row (the record's columns, its payload's marshal bytes, the row's
# terms, postings and index entries): tracemalloc measured 3.1 KB a row for 419 LoCoMo turns
# as episodes (token vectors spilled, the matrix trimmed, records held by column) against
# 1.7 KB counted without it (vector and text; bench/hot_index_bytes.py, 2026-12-04); vectors,
# heap-held token vectors and text are counted exactly.
RECORD_OVERHEAD_BYTES = 1400
# the filter masks kept between writes: a handful of fixed filters, plus those of the dates
# queries name (strata.recall.service's search of the turns said then)
MAX_MASKS = 64


class HotTable:
    """Rows of one (user, collection): see the module docstring. ``spill``: keep token
    vectors in that file, not in the heap (``TokenSpill``)."""

    def __init__(self, dim: int, spill: TokenSpill | None = None) -> None:
        self.dim = dim
        self._spill = spill
        # spilled token vectors: offset and length by row (length 0: none)
        self._tok_at = np.zeros(16 if spill is not None else 0, dtype=np.int64)
        self._tok_len = np.zeros(16 if spill is not None else 0, dtype=np.int32)
        self._records = RecordColumns()
        self._row: dict[str, int] = {}
        self._matrix = np.zeros((16, dim), dtype=np.float32)
        self._lengths = np.zeros(16, dtype=np.float32)
        self._norms = np.zeros(16, dtype=np.float32)
        # each row's distinct terms (interned: one string object per term of the table)
        self._terms: list[tuple[str, ...] | None] = []
        # term -> {row: tf}; a term of one row only is a (row, tf) pair (most of a user's
        # terms: a one-entry dict costs ~130 B more)
        self._postings: dict[str, dict[int, int] | tuple[int, int]] = {}
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
            tokens: bytes | None, terms: Sequence[str] | None = None) -> None:
        """Add or replace a record (its vector, and its packed token vectors if any).
        ``terms``: its BM25 terms as the store keeps them (``tokenize(record.indexed_text)``, which
        runs when they are not given)."""
        self._kill(record.id)
        row = self._records.append(record)
        if row == len(self._matrix):
            self._matrix = np.concatenate([self._matrix, np.zeros_like(self._matrix)])
            self._lengths = np.concatenate([self._lengths, np.zeros_like(self._lengths)])
            self._norms = np.concatenate([self._norms, np.zeros_like(self._norms)])
            if self._spill is not None:
                self._tok_at = np.concatenate([self._tok_at, np.zeros_like(self._tok_at)])
                self._tok_len = np.concatenate([self._tok_len, np.zeros_like(self._tok_len)])
        self._row[record.id] = row
        self._matrix[row] = np.asarray(vector, dtype=np.float32)
        self._norms[row] = np.linalg.norm(self._matrix[row])
        counts = Counter(sys.intern(t) for t in (tokenize(record.indexed_text) if terms is None
                                                  else terms))
        self._terms.append(tuple(counts))
        self._lengths[row] = sum(counts.values())
        self._total_length += self._lengths[row]
        for term, tf in counts.items():
            posting = self._postings.get(term)
            if posting is None:
                self._postings[term] = (row, tf)
            elif isinstance(posting, tuple):
                self._postings[term] = {posting[0]: posting[1], row: tf}
            else:
                posting[row] = tf
        self._store_tokens(row, tokens)
        self._by_text[record.text] = row
        speaker = (record.payload.get("metadata") or {}).get("speaker")
        if isinstance(speaker, str) and speaker.strip():
            self.speakers.add(speaker.strip())
        self.nbytes += self._row_bytes(record.text, tokens)
        self._masks.clear()

    def trim(self) -> None:
        """Drop the arrays' spare capacity (a loaded table: its rows were all put at once,
        and doubling left up to half of the vectors' matrix empty)."""
        n = max(16, len(self._records))
        self._records.trim()
        self._matrix = self._matrix[:n].copy()
        self._lengths = self._lengths[:n].copy()
        self._norms = self._norms[:n].copy()
        if self._spill is not None:
            self._tok_at = self._tok_at[:n].copy()
            self._tok_len = self._tok_len[:n].copy()

    def state(self) -> dict[str, object] | None:
        """The table as ``marshal`` can write it, token vectors included (what
        ``strata.stores.hot_snapshot`` keeps); ``from_state`` gives it back, row for row.
        None: a record's payload cannot be written so."""
        records, n = self._records.state(), len(self._records)
        if records is None:
            return None
        blobs = [self._row_tokens(row) for row in range(n)]
        return {"dim": self.dim, "records": records, "matrix": self._matrix[:n].tobytes(),
                "lengths": self._lengths[:n].tobytes(), "norms": self._norms[:n].tobytes(),
                "terms": list(self._terms), "postings": self._postings,
                "tokens": b"".join(t for t in blobs if t),  # one blob: one copy back
                "token_lengths": np.fromiter((len(t or b"") for t in blobs), np.int64,
                                             count=n).tobytes(),
                "by_text": self._by_text, "total_length": float(self._total_length),
                "nbytes": self.nbytes, "speakers": sorted(self.speakers)}

    @classmethod
    def from_state(cls, state: dict[str, Any], spill: TokenSpill | None = None) -> HotTable:
        table = cls(int(state["dim"]), spill)
        table._records = RecordColumns.from_state(state["records"])
        n, size = len(table._records), max(16, len(table._records))
        for name in ("matrix", "lengths", "norms"):
            held = np.frombuffer(state[name], dtype=np.float32)
            array = np.zeros((size, table.dim) if name == "matrix" else size, np.float32)
            array[:n] = held.reshape(n, table.dim) if name == "matrix" else held
            setattr(table, f"_{name}", array)
        table._row = {rid: row for row, rid in enumerate(state["records"]["ids"])
                      if rid is not None}
        table._terms, table._postings = state["terms"], state["postings"]
        table._by_text, table.speakers = state["by_text"], set(state["speakers"])
        table._total_length, table.nbytes = state["total_length"], state["nbytes"]
        tokens, lengths = state["tokens"], np.frombuffer(state["token_lengths"], np.int64)
        offsets = np.cumsum(lengths) - lengths
        if spill is None:
            table._tokens = {row: tokens[offsets[row]:offsets[row] + lengths[row]]
                             for row in np.flatnonzero(lengths).tolist()}
            return table
        start = spill.append(tokens) if tokens else 0
        table._tok_at, table._tok_len = np.zeros(size, np.int64), np.zeros(size, np.int32)
        table._tok_at[:n], table._tok_len[:n] = start + offsets, lengths
        return table

    def _store_tokens(self, row: int, tokens: bytes | None) -> None:
        if self._spill is not None and row < len(self._tok_len) and self._tok_len[row]:
            self._spill.erase(int(self._tok_at[row]), int(self._tok_len[row]))
        if not tokens:
            if self._spill is not None:
                self._tok_len[row] = 0
            else:
                self._tokens.pop(row, None)
        elif self._spill is not None:
            self._tok_at[row] = self._spill.append(tokens)
            self._tok_len[row] = len(tokens)
        else:
            self._tokens[row] = tokens

    def _row_tokens(self, row: int) -> bytes | None:
        if self._spill is None:
            return self._tokens.get(row)
        if row >= len(self._tok_len) or not self._tok_len[row]:
            return None
        return self._spill.read(int(self._tok_at[row]), int(self._tok_len[row]))

    def replace_fields(self, record_id: str, status: MemoryStatus | None = None,
                       payload: dict[str, object] | None = None) -> StoredRecord | None:
        """Change a record's status or payload in place (text and vector unchanged)."""
        row = self._row.get(record_id)
        if row is None:
            return None
        if status is not None:
            self._masks.clear()
        self._records.replace(row, status, payload)
        return self._records.record(row)

    def delete(self, ids: Sequence[str]) -> int:
        removed = sum(1 for i in ids if self._kill(i))
        if removed:
            self._masks.clear()
        return removed

    def _kill(self, record_id: str) -> bool:
        row = self._row.pop(record_id, None)
        if row is None:
            return False
        text, terms = self._records.text(row), self._terms[row]
        assert terms is not None
        for term in terms:
            posting = self._postings.get(term)
            if isinstance(posting, tuple):
                if posting[0] == row:
                    del self._postings[term]
            elif posting is not None:
                posting.pop(row, None)
                if not posting:
                    del self._postings[term]
        self._total_length -= self._lengths[row]
        self.nbytes -= self._row_bytes(text, self._tokens.get(row))  # (a spill: not read)
        self._store_tokens(row, None)
        if self._by_text.get(text) == row:
            del self._by_text[text]
        self._records.kill(row)
        self._terms[row] = None
        if len(self._records) >= 64 and len(self._row) < 2 * len(self._records) // 3:
            self._compact()
        return True

    def _compact(self) -> None:
        keep = [(r, self._matrix[i].copy(), self._row_tokens(i))
                for i, r in enumerate(self._records.records()) if r is not None]
        spill = self._spill
        fresh = HotTable(self.dim, spill.fresh() if spill is not None else None)
        for record, vector, tokens in keep:
            fresh.put(record, vector, tokens)
        self.__dict__.update(fresh.__dict__)
        if spill is not None:
            spill.close()

    def _row_bytes(self, text: str, tokens: bytes | None) -> int:
        """What the row costs the heap (spilled token vectors are on disk: not counted)."""
        held = len(tokens or b"") if self._spill is None else 0
        return self.dim * 4 + held + len(text.encode("utf-8")) + RECORD_OVERHEAD_BYTES

    @property
    def spilled_bytes(self) -> int:
        """Bytes of token vectors in this table's spill file (dead rows' included)."""
        return self._spill.disk_bytes if self._spill is not None else 0

    # -- reads ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._row)

    def ids(self) -> list[str]:
        return list(self._row)

    def record(self, record_id: str, with_vector: bool = False) -> StoredRecord | None:
        row = self._row.get(record_id)
        if row is None:
            return None
        if not with_vector:
            return self._records.record(row)
        tokens = self._row_tokens(row)
        return self._records.record(
            row, vector=self._matrix[row].tolist(),
            tokens=base64.b64encode(tokens).decode("ascii") if tokens else None)

    def tokens_of(self, record_id: str) -> bytes | None:
        row = self._row.get(record_id)
        return None if row is None else self._row_tokens(row)

    def tokens_for_text(self, text: str) -> bytes | None:
        row = self._by_text.get(text)
        return None if row is None else self._row_tokens(row)

    def terms_for_text(self, text: str) -> tuple[str, ...] | None:
        """The distinct BM25 terms of a text the table holds."""
        row = self._by_text.get(text)
        return None if row is None else self._terms[row]

    def set_tokens(self, record_id: str, tokens: bytes) -> None:
        row = self._row[record_id]
        if self._spill is None:
            self.nbytes += len(tokens) - len(self._tokens.get(row, b""))
        self._store_tokens(row, tokens)

    def filtered(self, flt: RecordFilter | None, limit: int | None = None
                 ) -> list[StoredRecord]:
        mask = self._mask(flt)
        rows = np.flatnonzero(mask)[:limit]
        return [r for r in (self._records.record(int(i)) for i in rows) if r is not None]

    def _mask(self, flt: RecordFilter | None) -> npt.NDArray[np.bool_]:
        n = len(self._records)
        if flt is not None and flt.ids is not None:
            mask = np.zeros(n, dtype=bool)
            rows = [self._row[i] for i in flt.ids if i in self._row]
            mask[rows] = True
            rest = flt.model_copy(update={"ids": None})
            return mask & self._mask(rest)
        if flt is not None and (flt.event_from is not None or flt.event_before is not None):
            # a query's dates vary: the rest of the filter is cached, the dates read from
            # the event-time column (no payload decoded, nothing cached per date)
            rest = flt.model_copy(update={"event_from": None, "event_before": None})
            return self._mask(rest) & self._records.within(flt.event_from, flt.event_before)
        key = flt.model_dump_json() if flt is not None else ""
        cached = self._masks.get(key)
        if cached is None:
            cached = np.fromiter((r is not None and matches(r, flt)
                                  for r in self._records.records()), dtype=bool, count=n)
            if len(self._masks) >= MAX_MASKS:  # bounded: the oldest filter goes
                del self._masks[next(iter(self._masks))]
            self._masks[key] = cached
        return cached

    def cosines(self, vector: Sequence[float]) -> npt.NDArray[np.float32]:
        query = np.asarray(vector, dtype=np.float32)
        norm = float(np.linalg.norm(query)) or 1.0
        n = len(self._records)
        matrix = self._matrix[:n]
        norms = self._norms[:n] * norm
        return np.asarray(matrix @ query / np.where(norms == 0, 1.0, norms), dtype=np.float32)

    def scored(self, ids: Sequence[str], vector: Sequence[float], text: str
               ) -> list[tuple[StoredRecord, float, float]]:
        """The named live rows (in ``ids``' order), each with its cosine to ``vector`` and
        its BM25 for ``text``: what ``cosines`` and ``bm25`` give those rows, without the
        whole table's cosines or a record built with its vector."""
        rows = [row for row in (self._row.get(i) for i in ids) if row is not None]
        if not rows:
            return []
        at = np.asarray(rows, dtype=np.intp)
        query = np.asarray(vector, dtype=np.float32)
        norms = self._norms[at] * (float(np.linalg.norm(query)) or 1.0)
        dense = (self._matrix[at] @ query / np.where(norms == 0, 1.0, norms)).tolist()
        lexical = self.bm25(text)[at].tolist()
        out = []
        for row, cos, bm in zip(rows, dense, lexical, strict=True):
            record = self._records.record(row)
            assert record is not None  # a live row
            out.append((record, float(cos), float(bm)))
        return out

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
            if isinstance(posting, tuple):
                df = 1
                rows = np.asarray(posting[:1], dtype=np.int64)
                tf = np.asarray(posting[1:], dtype=np.float32)
            else:
                df = len(posting)
                rows = np.fromiter(posting.keys(), dtype=np.int64, count=df)
                tf = np.fromiter(posting.values(), dtype=np.float32, count=df)
            idf = math.log(1.0 + (alive - df + 0.5) / (df + 0.5))
            norm = tf + BM25_K1 * (1 - BM25_B + BM25_B * self._lengths[rows] / avg)
            scores[rows] += idf * tf * (BM25_K1 + 1) / norm
        return scores

    def _top_rows(self, scores: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_], k: int,
                  positive: bool) -> npt.NDArray[np.intp]:
        """The rows of the ``k`` best ``scores`` within ``mask``, best first."""
        keep = mask & (scores > 0) if positive else mask
        rows = np.flatnonzero(keep)
        if not len(rows) or k <= 0:
            return rows[:0]
        return rows[np.argsort(-scores[rows], kind="stable")[:k]]

    def _top(self, scores: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_], k: int,
             positive: bool) -> list[SearchHit]:
        out = []
        for i in self._top_rows(scores, mask, k, positive):
            record = self._records.record(int(i))
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
        """RRF of the dense and BM25 top ``k`` (``ports.fuse_rrf``'s, row by row: a record
        is built for the fused hits only); every hit carries both raw similarities
        (computed for every row, so none is missing)."""
        mask = self._mask(flt)
        dense, lexical = self.cosines(vector), self.bm25(text)
        fused: dict[int, tuple[list[float], dict[str, float]]] = {}
        for name, scores, positive in (("dense", dense, False), ("lexical", lexical, True)):
            for rank, row in enumerate(self._top_rows(scores, mask, k, positive).tolist()):
                score, parts = fused.setdefault(row, ([0.0], {}))
                score[0] += 1.0 / (RRF_K + rank + 1)
                parts[name] = float(scores[row])
        ranked = sorted(fused.items(), key=lambda e: e[1][0][0], reverse=True)[:k]
        out = []
        for row, (score, parts) in ranked:
            record = self._records.record(row)
            assert record is not None
            parts.setdefault("dense", float(dense[row]))
            parts.setdefault("lexical", float(lexical[row]))
            out.append(SearchHit(record=record, score=score[0], parts=parts))
        return out
