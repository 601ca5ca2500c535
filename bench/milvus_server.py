"""Strata's Milvus adapter on a real Milvus 2.3.5 server (PyPI's ``milvus``, BM25 scored
client-side) against milvus-lite (BM25 in the engine) in the same run, on LoCoMo users.

    .venv/bin/python bench/milvus_server.py --conversations 3 --queries 60

Each conversation is one user (a scope) whose turns are stored as facts with the hash
embedder (64-d); each store answers the conversation's questions: lexical, dense, hybrid,
a 5-id get, and a whole-scope scan (a cold hot-index load). Latencies per call, p50/p95/p99
in ms, and the ratio server / lite. The server is started here and stopped at the end.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.common.stats import percentile_ms  # noqa: E402
from bench.common.workload import locomo_users  # noqa: E402
from strata.models import Collection, Scope, StoredRecord  # noqa: E402
from strata.stores.embedders import HashEmbedder  # noqa: E402
from strata.stores.milvus import FlushPolicy, MilvusVectorStore  # noqa: E402
from strata.stores.redis_server import free_port  # noqa: E402

EMB = HashEmbedder(64)
FACTS = Collection.FACTS


def load(store: MilvusVectorStore, users: list[tuple[Scope, list[str]]]) -> float:
    started = time.perf_counter()
    for scope, texts in users:
        vectors = EMB.encode(texts)
        records = [StoredRecord(id=str(i), text=t, vector=v.tolist(), embed_model=EMB.model_id)
                   for i, (t, v) in enumerate(zip(texts, vectors, strict=True))]
        for start in range(0, len(records), 512):
            store.upsert(FACTS, scope, records[start:start + 512])
    store.flush(FACTS)
    return time.perf_counter() - started


def timed(call: Callable[..., object], *args: object) -> float:
    started = time.perf_counter()
    call(*args)
    return time.perf_counter() - started


def measure(store: MilvusVectorStore, users: list[tuple[Scope, list[str]]],
            questions: list[tuple[Scope, str]]) -> dict[str, list[float]]:
    series: dict[str, list[float]] = {k: [] for k in
                                      ("lexical", "dense", "hybrid", "get5", "scan_scope")}
    for scope, query in questions:
        vector = EMB.encode([query])[0].tolist()
        series["lexical"].append(timed(store.search_lexical, FACTS, scope, query, 10))
        series["dense"].append(timed(store.search_dense, FACTS, scope, vector, 10))
        series["hybrid"].append(timed(store.search_hybrid, FACTS, scope, vector, query, 10))
        series["get5"].append(timed(store.get, FACTS, scope, ["1", "2", "3", "4", "5"]))
    for scope, _ in users:
        series["scan_scope"] += [timed(store.scan_scope, FACTS, scope) for _ in range(3)]
    return series


def overlap(a: MilvusVectorStore, b: MilvusVectorStore,
            questions: list[tuple[Scope, str]]) -> float:
    """Mean share of the lexical top-10 ids the two stores agree on."""
    shares = []
    for scope, query in questions:
        x = {h.record.id for h in a.search_lexical(FACTS, scope, query, 10)}
        y = {h.record.id for h in b.search_lexical(FACTS, scope, query, 10)}
        if x or y:
            shares.append(len(x & y) / max(len(x), len(y)))
    return sum(shares) / len(shares) if shares else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" /
                        "locomo-dev")
    parser.add_argument("--conversations", type=int, default=3)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--time-tick-ms", type=int, default=0, help=(
        "the server's proxy.timeTickInterval (0: its default, 200 ms); a Strong read waits "
        "for the next tick"))
    args = parser.parse_args()
    from milvus import MilvusServer, MilvusServerConfig

    picked = locomo_users(args.data, "ms", args.conversations)
    users = [(Scope(tenant="bench", user=u.user_id),
              [t.content for s in u.sessions for t in s.turns]) for u in picked]
    per_user = max(1, args.queries // len(picked))
    questions = [(scope, q) for (scope, _), u in zip(users, picked, strict=True)
                 for q in u.questions[:per_user]]
    print(f"users {len(users)}, rows per user {[len(t) for _, t in users]}, "
          f"questions {len(questions)}")
    with tempfile.TemporaryDirectory(prefix="strata-milvus-bench-") as tmp:
        server = MilvusServer(MilvusServerConfig())
        server.set_base_dir(str(Path(tmp) / "server"))
        server.listen_port = free_port()
        if args.time_tick_ms:
            server.config.set("proxy.timeTickInterval", args.time_tick_ms)
        started = time.perf_counter()
        server.start()
        print(f"milvus 2.3.5 standalone up in {time.perf_counter() - started:.1f} s "
              f"(proxy.timeTickInterval {args.time_tick_ms or 'default 200'} ms)")
        try:
            remote = MilvusVectorStore(f"http://127.0.0.1:{server.listen_port}")
            lite = MilvusVectorStore(str(Path(tmp) / "lite.db"),
                                     flush_policy=FlushPolicy(max_unflushed_rows=100_000))
            stores = {"server-2.3.5": remote, "milvus-lite": lite}
            results = {}
            for name, store in stores.items():
                store.ensure_collections(EMB.dim)
                print(f"{name}: {store.features}; loaded in {load(store, users):.1f} s")
                measure(store, users, questions[:5])  # warm-up: loads, caches
                results[name] = measure(store, users, questions)
            print(f"lexical top-10 agreement server vs lite: "
                  f"{overlap(remote, lite, questions):.3f}")
            print(f"{'call':<11} {'store':<13} {'n':>4} {'p50':>8} {'p95':>8} {'p99':>8}  "
                  "p50 ratio server/lite")
            for call in results["milvus-lite"]:
                for name, series in results.items():
                    lat = series[call]
                    ratio = percentile_ms(results["server-2.3.5"][call], 50) / percentile_ms(
                        results["milvus-lite"][call], 50)
                    print(f"{call:<11} {name:<13} {len(lat):>4} {percentile_ms(lat, 50):>8.1f} "
                          f"{percentile_ms(lat, 95):>8.1f} {percentile_ms(lat, 99):>8.1f}  "
                          + (f"{ratio:.1f}x" if name == "server-2.3.5" else ""))
            remote.close()
            lite.close()
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
