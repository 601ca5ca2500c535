"""What each byte of the hot index is: one LoCoMo user's episodes in a ``HotTable``, by part.

One LoCoMo conversation's turns become episodes as the extraction writes them (payload with
provenance, event time, speaker), with their MiniLM vectors and token vectors (packed as
stored, ``strata.recall.late.pack_tokens``). The encodings are cached in ``--cache`` (a
rerun does not load the model). The table is built inside a tracemalloc window (the total a
loaded user costs in the Python heap), then its parts are sized one by one with a deep
``sys.getsizeof`` walk that counts every object once, in this order: the dense matrix, the
token vectors held in the heap, the records (held by column: the texts, the payloads, the
other columns), the BM25 terms and postings, the row and text indexes. Token vectors the
table keeps outside the heap (``HotTable(spill=...)``) are counted apart: they are on local
disk, read per recall for the candidates only.

    .venv/bin/python bench/hot_index_bytes.py [--conversation conv-26] [--spill | --no-spill]
"""

from __future__ import annotations

import argparse
import base64
import gc
import json
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from strata.layers.records import memory_id, to_record
from strata.models import MemoryItem, MemoryKind, Provenance, Scope, StoredRecord, utcnow
from strata.recall.late import pack_tokens
from strata.stores.hot_table import HotTable, TokenSpill
from strata.stores.lexical import tokenize

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev"
MODEL_ID = "all-MiniLM-L6-v2"


def encodings(data: Path, conversation: str, cache: Path
              ) -> tuple[list[tuple[str, str]], np.ndarray, list[str]]:
    """The conversation's (speaker, text) turns, their vectors and packed token vectors."""
    conv = json.loads((data / f"{conversation}.json").read_text())
    turns = [(t["speaker"], t["text"]) for key, value in conv.items()
             if key.startswith("session_") and isinstance(value, list) for t in value]
    path = cache / f"{conversation}-minilm.npz"
    if path.exists():
        saved = np.load(path, allow_pickle=False)
        return turns, saved["vectors"], [str(t) for t in saved["tokens"]]
    from strata.settings import Settings
    from strata.stores.embedders import make_embedder
    embedder = make_embedder(Settings(embedder="minilm"))
    texts = [text for _, text in turns]
    vectors = embedder.encode(texts)
    tokens = [pack_tokens(t) for t in embedder.token_vectors(texts)]  # type: ignore[attr-defined]
    cache.mkdir(parents=True, exist_ok=True)
    np.savez(path, vectors=vectors, tokens=np.asarray(tokens))
    return turns, vectors, tokens


def records_of(turns: list[tuple[str, str]], vectors: np.ndarray) -> list[StoredRecord]:
    scope = Scope(tenant="bench", user="u")
    out = []
    for i, ((speaker, text), vector) in enumerate(zip(turns, vectors, strict=True)):
        item = MemoryItem(id=memory_id(scope, "s1", "episode", f"s1:{i}|{text}"),
                          kind=MemoryKind.EPISODE, text=text, event_time=utcnow(),
                          provenance=Provenance(session_id="s1", turn_ids=[f"s1:{i}"]),
                          metadata={"type": "event", "count": 1, "object": None,
                                    "sentiments": [0.0], "merged_ids": ["0" * 24],
                                    "speaker": speaker})
        out.append(to_record(item, vector.tolist(), MODEL_ID))
    return out


class Sizer:
    """Deep sizes, each object counted once (the first part that reaches it owns it)."""

    def __init__(self) -> None:
        self.seen: set[int] = set()

    def size(self, obj: Any) -> int:
        total, stack = 0, [obj]
        while stack:
            o = stack.pop()
            if id(o) in self.seen or o is None or isinstance(o, (bool, type)):
                continue
            self.seen.add(id(o))
            if isinstance(o, np.ndarray):
                total += o.nbytes + 112 if o.base is None else 112
                continue
            total += sys.getsizeof(o)
            if isinstance(o, dict):
                stack.extend(o.keys())
                stack.extend(o.values())
            elif isinstance(o, (list, tuple, set, frozenset)):
                stack.extend(o)
            elif hasattr(o, "__dict__") and not isinstance(o, (str, bytes)):
                stack.append(o.__dict__)
                extra = getattr(o, "__pydantic_fields_set__", None)
                if extra is not None:
                    stack.append(extra)
            elif hasattr(o, "__slots__"):
                stack.extend(getattr(o, s) for s in o.__slots__ if hasattr(o, s))
        return total


