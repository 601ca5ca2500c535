"""Recall from the hot index as a shard holds more users: does one user's recall cost more?

Issue #13: at 100 users × 500 memories (~57k memories per shard) the shard's recall was p50
145 ms against 51–62 ms at 10–45 users. This reproduces a shard's hot index in process:

* users are synthetic (``bench.common.workload.synthetic_users``, 500 user turns each),
  extracted as the service extracts them (``RuleExtractor`` + ``exchange_candidates``,
  through ``LongTermWriter``: facts, episodes and exchanges, ~1,100 memories a user), into
  the in-memory durable store with their token vectors, as a shard persists them;
* the queried user is embedded with MiniLM (``--queried-embedder minilm``, vectors and token
  vectors of the real model); the bulk users get random unit vectors and as many random token
  vectors as MiniLM gives their texts (``BulkEmbedder``: same shapes, built fast);
* each phase loads users into a fresh ``HotIndexStore`` (the cold build the first touch of a
  user pays), then runs the shard's own recall path (``ShardRecall.recall_memory``, the
  query embedding precomputed) for the queried user, at 1 in flight and at ``--threads`` in
  flight (threads, as the shard actor's ``max_concurrency``), and reinforces what it returned
  as the ingress does.

Phases: ``small`` holds the queried user and one other; ``full`` holds all ``--users``. The
GC time during recalls is measured with ``gc.callbacks``; ``--freeze`` calls ``gc.freeze()``
after the loads (what a shard could do).

    .venv/bin/python bench/hot_index_scale.py [--users 50] [--per-user 500] [--freeze]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import pickle
import re
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common.workload import UserData, synthetic_users
from strata.extract.exchanges import exchange_candidates
from strata.extract.rules import RuleExtractor
from strata.layers.memories import LongTermMemory
from strata.models import Collection, RecallRequest, Role, Scope, StoredRecord, Turn
from strata.recall.late import MAX_STORED_TOKENS, embed_queries
from strata.settings import Settings
from strata.shard.longterm import LazyLongTerm
from strata.shard.models import MemoryAnswer
from strata.shard.recall import ShardRecall
from strata.stores.embedders import MiniLMEmbedder, WriteEmbedder, make_embedder
from strata.stores.hot import HotIndexStore
from strata.stores.hot_table import HotTable
from strata.stores.ports import Embedder, QueryEmbedding
from strata.testing.fake_vectors import FakeVectorStore

DIM = 384
TENANT = "bench"
TABLES: dict[str, Callable[[int], Any]] = {"HotTable": HotTable}


class BulkEmbedder:
    """Random unit vectors (seeded by the text) of MiniLM's shapes: one pooled vector, and
    about as many token vectors as MiniLM's word pieces (capped as stored)."""

    def __init__(self, dim: int = DIM) -> None:
        self._dim = dim

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def model_id(self) -> str:
        return "bench-random"

    def _rng(self, text: str) -> np.random.Generator:
        return np.random.default_rng(int.from_bytes(
            hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little"))

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.stack([self._rng(t).standard_normal(self._dim) for t in texts]
                       ) if texts else np.zeros((0, self._dim))
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)

    def token_vectors(self, texts: Sequence[str]) -> list[npt.NDArray[np.float32]]:
        out = []
        for text in texts:
            n = min(MAX_STORED_TOKENS, int(len(re.findall(r"\w+|[^\w\s]", text)) * 1.2) + 2)
            rows = self._rng(text + "#").standard_normal((n, self._dim))
            out.append((rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32))
        return out


def _turns(user: UserData) -> Iterator[list[Turn]]:
    for session in user.sessions:
        yield [Turn(turn_id=f"{session.session_id}:{i}", session_id=session.session_id,
                    user_id=user.user_id, role=Role.USER, content=t.content,
                    created_at=t.created_at) for i, t in enumerate(session.turns)]


def write_user(durable: FakeVectorStore, embedder: Embedder, user: UserData) -> int:
    """Extract and write one user as a shard does (through a hot index, so the episodes'
    token vectors are persisted with them); the memories it ended with."""
    tokens = embedder if hasattr(embedder, "token_vectors") else None
    hot = HotIndexStore(durable, embedder.dim, tokens=lambda: tokens,  # type: ignore[arg-type,return-value]
                        max_bytes=2**40)
    memory = LongTermMemory(hot, embedder)
    scope = Scope(tenant=TENANT, user=user.user_id)
    extractor = RuleExtractor()
    for turns in _turns(user):
        memory.writer.write(scope, [*extractor.extract(turns), *exchange_candidates(turns)])
    return sum(durable.count(c, scope) for c in (Collection.FACTS, Collection.EPISODES,
                                                 Collection.PROCEDURES))


class PackedDurable(FakeVectorStore):
    """The durable store as a shard sees it: out of its heap (Milvus runs elsewhere). Each
    user's rows of a collection are one pickled blob, so the store adds nothing to this
    process's GC-tracked objects; a load unpickles them as a Milvus scan decodes its rows.
    Partial payload updates (reinforcement) are accepted and dropped."""

    def __init__(self, rows: dict[tuple[Collection, str], bytes]) -> None:
        super().__init__()
        self._blobs = rows

    @classmethod
    def freeze(cls, store: FakeVectorStore) -> PackedDurable:
        return cls({(c, key): pickle.dumps([r.model_dump() for r in rows.values()])
                    for c, by_key in store._data.items() for key, rows in by_key.items()})

    def scan_scope(self, collection: Collection, scope: Scope,
                   limit: int = 16_384) -> list[StoredRecord]:
        blob = self._blobs.get((collection, scope.key))
        rows = pickle.loads(blob)[:limit] if blob is not None else []
        return [StoredRecord.model_validate(r) for r in rows]

    def set_payloads(self, collection: Collection,
                     changes: Sequence[tuple[str, str, dict[str, Any]]]) -> int:
        return len(changes)


class BenchShard:
    """The shard's long-term half alone (no sessions, no Redis): ``ShardRecall`` as the shard
    runs it, and reinforcement under the long-term memory's lock."""

    def __init__(self, memory: LongTermMemory) -> None:
        self._memory = memory
        self._recall = ShardRecall(LazyLongTerm(lambda: memory))
        self._lock = threading.RLock()

    def recall_memory(self, scope: Scope, request: RecallRequest,
                      query: Callable[[], QueryEmbedding]) -> MemoryAnswer:
        return self._recall.recall_memory(scope, request, None, query)

    def reinforce_many(self, returned: list[tuple[Scope, list[str]]]) -> int:
        with self._lock:
            return sum(self._memory.reinforce(scope, ids) for scope, ids in returned)


@dataclass
class GcWatch:
    """Time spent in the cyclic GC (all generations), and how many gen-2 collections."""

    seconds: float = 0.0
    collections: list[int] = field(default_factory=lambda: [0, 0, 0])
    _started: float = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.collections[info["generation"]] += 1

    @contextmanager
    def watching(self) -> Iterator[GcWatch]:
        self.seconds, self.collections = 0.0, [0, 0, 0]
        gc.callbacks.append(self)
        try:
            yield self
        finally:
            gc.callbacks.remove(self)


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _line(label: str, ms: Sequence[float]) -> str:
    return (f"{label}: n={len(ms)} p50 {statistics.median(ms):.1f} ms  p95 {_pct(ms, 0.95):.1f}"
            f"  p99 {_pct(ms, 0.99):.1f}  max {max(ms):.1f}")


def recall_once(shard: BenchShard, scope: Scope, query: str, embedded: QueryEmbedding,
                reinforce: bool) -> float:
    started = time.perf_counter()
    answer = shard.recall_memory(scope, RecallRequest(user_id=scope.user, query=query),
                                 lambda: embedded)
    if reinforce:  # the ingress sends what the context used back to the shard
        ids = [c.id for c in answer.found.candidates[:8]]
        shard.reinforce_many([(scope, ids)])
    return (time.perf_counter() - started) * 1000


def run_phase(name: str, table: str, durable: PackedDurable, embedder: Embedder,
              held: list[str], queried: str, queries: list[tuple[str, QueryEmbedding]],
              args: argparse.Namespace, watch: GcWatch) -> dict[str, Any]:
    """Load ``held`` (the queried user last), then recall the queried user."""
    tokens = embedder if hasattr(embedder, "token_vectors") else None
    hot = HotIndexStore(durable, embedder.dim, tokens=lambda: tokens,  # type: ignore[arg-type,return-value]
                        max_bytes=2**40)
    shard = BenchShard(LongTermMemory(hot, embedder))
    gc.collect()
    with watch.watching() as w:
        started = time.perf_counter()
        for user in held:
            if user != queried:
                hot.warm(Scope(tenant=TENANT, user=user))
        others_s = time.perf_counter() - started
        load_gc = w.seconds
    scope = Scope(tenant=TENANT, user=queried)
    scans = [durable.scan_scope(c, scope) for c in (Collection.FACTS, Collection.EPISODES,
                                                    Collection.PROCEDURES)]
    t0 = time.perf_counter()
    scans = [durable.scan_scope(c, scope) for c in (Collection.FACTS, Collection.EPISODES,
                                                    Collection.PROCEDURES)]
    scan_ms = (time.perf_counter() - t0) * 1000
    del scans
    with watch.watching() as w:
        t0 = time.perf_counter()
        hot.warm(scope)
        load_ms = (time.perf_counter() - t0) * 1000
        queried_gc = w.seconds * 1000
    t0 = time.perf_counter()
    gc.collect()
    full_gc_ms = (time.perf_counter() - t0) * 1000
    objects = len(gc.get_objects())
    if args.freeze:
        gc.freeze()
    stats = hot.stats()
    answers = [[(c.id, round(c.score, 6)) for c in shard.recall_memory(
        scope, RecallRequest(user_id=queried, query=q), lambda e=e: e).found.candidates]
        for q, e in queries[:10]]  # before any reinforcement: comparable across tables
    for query, embedded in queries[:5]:  # warm-up
        recall_once(shard, scope, query, embedded, args.reinforce)
    with watch.watching() as w:
        serial = [recall_once(shard, scope, q, e, args.reinforce)
                  for q, e in queries[:args.requests]]
        serial_gc, serial_gen = w.seconds * 1000, list(w.collections)
    parallel: list[float] = []
    lock = threading.Lock()
    todo = list(queries[:args.parallel_requests])

    def worker() -> None:
        while True:
            with lock:
                if not todo:
                    return
                q, e = todo.pop()
            ms = recall_once(shard, scope, q, e, args.reinforce)
            with lock:
                parallel.append(ms)

    with watch.watching() as w:
        started = time.perf_counter()
        threads = [threading.Thread(target=worker) for _ in range(args.threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - started
        par_gc, par_gen = w.seconds * 1000, list(w.collections)
    if args.freeze:
        gc.unfreeze()
    print(f"\n[{table} / {name}] {stats.users} users, {stats.memories:,} memories, "
          f"estimated {stats.bytes / 2**20:,.0f} MiB; gc-tracked objects {objects:,}; "
          f"one full collection {full_gc_ms:.0f} ms")
    print(f"  load of the other {len(held) - 1} users: {others_s:.1f} s "
          f"(gc {load_gc:.1f} s); queried user's cold load: {load_ms:.1f} ms "
          f"(gc {queried_gc:.1f} ms; the durable scans alone {scan_ms:.1f} ms)")
    print("  " + _line("recall, 1 in flight", serial)
          + f"; gc {serial_gc:.0f} ms in all ({serial_gc / len(serial):.1f} ms/recall, "
          f"collections by generation {serial_gen})")
    print("  " + _line(f"recall, {args.threads} in flight", parallel)
          + f"; {len(parallel) / wall:.1f} recalls/s; gc {par_gc / len(parallel):.1f} "
          f"ms/recall, collections by generation {par_gen}")
    result = {"table": table, "phase": name, "users": stats.users, "memories": stats.memories,
              "objects": objects, "full_gc_ms": full_gc_ms,
              "load_ms": load_ms, "serial_p50": statistics.median(serial),
              "serial_p95": _pct(serial, 0.95), "serial_gc_ms": serial_gc / len(serial),
              "parallel_p50": statistics.median(parallel),
              "parallel_p99": _pct(parallel, 0.99), "rps": len(parallel) / wall,
              "parallel_gen2": par_gen[2], "answers": answers}
    return result


def build(args: argparse.Namespace, users: list[UserData], embedder: Embedder
          ) -> PackedDurable:
    """The users written as a shard writes them (or read back from ``--cache``)."""
    key = f"{args.users}-{args.per_user}-{args.seed}-{args.queried_embedder}"
    cache = args.cache / f"hot_index_scale-{key}.pickle" if args.cache else None
    if cache is not None and cache.exists():
        blobs = pickle.loads(cache.read_bytes())
        print(f"{len(users)} users read from {cache}")
        return PackedDurable(blobs)
    durable = FakeVectorStore()
    durable.ensure_collections(DIM)
    started = time.perf_counter()
    n = write_user(durable, embedder, users[0])
    print(f"queried user {users[0].user_id}: {n} memories ({args.queried_embedder}, "
          f"{time.perf_counter() - started:.0f} s)")
    started = time.perf_counter()
    total = n + sum(write_user(durable, BulkEmbedder(), u) for u in users[1:])
    print(f"{len(users)} users, {total:,} memories written in "
          f"{time.perf_counter() - started:.0f} s")
    packed = PackedDurable.freeze(durable)
    if cache is not None:
        cache.write_bytes(pickle.dumps(packed._blobs))
    return packed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--per-user", type=int, default=500)
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--parallel-requests", type=int, default=400)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--queried-embedder", default="minilm", choices=["minilm", "bulk"])
    parser.add_argument("--freeze", action="store_true",
                        help="gc.freeze() after the loads (what a shard could do)")
    parser.add_argument("--no-reinforce", dest="reinforce", action="store_false")
    parser.add_argument("--cache", type=Path, default=None,
                        help="a directory where the written users are kept between runs")
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()

    users = synthetic_users(args.users, args.per_user, "scale", args.seed)
    embedder: Embedder = BulkEmbedder()
    if args.queried_embedder == "minilm":
        model = make_embedder(Settings(embedder="minilm"))
        assert isinstance(model, MiniLMEmbedder)
        embedder = WriteEmbedder(model)
    durable = build(args, users, embedder)
    queried = users[0]
    questions = (queried.questions * 50)[:max(args.requests, args.parallel_requests, 10)]
    queries = list(zip(questions, embed_queries(embedder, questions), strict=True))
    ids = [u.user_id for u in users]
    watch = GcWatch()
    results = []
    tables = list(TABLES)
    for table in tables:
        for phase, held in (("small", ids[:2]), ("full", ids)):
            results.append(run_phase(phase, table, durable, embedder, held, queried.user_id,
                                     queries, args, watch))
    if len(tables) == 2:
        pairs = [(a, b) for x in results for y in results if x["phase"] == y["phase"]
                 for a, b in zip(x["answers"], y["answers"], strict=True)]
        same = all([i for i, _ in a] == [i for i, _ in b] for a, b in pairs)
        drift = max((abs(s - t) for a, b in pairs for (_, s), (_, t) in zip(a, b, strict=True)),
                    default=0.0)
        print(f"\nsame candidates in the same order from both tables: {same}; largest score "
              f"difference {drift:.2g} (time decay between the phases)")
    print("\n| table | users | memories | tracked objects | full gc ms | cold load ms | "
          "p50 1 | p95 1 | gc ms/recall | p50 8 | p99 8 | recalls/s 8 | gen-2 gcs at 8 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['table']} | {r['users']} | {r['memories']:,} | {r['objects']:,} | "
              f"{r['full_gc_ms']:.0f} | {r['load_ms']:.0f} | "
              f"{r['serial_p50']:.1f} | {r['serial_p95']:.1f} | {r['serial_gc_ms']:.1f} | "
              f"{r['parallel_p50']:.1f} | {r['parallel_p99']:.1f} | {r['rps']:.1f} | "
              f"{r['parallel_gen2']} |")


if __name__ == "__main__":
    main()
