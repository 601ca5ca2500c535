"""The long-term write path and the query encoder, each against its previous design, in one run.

1. Extraction writes: synthetic users' sessions (``bench.common.workload``, 50 user turns a
   session) go through the rule extractor and ``LongTermWriter.write`` into a
   ``HotIndexStore`` over milvus-lite with the packaged MiniLM (``WriteEmbedder``), as the
   shard writes them. ``batched``: today's writer (a job's texts encoded in one forward
   pass, its durable writes sent as one upsert per collection). ``one by one``: the previous
   design (every candidate encoded and upserted on its own), the same code with the batching
   turned off. Each side gets its own users and its own milvus-lite file; the sides
   alternate by session so the machine's load falls on both alike.
2. The query encoder: ``MiniLMEmbedder.encode_with_tokens`` (the model called directly)
   against ``SentenceTransformer.encode(output_value=None)`` (what it called before) on the
   LoCoMo dev questions, one at a time and in batches of 8, alternating.

    .venv/bin/python bench/write_path.py --quick
    .venv/bin/python bench/write_path.py --users 4 --turns 200 --queries 200
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.common.workload import locomo_users, synthetic_users  # noqa: E402
from strata.extract.exchanges import exchange_candidates  # noqa: E402
from strata.extract.rules import RuleExtractor  # noqa: E402
from strata.extract.worker import LongTermWriter  # noqa: E402
from strata.layers.memories import LongTermMemory  # noqa: E402
from strata.models import Role, Scope, Turn  # noqa: E402
from strata.stores.embedders import MiniLMEmbedder, WriteEmbedder  # noqa: E402
from strata.stores.hot import HotIndexStore  # noqa: E402
from strata.stores.milvus import MilvusVectorStore  # noqa: E402


def writer(path: str, model: MiniLMEmbedder, batched: bool) -> LongTermWriter:
    embedder = WriteEmbedder(model)
    store = MilvusVectorStore(path)
    store.ensure_collections(embedder.dim)
    memory = LongTermMemory(HotIndexStore(store, embedder.dim, tokens=lambda: embedder),
                            embedder)
    if batched:
        return memory.writer
    return LongTermWriter(memory.facts, memory.episodes, memory.filter)  # no batching


def jobs(n_users: int, turns: int, tag: str) -> list[tuple[Scope, list[Turn]]]:
    out = []
    for user in synthetic_users(n_users, turns, tag, seed=11):
        scope = Scope(tenant="bench", user=user.user_id)
        for session in user.sessions:
            out.append((scope, [Turn(user_id=user.user_id, session_id=session.session_id,
                                     turn_id=f"{session.session_id}:{i}", role=Role.USER,
                                     content=t.content, created_at=t.created_at)
                                for i, t in enumerate(session.turns, start=1)]))
    return out


def write_ab(model: MiniLMEmbedder, n_users: int, turns: int) -> dict[str, dict[str, float]]:
    tmp = tempfile.mkdtemp(prefix="write-path-")
    sides = {name: (writer(f"{tmp}/{name}.db", model, name == "batched"),
                    jobs(n_users, turns, name.replace(" ", "-")))
             for name in ("batched", "one by one")}
    extract = RuleExtractor()
    totals = {name: {"turns": 0.0, "memories": 0.0, "seconds": 0.0} for name in sides}
    for i in range(max(len(j) for _, j in sides.values())):
        for name, (write, side_jobs) in sides.items():
            if i >= len(side_jobs):
                continue
            scope, session = side_jobs[i]
            candidates = [*extract.extract(session), *exchange_candidates(session)]
            started = time.perf_counter()
            summary = write.write(scope, candidates)
            totals[name]["seconds"] += time.perf_counter() - started
            totals[name]["turns"] += len(session)
            totals[name]["memories"] += (sum(summary.facts.values())
                                         + sum(summary.episodes.values()))
    for row in totals.values():
        row["turns_per_s"] = round(row["turns"] / row["seconds"], 1)
        row["seconds"] = round(row["seconds"], 2)
    return totals


def encoder_ab(model: MiniLMEmbedder, n_queries: int) -> dict[str, dict[str, float]]:
    users = locomo_users(REPO.parent / "shared" / "data" / "locomo-dev", "q")
    queries = [q for u in users for q in u.questions][:n_queries]
    st = model._model
    sides = {"direct": lambda texts: model.encode_with_tokens(texts),
             "sentence-transformers": lambda texts: st.encode(texts, output_value=None,
                                                             show_progress_bar=False)}
    for encode in sides.values():
        encode(queries[:8])  # warm
    out: dict[str, dict[str, float]] = {}
    for batch in (1, 8):
        spent = dict.fromkeys(sides, 0.0)
        for start in range(0, len(queries), batch):
            for name, encode in sides.items():
                began = time.perf_counter()
                encode(queries[start:start + batch])
                spent[name] += time.perf_counter() - began
        for name, seconds in spent.items():
            out[f"{name}, batch {batch}"] = {"ms_per_query": round(seconds / len(queries) * 1000,
                                                                    2)}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--users", type=int, default=4)
    p.add_argument("--turns", type=int, default=200, help="user turns per user")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--quick", action="store_true", help="1 user x 100 turns, 50 queries")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    if args.quick:
        args.users, args.turns, args.queries = 1, 100, 50
    model = MiniLMEmbedder()
    print(f"load avg {os.getloadavg()[0]:.2f}; {os.cpu_count()} cpus", flush=True)
    report = {"writes": write_ab(model, args.users, args.turns),
              "encoder": encoder_ab(model, args.queries),
              "load_avg_end": round(os.getloadavg()[0], 2)}
    print("\n| write path | turns | memories written | seconds | turns/s |")
    print("|---|---:|---:|---:|---:|")
    for name, row in report["writes"].items():
        print(f"| {name} | {row['turns']:.0f} | {row['memories']:.0f} | {row['seconds']} "
              f"| {row['turns_per_s']} |")
    w = report["writes"]
    ratio = w["batched"]["turns_per_s"] / w["one by one"]["turns_per_s"]
    print(f"\nbatched / one by one: x{ratio:.2f}")
    print("\n| query encoder | ms per query |")
    print("|---|---:|")
    for name, row in report["encoder"].items():
        print(f"| {name} | {row['ms_per_query']} |")
    print(f"\nload avg at the end {report['load_avg_end']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
