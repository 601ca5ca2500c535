"""Recall under load: Strata's layered recall against one collection holding everything.

Starts a real Redis (``EmbeddedRedis``, temporary directory), a local Ray instance and the
whole app as ``strata serve`` runs it (``serve_app.main.start``: store owner holding
milvus-lite, the session shards, the extractor, the Serve app), with the configured
embedder (``--embedder minilm``, the default, or ``hash``: 384-d character n-grams).

Data (``bench/recall_load_stages/corpus.py``), loaded directly into the vector store
through the StoreOwner (``RemoteVectorStore`` upserts in batches of up to ``--batch`` rows,
one scope per call, then ``flush``), not through the HTTP API:

* ``--users`` users × ``--per-user`` memories: short English sentences about 5 of 12
  topics per user, ``--fact-share`` facts (with key/value), the rest episodes (with an
  event time); status active, provenance with a session id (10 memories per session),
  ``created_at`` spread over the last 180 days; built as ``MemoryItem`` and turned into
  records with ``strata.layers.records.to_record`` (ids from ``memory_id``);
* ``--chunks`` knowledge chunks (tenant "default", ``Scope.shared("default")``, status
  active, payload ``{doc_id, position, version: 1, title, content_hash, metadata}``):
  3-sentence guide paragraphs (~250 characters) on the same 12 topics, ~10 per document.

The baseline (``bench/recall_load_stages/baseline.py``, described in full there) is the
design the seeds warn against: ONE milvus-lite collection ("bench_single", in the StoreOwner
process) holding every memory of every kind plus the knowledge chunks, the user an ordinary
column filtered at query time; same rows, same vectors. A second Serve application
(``POST /baseline/recall``) embeds the query through Strata's Embedder deployment and runs
one hybrid search (dense + BM25, top 20 each, RRF) in the owner, returning the top 10 as
items plus a context string of their texts. It leaves out everything Strata's recall adds:
routing, one search per layer (3 or 4 hybrid searches, each a separate owner call, plus a
keyword scan of the procedures), the status filter, fusion scoring (decay, confidence, type
priority, layer weights), threshold, dedup, redaction, the token-budgeted context builder,
and the reinforcement write-back and recall log that follow every Strata recall.

Then, against both, the same queries (drawn from the users' topics: ~50% personal
questions, ~25% how-to questions, ~25% bare keywords, routed by Strata to personal /
knowledge / mixed) over HTTP with async httpx at each concurrency in ``--levels``, with
``--requests`` requests per level. Levels are interleaved (Strata then baseline for each
level); before each phase the shards' pending reinforcements are drained and the owner
flushes. A serial store-level comparison (no HTTP, pre-embedded queries) comes first.
CPU seconds per process group (``bench.common.process_cpu``) and StoreOwner calls per
request (``bench/recall_load_stages/owner_probe.py``) are measured over each phase.

    .venv/bin/python bench/recall_load.py                  # full run, MiniLM (~25 minutes)
    .venv/bin/python bench/recall_load.py --quick          # smoke run (a few minutes)
    .venv/bin/python bench/recall_load.py --embedder hash  # skip the MiniLM embedding time
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import os
import platform
import shutil
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import httpx
import ray
from ray import serve

from actors.store_owner import RemoteVectorStore
from bench.common.local_app import LocalApp, start_local_app
from bench.common.process_cpu import cpu_delta, cpu_snapshot
from bench.common.server import revision
from bench.recall_load_stages import TENANT
from bench.recall_load_stages.baseline import (
    CANDIDATES,
    SINGLE,
    BaselineRecall,
    load_single,
    single_rows,
    wait_baseline,
)
from bench.recall_load_stages.corpus import (
    Chunk,
    UserPlan,
    embed_all,
    plan_chunks,
    plan_queries,
    plan_users,
    strata_records,
)
from bench.recall_load_stages.owner_probe import (
    layout_summary,
    owner_drain,
    owner_install_counter,
    owner_take_counts,
    settle,
)
from bench.recall_load_stages.report import (
    Series,
    print_end,
    print_phase,
    print_report,
    run_level,
    write_json,
)
from bench.recall_load_stages.store_level import print_store_level, store_level
from serve_app import main as serve_main
from strata.models import Collection, MemoryItem, Scope
from strata.settings import Settings
from strata.stores.redis_server import EmbeddedRedis, free_port

HASH_DIM = 384  # the hash embedder at MiniLM's size, so the store moves the same bytes


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[int], list[int]]:
    """The flags, and the levels with their request counts (``--quick`` applied)."""
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--embedder", choices=("minilm", "hash"), default="minilm")
    p.add_argument("--users", type=int, default=100)
    p.add_argument("--per-user", type=int, default=500)
    p.add_argument("--fact-share", type=float, default=0.6)
    p.add_argument("--chunks", type=int, default=5000)
    p.add_argument("--levels", default="1,8,32")
    p.add_argument("--requests", default="200,400,800",
                   help="requests per level (one number per level)")
    p.add_argument("--store-queries", type=int, default=200,
                   help="queries of the serial store-level comparison")
    p.add_argument("--batch", type=int, default=500, help="rows per upsert/insert call")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 10 users x 100 memories, 500 chunks, 30/60/120 requests")
    p.add_argument("--json", metavar="PATH", help="also write the raw summary as JSON")
    args = p.parse_args(argv)
    if args.quick:
        args.users, args.per_user, args.chunks = 10, 100, 500
        args.requests, args.store_queries = "30,60,120", 40
    levels = [int(x) for x in args.levels.split(",")]
    counts = [int(x) for x in args.requests.split(",")]
    if len(counts) != len(levels):
        p.error("--requests needs one number per level")
    return args, levels, counts


class Corpus:
    """The run's data and its vectors, embedded here before the app starts."""

    def __init__(self, args: argparse.Namespace, n_load_queries: int) -> None:
        t0 = time.perf_counter()
        self.users: list[UserPlan] = plan_users(args.users, args.per_user, args.fact_share,
                                                args.seed)
        self.chunks: list[Chunk] = plan_chunks(args.chunks, args.seed + 1)
        queries = plan_queries(self.users, n_load_queries + args.store_queries + 40,
                               args.seed + 2)
        self.warm, self.store_qs, self.load_qs = (
            queries[:40], queries[40:40 + args.store_queries],
            queries[40 + args.store_queries:])
        self.memories: list[tuple[UserPlan, MemoryItem]] = [
            (u, m) for u in self.users for m in u.items]
        kinds = Counter(m.kind.value for _, m in self.memories)
        mem_chars = np.mean([len(m.text) for _, m in self.memories])
        kb_chars = np.mean([len(c.text) for c in self.chunks])
        print(f"data: {len(self.users)} users x {args.per_user} memories ({dict(kinds)}, "
              f"{mem_chars:.0f} chars mean), {len(self.chunks):,} knowledge chunks "
              f"({kb_chars:.0f} chars mean) in {len({c.doc_id for c in self.chunks}):,} "
              f"documents; query mix {dict(Counter(q['_kind'] for q in self.load_qs))} "
              f"[{time.perf_counter() - t0:.1f} s]", flush=True)
        self._embed(args.embedder)

    def _embed(self, embedder_name: str) -> None:
        from strata.stores.embedders import make_embedder

        t0 = time.perf_counter()
        embedder = make_embedder(Settings(embedder=embedder_name, hash_dim=HASH_DIM))
        self.model_id, self.dim = embedder.model_id, embedder.dim
        load_model_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        self.mem_vecs = embed_all(embedder, [m.text for _, m in self.memories], "memories")
        self.kb_vecs = embed_all(embedder, [c.text for c in self.chunks], "chunks")
        self.store_vecs = embed_all(embedder, [q["query"] for q in self.store_qs], "queries")
        embed_s = time.perf_counter() - t0
        n_texts = len(self.memories) + len(self.chunks) + len(self.store_qs)
        print(f"  embedder {self.model_id} ({self.dim}-d): model load {load_model_s:.1f} s, "
              f"{n_texts:,} texts in {embed_s:.0f} s ({n_texts / embed_s:,.0f} texts/s)",
              flush=True)
        del embedder
        gc.collect()


