"""Memory of the hot index per memory: what ``HotTable`` estimates against what tracemalloc sees.

One LoCoMo conversation's turns become episodes as the extraction writes them (payload with
provenance, event time, speaker), with their real MiniLM vectors and token vectors (packed
as stored: ``strata.recall.late.pack_tokens``). The table is built inside a tracemalloc
window (jieba's dictionary is loaded before it: it is per process, not per user), so the
figure counts everything a loaded user costs: records, payloads, vectors, token vectors,
BM25 postings and the matrix's spare capacity. Also prints the stored size of the token
vectors per memory (the Milvus ``tokens`` field).

    .venv/bin/python bench/hot_index_memory.py [--conversation conv-26] [--embedder hash]
"""

from __future__ import annotations

import argparse
import base64
import gc
import json
import tracemalloc
from pathlib import Path

from strata.layers.records import memory_id, to_record
from strata.models import MemoryItem, MemoryKind, Provenance, Scope, utcnow
from strata.recall.late import pack_tokens
from strata.settings import Settings
from strata.stores.embedders import make_embedder
from strata.stores.hot_table import HotTable
from strata.stores.lexical import tokenize

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--conversation", default="conv-26")
    parser.add_argument("--embedder", default="minilm", choices=["minilm", "hash"])
    args = parser.parse_args()
    conv = json.loads((args.data / f"{args.conversation}.json").read_text())
    turns = [(t["speaker"], t["text"]) for key, value in conv.items()
             if key.startswith("session_") and isinstance(value, list) for t in value]
    embedder = make_embedder(Settings(embedder=args.embedder, hash_dim=384))
    texts = [text for _, text in turns]
    vectors = embedder.encode(texts)
    tokens = [pack_tokens(t) for t in embedder.token_vectors(texts)]  # type: ignore[attr-defined]
    scope = Scope(tenant="bench", user="u")
    records = []
    for i, ((speaker, text), vector, packed) in enumerate(zip(turns, vectors, tokens,
                                                              strict=True)):
        item = MemoryItem(id=memory_id(scope, "s1", "episode", f"s1:{i}|{text}"),
                          kind=MemoryKind.EPISODE, text=text, event_time=utcnow(),
                          provenance=Provenance(session_id="s1", turn_ids=[f"s1:{i}"]),
                          metadata={"type": "event", "count": 1, "object": None,
                                    "sentiments": [0.0], "merged_ids": ["0" * 24],
                                    "speaker": speaker})
        records.append((to_record(item, vector.tolist(), embedder.model_id), packed))
    tokenize("warm up jieba 结巴")
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    table = HotTable(embedder.dim)
    for record, packed in records:  # what a load does: decode the stored string
        table.put(record.model_copy(deep=True), record.vector or [], base64.b64decode(packed))
    gc.collect()
    after = tracemalloc.take_snapshot()
    measured = sum(s.size_diff for s in after.compare_to(before, "filename"))
    n = len(table)
    stored = sum(len(p) for _, p in records) / n
    print(f"memories: {n} ({args.conversation}, {embedder.model_id})")
    print(f"hot index, measured (tracemalloc): {measured / n:,.0f} bytes per memory")
    print(f"hot index, estimated (HotTable.nbytes, what the cap counts): "
          f"{table.nbytes / n:,.0f} bytes per memory")
    print(f"stored token vectors (Milvus `tokens` field): {stored:,.0f} bytes per memory; "
          f"text {sum(len(r.text.encode()) for r, _ in records) / n:,.0f} bytes")


if __name__ == "__main__":
    main()