def parts(table: HotTable) -> dict[str, int]:
    """Bytes of each part of ``table`` (see the module docstring for the order)."""
    sizer, out = Sizer(), {}
    d = table.__dict__
    out["dense vectors (matrix, norms, lengths)"] = sum(
        sizer.size(d[k]) for k in ("_matrix", "_norms", "_lengths"))
    out["token vectors in the heap"] = sizer.size(d["_tokens"])
    columns = d["_records"].__dict__  # ``hot_records.RecordColumns``
    out["text (str objects)"] = sum(sizer.size(t) for t in columns["_texts"])
    out["payloads (marshal bytes: provenance, metadata...)"] = sizer.size(columns["_payloads"])
    out["records (ids, statuses, times: columns)"] = sizer.size(d["_records"])
    out["BM25 terms (per-row Counter)"] = sizer.size(d["_terms"])
    out["BM25 postings"] = sizer.size(d["_postings"])
    out["row and text indexes"] = sizer.size(d["_row"]) + sizer.size(d["_by_text"])
    rest = {k: v for k, v in d.items()
            if k not in {"_matrix", "_norms", "_lengths", "_tokens", "_records", "_terms",
                         "_postings", "_row", "_by_text"}}
    out["other"] = sizer.size(rest)
    return out


def build(records: list[StoredRecord], tokens: list[str], dim: int,
          spill: TokenSpill | None) -> tuple[HotTable, int]:
    """The table as a load builds it (a fresh row from the store, its token string decoded),
    and the heap bytes tracemalloc saw it keep."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    table = HotTable(dim, spill=spill)
    for record, packed in zip(records, tokens, strict=True):
        table.put(record.model_copy(deep=True), record.vector or [], base64.b64decode(packed))
    table.trim()  # as ``HotIndexStore`` does after a load
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    return table, sum(s.size_diff for s in after.compare_to(before, "filename"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--conversation", default="conv-26")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "hotbytes")
    args = parser.parse_args()
    turns, vectors, tokens = encodings(args.data, args.conversation, args.cache)
    records = records_of(turns, vectors)
    tokenize("warm up jieba 结巴")
    n = len(records)
    stored = sum(len(base64.b64decode(t)) for t in tokens)
    print(f"memories: {n} ({args.conversation}, {MODEL_ID}); token vectors as stored: "
          f"{stored / n:,.0f} B a memory raw int8 ({stored / n / 386:.1f} tokens of 384 "
          f"int8 + a float16 scale), {sum(len(t) for t in tokens) / n:,.0f} B as base64 "
          "in Milvus")
    for label, spill in (("in the heap", None), ("spilled to a local file", TokenSpill())):
        table, measured = build(records, tokens, vectors.shape[1], spill)
        sized = parts(table)
        print(f"\n## token vectors {label}")
        print(f"{'part':<48} {'B / memory':>10}")
        for part, nbytes in sized.items():
            print(f"{part:<48} {nbytes / n:>10,.0f}")
        print(f"{'sum of parts':<48} {sum(sized.values()) / n:>10,.0f}")
        print(f"{'heap, tracemalloc (what a loaded user costs)':<48} {measured / n:>10,.0f}")
        print(f"{'HotTable.nbytes (what the cap counts)':<48} {table.nbytes / n:>10,.0f}")
        if spill is not None:
            print(f"{'on local disk (token vectors, page cache)':<48} "
                  f"{spill.disk_bytes / n:>10,.0f}")
            spill.close()


if __name__ == "__main__":
    main()