def load_both(app: LocalApp, data: Corpus, batch: int, seed: int) -> None:
    """Strata's collections through the StoreOwner, then the baseline's single collection
    with the same rows; the vectors are dropped afterwards (only the queries' stay)."""
    owner = app.owner
    t0 = time.perf_counter()
    store = RemoteVectorStore(owner)
    by_scope = strata_records(data.memories, data.mem_vecs, data.chunks, data.kb_vecs,
                              data.model_id)
    calls = 0
    for (scope, coll), records in by_scope.items():
        for i in range(0, len(records), batch):
            store.upsert(coll, scope, records[i:i + batch])
            calls += 1
    store.flush()
    strata_load_s = time.perf_counter() - t0
    layout = ray.get(owner.__ray_call__.remote(owner_drain), timeout=1800)
    strata_total_s = time.perf_counter() - t0
    print(f"  strata load: {len(data.memories) + len(data.chunks):,} rows in {calls} upserts "
          f"+ flush {strata_load_s:.0f} s (+{strata_total_s - strata_load_s:.0f} s background "
          f"index/compaction); {layout_summary(layout)}", flush=True)

    t0 = time.perf_counter()
    shared = Scope.shared(TENANT)
    rows = single_rows(data.memories, data.mem_vecs, by_scope[(shared, Collection.KNOWLEDGE)],
                       shared, data.model_id, seed + 3)
    load_single(owner, rows, data.dim, batch)
    single_load_s = time.perf_counter() - t0
    layout = ray.get(owner.__ray_call__.remote(owner_drain), timeout=1800)
    print(f"  baseline load: {len(rows):,} rows into {SINGLE} in {single_load_s:.0f} s "
          f"(+{time.perf_counter() - t0 - single_load_s:.0f} s background); "
          f"{layout_summary(layout)}", flush=True)
    del rows, by_scope
    data.mem_vecs = data.kb_vecs = np.zeros((0, data.dim), np.float32)
    gc.collect()


