"""Strata at scale on one node: a milvus-lite store of N memories over U users, a shard's hot
index over it, and what a cold user, a hot user and a hot memory cost (issue #39).

Build (``--build``): ``--memories`` episodes over ``--users`` users (even shares) plus
``--locomo-users`` users of ``--locomo-turns`` LoCoMo dev turns each, written to milvus-lite
at ``--dir`` through ``MilvusVectorStore`` (one upsert per user, as a shard's extraction
batch writes, or ``--bulk-rows`` rows of many users per unchecked insert, ``load_new``;
flushed every ``--flush-rows`` rows), with vectors and token vectors of the **hash
embedder** (384-d; one token vector per word). The texts are LoCoMo dev turns, each
embedded once and reused across users (the bench measures the store and the index, not the
model): the ingestion rate is the store's.

Then, on a fresh ``HotIndexStore`` over the store (as a shard after a restart):

* cold first touch: the first recall of ``--cold`` sampled users and of every LoCoMo user
  (the shard's recall path, ``ShardRecall.recall_memory``, query embedding precomputed), with
  the load's parts: ``scan_scope`` per collection (milvus-lite's query) and the table build;
* hot recall: the same users again, ``--hot-rounds`` recalls each;
* ``--ab N``: first, N users' scans with and without naming their partition-key bucket
  (milvus-lite), alternating in the same process;
* RSS per hot memory: the process's RSS growth over the loads, per memory loaded (and the
  index's own estimate, ``HotIndexStats.bytes``).

    .venv/bin/python bench/scale.py --dir /tmp/scale100k --build --memories 100000 --users 10000
    .venv/bin/python bench/scale.py --dir /tmp/scale100k        # the same store, read only
    # and mem0 on the same memories in the same run (bench/scale_mem0.py)
    .venv/bin/python bench/scale.py --dir /tmp/scale100k --build --snapshots \\
        --mem0-python .venv-bench/bin/python
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common.scale_plan import (
    DATA,
    QUERIES,
    cold_sample,
    locomo_turns,
    plan,
    summary_ms,
)
from strata.layers.memories import LongTermMemory
from strata.layers.records import memory_id, to_record
from strata.models import (
    Collection,
    MemoryItem,
    MemoryKind,
    Provenance,
    RecallRequest,
    Scope,
    StoredRecord,
)
from strata.recall.late import embed_queries, pack_tokens
from strata.shard.longterm import LazyLongTerm
from strata.shard.recall import ShardRecall
from strata.stores.embedders import HashEmbedder
from strata.stores.hot import HotIndexStore
from strata.stores.hot_snapshot import HotSnapshots, RedisMarks
from strata.stores.milvus import MilvusVectorStore
from strata.stores.milvus_flush import FlushPolicy
from strata.stores.redis.connection import RedisConnection
from strata.stores.redis_server import EmbeddedRedis

DIM = 384


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def user_scope(i: int, locomo: bool = False) -> Scope:
    return Scope(tenant="scale", user=f"{'locomo' if locomo else 'u'}{i}")


def named_scope(name: str) -> Scope:
    return Scope(tenant="scale", user=name)


class Corpus:
    """The LoCoMo dev turns with their hash vectors and packed token vectors, computed once."""

    def __init__(self, data: Path) -> None:
        self.turns = locomo_turns(data)
        embedder = HashEmbedder(DIM)
        texts = [t for _, t in self.turns]
        self.vectors = embedder.encode(texts)
        self.tokens = [pack_tokens(v) for v in embedder.token_vectors(texts)]

    def records(self, scope: Scope, start: int, n: int) -> list[StoredRecord]:
        out = []
        for j in range(n):
            k = (start + j) % len(self.turns)
            speaker, text = self.turns[k]
            item = MemoryItem(id=memory_id(scope, "s1", "episode", f"s1:{j}|{text}"),
                              kind=MemoryKind.EPISODE, text=text,
                              provenance=Provenance(session_id="s1", turn_ids=[f"s1:{j}"]),
                              metadata={"type": "event", "count": 1, "speaker": speaker})
            record = to_record(item, self.vectors[k].tolist(), "hash-384")
            record.tokens = self.tokens[k]
            out.append(record)
        return out


def build(store: MilvusVectorStore, corpus: Corpus, args: argparse.Namespace) -> dict[str, Any]:
    """Write every user's episodes; the ingestion rate (rows/s) and the time."""
    store.ensure_collections(DIM)
    started, written, last = time.perf_counter(), 0, time.perf_counter()
    pending: list[tuple[Scope, StoredRecord]] = []
    for name, n, start, _ in plan(args.memories, args.users, args.locomo_users,
                                  args.locomo_turns, len(corpus.turns)):
        scope = named_scope(name)
        records = corpus.records(scope, start, n)
        if args.bulk_rows:  # many users' rows in one call
            pending += [(scope, r) for r in records]
            if len(pending) >= args.bulk_rows:
                store.load_new(Collection.EPISODES, pending)
                pending = []
        else:
            store.upsert(Collection.EPISODES, scope, records)
        written += n
        if time.perf_counter() - last > 15:
            last = time.perf_counter()
            print(f"  {written:,} rows, {written / (last - started):,.0f} rows/s", flush=True)
    store.load_new(Collection.EPISODES, pending)
    store.flush()
    seconds = time.perf_counter() - started
    return {"rows": written, "seconds": round(seconds, 1), "rows_per_s": round(written / seconds),
            "write": f"one unchecked insert per {args.bulk_rows} rows" if args.bulk_rows
            else "one upsert per user"}


class TimedStore:
    """The durable store with its scope scans timed (the cold load's read)."""

    def __init__(self, inner: MilvusVectorStore) -> None:
        self.inner = inner
        self.scan_ms: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def scan_scope(self, collection: Collection, scope: Scope,
                   limit: int = 16_384) -> list[StoredRecord]:
        started = time.perf_counter()
        try:
            return self.inner.scan_scope(collection, scope, limit)
        finally:
            self.scan_ms.append((time.perf_counter() - started) * 1000)

    def scan_scope_terms(self, collection: Collection, scope: Scope, limit: int = 16_384
                         ) -> list[tuple[StoredRecord, list[str] | None]]:
        started = time.perf_counter()
        try:
            return self.inner.scan_scope_terms(collection, scope, limit)
        finally:
            self.scan_ms.append((time.perf_counter() - started) * 1000)


def recall(shard: ShardRecall, scope: Scope, query: str, embedded: Any) -> float:
    started = time.perf_counter()
    shard.recall_memory(scope, RecallRequest(user_id=scope.user, query=query), None,
                        lambda: embedded)
    return (time.perf_counter() - started) * 1000


def measure(store: MilvusVectorStore, args: argparse.Namespace,
            snapshots: HotSnapshots | None = None) -> dict[str, Any]:
    embedder = HashEmbedder(DIM)
    timed = TimedStore(store)
    hot = HotIndexStore(timed, DIM, tokens=lambda: embedder,  # type: ignore[arg-type,return-value]
                        max_bytes=args.hot_cap_mib * 2**20, ttl_s=1e9, snapshots=snapshots,
                        snapshot_idle_s=0.0)
    shard = ShardRecall(LazyLongTerm(lambda: LongTermMemory(hot, embedder)))
    queries = [(q, embed_queries(embedder, [q])[0]) for q in QUERIES]
    users = [named_scope(name) for name in cold_sample(args.users, args.cold)]
    locomo = [user_scope(i, locomo=True) for i in range(args.locomo_users)]
    recall(shard, Scope(tenant="scale", user="warmup"), *queries[0])  # imports, first calls
    gc.collect()
    rss0 = _rss_mb()
    out: dict[str, Any] = {}
    for label, group in (("cold", users), ("cold_locomo", locomo)):
        ms, scans, loads = [], [], []
        for i, scope in enumerate(group):
            timed.scan_ms.clear()
            ms.append(recall(shard, scope, *queries[i % len(queries)]))
            scans.append(sum(timed.scan_ms))
            loads.append(hot.stats().load_ms[-1])
        if ms:
            out[label] = {"recall_ms": summary_ms(ms), "load_ms": summary_ms(loads),
                          "scan_scope_ms": summary_ms(scans)}
    gc.collect()
    stats = hot.stats()
    out["rss_mb_growth"] = round(_rss_mb() - rss0, 1)
    out["hot_memories"] = stats.memories
    out["rss_per_hot_memory_b"] = round((_rss_mb() - rss0) * 2**20 / max(1, stats.memories))
    out["estimated_per_memory_b"] = round(stats.bytes / max(1, stats.memories))
    hot_ms = [recall(shard, scope, *queries[(i + r) % len(queries)])
              for r in range(args.hot_rounds) for i, scope in enumerate(users + locomo)]
    out["hot"] = {"recall_ms": summary_ms(hot_ms)}
    if snapshots is not None:
        out |= from_snapshots(hot, shard, snapshots, users, locomo, queries, args)
    return out