def run_levels(app: LocalApp, data: Corpus, levels: list[int],
               counts: list[int]) -> list[Series]:
    """Warm-up, then each level for Strata and the baseline in turn, each phase's CPU and
    StoreOwner calls measured up to the drain of the write-backs it queued."""
    owner, handles = app.owner, app.handles
    strata_url, single_url = f"{app.base}/v1/recall", f"{app.base}/baseline/recall"
    run_level(strata_url, "strata", data.warm, 4)
    run_level(single_url, "baseline", data.warm, 4)
    ray.get(owner.__ray_call__.remote(owner_install_counter))
    results: list[Series] = []
    offset = 0
    for level, n in zip(levels, counts, strict=True):
        bodies = data.load_qs[offset:offset + n]
        offset += n
        for system, url in (("strata", strata_url), ("baseline", single_url)):
            settle(handles, owner)
            ray.get(owner.__ray_call__.remote(owner_take_counts))
            load_avg = os.getloadavg()[0]
            cpu0 = cpu_snapshot()
            s = run_level(url, system, bodies, level)
            settle(handles, owner)  # the write-backs this phase queued are its cost
            s.cpu_s = cpu_delta(cpu0, cpu_snapshot())
            s.owner_calls = ray.get(owner.__ray_call__.remote(owner_take_counts))
            results.append(s)
            print_phase(s, load_avg)
    return results


def main(argv: list[str] | None = None) -> int:
    args, levels, counts = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    t_all = time.perf_counter()
    print(f"ray {ray.__version__}, httpx {httpx.__version__}, python "
          f"{platform.python_version()}, {os.cpu_count()} cpus, load avg "
          f"{os.getloadavg()[0]:.2f}; strata {revision()}; "
          f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC", flush=True)
    data = Corpus(args, sum(counts))  # 1. the data and its vectors

    tmp = Path(tempfile.mkdtemp(prefix="strata-bench-recall-"))
    redis_server = EmbeddedRedis(tmp / "redis").start()
    settings = Settings(data_dir=tmp, embedder=args.embedder, hash_dim=HASH_DIM,
                        http_port=free_port(), redis_url=redis_server.url,
                        demo_knowledge=False)
    try:
        # 2. the whole app, as `strata serve` runs it
        t0 = time.perf_counter()
        app = start_local_app(settings, object_store_mb=512)
        print(f"  app ready [{time.perf_counter() - t0:.0f} s]; flush policy "
              f"{settings.flush_unflushed_rows} rows or {settings.flush_interval_s:g} s",
              flush=True)
        # 3.-4. Strata's collections, then the baseline's, through the StoreOwner
        load_both(app, data, args.batch, args.seed)
        # 5. the baseline's HTTP front
        serve.run(BaselineRecall.bind(serve_main.NAMESPACE, SINGLE, CANDIDATES),
                  name="baseline", route_prefix="/baseline")
        wait_baseline(app.base, data.users[0].scope.user)
        # 6. store level: serial, no HTTP
        t0 = time.perf_counter()
        raw = store_level(app.owner, data.store_qs, data.store_vecs, args.store_queries)
        print_store_level(raw, args.store_queries, time.perf_counter() - t0)
        # 7. warm-up, then the levels, interleaved
        results = run_levels(app, data, levels, counts)
        final = settle(app.handles, app.owner)
        flush_stats: dict[str, Any] = ray.get(app.owner.stats.remote())
        # 8. report
        print_report(results, levels, (
            f"\nRecall over HTTP, {args.users} users x {args.per_user} memories + "
            f"{len(data.chunks):,} chunks, embedder {data.model_id}; layout after the run: "
            f"{layout_summary(final)}; owner flushes {flush_stats.get('flushes', 0):.0f}\n"))
        print_end(t_all)
        if args.json:
            write_json(args.json, {"embedder": data.model_id, "users": args.users,
                                   "per_user": args.per_user, "chunks": len(data.chunks)},
                       raw, final, flush_stats, results)
        return 0
    finally:
        _teardown(settings)
        redis_server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _teardown(settings: Settings) -> None:
    """Serve down (both apps), extractors and shards killed, owner shut down, Ray down."""
    if not ray.is_initialized():
        return
    try:
        with contextlib.suppress(Exception):
            serve_main.stop(settings, shutdown_ray=False)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    raise SystemExit(main())