def from_snapshots(hot: HotIndexStore, shard: ShardRecall, snapshots: HotSnapshots,
                   users: list[Scope], locomo: list[Scope], queries: list[Any],
                   args: argparse.Namespace) -> dict[str, Any]:
    """``--snapshots``: every loaded user's snapshot written (the sweep of an idle shard),
    then a fresh index over the same store and files (a restarted shard): the same users'
    first touch again, now read from their files; the answers compared with the store's."""
    started = time.perf_counter()
    written = hot.seal_idle()
    seal_s = time.perf_counter() - started
    embedder = HashEmbedder(DIM)
    fresh = HotIndexStore(store := hot.inner, DIM, tokens=lambda: embedder,  # type: ignore[arg-type,return-value]
                          max_bytes=args.hot_cap_mib * 2**20, ttl_s=1e9, snapshots=snapshots)
    again = ShardRecall(LazyLongTerm(lambda: LongTermMemory(fresh, embedder)))
    out: dict[str, Any] = {"snapshots_written": written, "seal_s": round(seal_s, 2),
                           "snapshot_mb": round(sum(p.stat().st_size for p in
                                                    snapshots.directory.glob("*.snap")) / 2**20, 1)}
    for label, group in (("cold_snapshot", users), ("cold_locomo_snapshot", locomo)):
        ms, loads = [], []
        for i, scope in enumerate(group):
            scans = len(store.scan_ms)  # type: ignore[attr-defined]
            ms.append(recall(again, scope, *queries[i % len(queries)]))
            assert len(store.scan_ms) == scans, "read from the store"  # type: ignore[attr-defined]
            loads.append(fresh.stats().load_ms[-1])
            query, embedded = queries[i % len(queries)]
            request = RecallRequest(user_id=scope.user, query=query)
            want = shard.recall_memory(scope, request, None, lambda e=embedded: e)
            got = again.recall_memory(scope, request, None, lambda e=embedded: e)
            assert [c.id for c in got.found.candidates] == [c.id for c in want.found.candidates]
        if ms:
            out[label] = {"recall_ms": summary_ms(ms), "load_ms": summary_ms(loads)}
    out["restored"] = fresh.stats().restored
    return out


def scan_ab(store: MilvusVectorStore, args: argparse.Namespace) -> dict[str, Any]:
    """One scope's scan (``scan_scope_terms``, what a load reads) with and without naming
    its partition-key bucket, alternating per user in this process: the same rows, and the
    time of each."""
    rng = random.Random(3)
    users = [user_scope(i) for i in rng.sample(range(args.users), min(args.ab, args.users))]
    users += [user_scope(i, locomo=True) for i in range(args.locomo_users)]
    out: dict[str, dict[str, list[float]]] = {}
    for i, scope in enumerate(users):
        kind = "locomo" if scope.user.startswith("locomo") else "small"
        got = {}
        for prune in ((True, False) if i % 2 else (False, True)):
            store.prune_scopes = prune
            started = time.perf_counter()
            rows = store.scan_scope_terms(Collection.EPISODES, scope)
            ms = (time.perf_counter() - started) * 1000
            out.setdefault(f"{kind}_{'bucket' if prune else 'all'}", {}).setdefault(
                "ms", []).append(ms)
            got[prune] = sorted(r.id for r, _ in rows)
        assert got[True] == got[False] and got[True], scope.key
    store.prune_scopes = True
    return {k: summary_ms(v["ms"]) for k, v in out.items()}


def mem0_phase(args: argparse.Namespace) -> dict[str, Any]:
    """``bench/scale_mem0.py`` on the same plan, in this run (its own interpreter)."""
    import subprocess

    out = args.dir / "mem0.json"
    subprocess.run([str(args.mem0_python), str(Path(__file__).with_name("scale_mem0.py")),
                    "--dir", str(args.dir / "mem0"), "--memories", str(args.memories),
                    "--users", str(args.users), "--locomo-users", str(args.locomo_users),
                    "--locomo-turns", str(args.locomo_turns), "--cold", str(args.cold),
                    "--hot-rounds", str(args.hot_rounds), "--data", str(args.data),
                    "--max-seconds", str(args.mem0_max_seconds), "--json", str(out)],
                   check=True)
    return dict(json.loads(out.read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--build", action="store_true", help="write the store first")
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--locomo-users", type=int, default=3)
    parser.add_argument("--locomo-turns", type=int, default=700)
    parser.add_argument("--cold", type=int, default=100, help="sampled users to touch")
    parser.add_argument("--hot-rounds", type=int, default=3)
    parser.add_argument("--ab", type=int, default=0,
                        help="first: this many users' scans with and without the bucket")
    parser.add_argument("--hot-cap-mib", type=int, default=1024)
    parser.add_argument("--bulk-rows", type=int, default=0,
                        help="build: insert this many new rows (of many users) per call; 0: "
                             "one upsert per user")
    parser.add_argument("--flush-rows", type=int, default=20_000)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--snapshots", action="store_true",
                        help="then the same first touches from hot snapshot files")
    parser.add_argument("--mem0-python", type=Path,
                        help="then mem0 on the same memories (bench/scale_mem0.py) with this "
                             "interpreter (one with mem0: .venv-bench/bin/python)")
    parser.add_argument("--mem0-max-seconds", type=float, default=3600.0)
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    store = MilvusVectorStore(str(args.dir / "milvus.db"),
                              flush_policy=FlushPolicy(args.flush_rows, 60.0))
    result: dict[str, Any] = {"memories": args.memories, "users": args.users,
                              "locomo_users": args.locomo_users, "embedder": "hash-384"}
    meta = args.dir / "meta.json"
    if args.build:
        result["ingest"] = build(store, Corpus(args.data), args)
        meta.write_text(json.dumps({k: result[k] for k in ("memories", "users", "locomo_users")}
                                   | {"ingest": result["ingest"]}))
        print("ingest:", result["ingest"], flush=True)
        # measured on a fresh client, as a restarted shard would read
        store.close()
        store = MilvusVectorStore(str(args.dir / "milvus.db"))
    elif meta.exists():  # the store as it was built
        result.update(json.loads(meta.read_text()))
        args.users, args.locomo_users = result["users"], result["locomo_users"]
        args.memories = result["memories"]
    store.ensure_collections(DIM)
    if args.ab:
        result["scan_ab"] = scan_ab(store, args)
        print("scan A/B:", json.dumps(result["scan_ab"]), flush=True)
    if args.snapshots:  # the marks in a real Redis, the files next to the store
        redis = EmbeddedRedis(args.dir / "redis").start()
        snapshots = HotSnapshots(args.dir / "snapshots",
                                 RedisMarks(RedisConnection(redis.url, "scale:")), "hash/384")
        try:
            result.update(measure(store, args, snapshots))
        finally:
            redis.stop()
    else:
        result.update(measure(store, args))
    store.close()
    if args.mem0_python:  # Strata's figures first: mem0's phase can take long
        print(json.dumps(result, indent=1), flush=True)
        result["mem0"] = mem0_phase(args)
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
