"""Decay-sweep cost by size: memories/s and seconds for a full sweep of every user.

For each size ``MEMORIES:USERS`` this loads a fresh milvus-lite file in a temp dir through a
``MilvusVectorStore`` (16-d vectors from ``HashEmbedder(16)`` over a pool of short memory
texts, half facts and half episodes, ``updated_at`` uniform over the last 200 days,
confidence uniform in [0.5, 0.95], 20% recalled in the last 10 days), flushes, then times:

* ``dry``:    ``sweep_scope(..., dry_run=True)`` over all users: the scan cost alone;
* ``sweep1``: the real sweep (marks cold / archived and upserts the changes; the store keeps
              its default ``FlushPolicy``, so it flushes every 2,000 written rows, as in the
              StoreOwner);
* ``sweep2``: the same sweep right after: idempotent, so nothing (or next to nothing, since
              ``now`` moved a few seconds) changes.

That is the in-process baseline (one process, users one after another). With ``--job`` the
loaded file is copied first, and the copy is swept again through the real job path: a local
Ray (``num_cpus=2``), an embedded Redis holding the user registry, the ``StoreOwner`` actor
owning the copy, the default 2 session shards, and ``jobs.decay_sweep.sweep_all``.

Loading uses the store's client (``insert`` of 10,000-row batches, built exactly like
``MilvusVectorStore._row``) with no flush until the end; loading time is reported too.
``--load-budget-s`` skips sizes whose projected load time (from the previous size's rate)
exceeds the budget.

    .venv/bin/python bench/decay_sweep.py --quick
    .venv/bin/python bench/decay_sweep.py --sizes 10000:100 --reps 3 --job
    .venv/bin/python bench/decay_sweep.py --sizes 100000:1000 --reps 1  # 1M: hours (see docs)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from strata.layers.decay import DecayPolicy, SweepCounts, sweep_scope
from strata.layers.records import to_record
from strata.models import Collection, MemoryItem, MemoryKind, Scope, utcnow
from strata.stores.embedders import HashEmbedder
from strata.stores.milvus import MilvusVectorStore

DIM = 16
TENANT = "bench"
BATCH = 10_000
DAY = 86400.0

_SUBJ = ("prefers", "lives in", "works at", "is allergic to", "plays", "studies", "owns",
         "visited", "booked", "cancelled", "asked about", "complained about", "bought")
_OBJ = ("green tea", "Berlin", "a startup", "peanuts", "the cello", "Kubernetes", "a Tesla",
        "Kyoto", "a flight to Lisbon", "the gym membership", "the invoice", "a new laptop",
        "ramen", "the weekly report", "a dentist appointment", "Python", "jazz", "a bicycle")


def text_pool(n: int = 2000, seed: int = 3) -> list[str]:
    rng = random.Random(seed)
    return [f"User {rng.choice(_SUBJ)} {rng.choice(_OBJ)} ({i})" for i in range(n)]


def template_payload(kind: MemoryKind) -> dict[str, Any]:
    item = MemoryItem(id="x", kind=kind, text="x", key="k" if kind is MemoryKind.FACT else None,
                      value="v" if kind is MemoryKind.FACT else None)
    return to_record(item, [0.0] * DIM, "hash-ngram-16").payload


def load(store: MilvusVectorStore, memories: int, users: int, seed: int = 11) -> dict[str, Any]:
    """Insert ``memories`` rows over ``users`` scopes (facts and episodes), then flush."""
    rng = np.random.default_rng(seed)
    pool = text_pool()
    emb = HashEmbedder(DIM)
    pool_vecs = [[float(x) for x in v] for v in emb.encode(pool)]
    payloads = {k: template_payload(k) for k in (MemoryKind.FACT, MemoryKind.EPISODE)}
    now = time.time()
    per_user = memories // users
    batches: dict[Collection, list[dict[str, Any]]] = {Collection.FACTS: [],
                                                       Collection.EPISODES: []}
    started = time.perf_counter()
    inserted = 0
    ages = rng.uniform(0, 200, memories)
    confs = rng.uniform(0.5, 0.95, memories)
    recalled = rng.random(memories) < 0.2
    recall_age = rng.uniform(0, 10, memories)
    texts = rng.integers(0, len(pool), memories)
    n = 0
    for u in range(users):
        scope_key = f"{TENANT}:u{u:05d}"
        for j in range(per_user):
            kind = MemoryKind.FACT if j % 2 == 0 else MemoryKind.EPISODE
            coll = Collection.FACTS if kind is MemoryKind.FACT else Collection.EPISODES
            updated = now - ages[n] * DAY
            payload = dict(payloads[kind])
            if kind is MemoryKind.FACT:
                payload["key"] = f"k{j}"
                payload["value"] = pool[texts[n]]
            if recalled[n]:
                payload["last_access_at"] = datetime.fromtimestamp(
                    now - recall_age[n] * DAY, timezone.utc).isoformat()
                payload["access_count"] = 1
            batches[coll].append({
                "pk": f"{scope_key}|m{j:05d}", "scope": scope_key, "text": pool[texts[n]],
                "dense": pool_vecs[texts[n]], "status": "active",
                "created_at": updated - 3600.0, "updated_at": updated,
                "confidence": float(confs[n]), "embed_model": "hash-ngram-16",
                "payload": payload})
            n += 1
            if len(batches[coll]) >= BATCH:
                store.client.insert(store.name(coll), batches[coll])
                inserted += len(batches[coll])
                batches[coll] = []
    for coll, rows in batches.items():
        if rows:
            store.client.insert(store.name(coll), rows)
            inserted += len(rows)
    insert_s = time.perf_counter() - started
    t0 = time.perf_counter()
    store.flush()
    flush_s = time.perf_counter() - t0
    return {"inserted": inserted, "insert_s": round(insert_s, 1), "flush_s": round(flush_s, 1),
            "load_rows_per_s": round(inserted / (insert_s + flush_s), 0)}


def scopes(users: int) -> list[Scope]:
    return [Scope(tenant=TENANT, user=f"u{u:05d}") for u in range(users)]


def sweep_inprocess(store: MilvusVectorStore, users: int, dry_run: bool) -> dict[str, Any]:
    policy = DecayPolicy()
    total = SweepCounts()
    per_user = []
    started = time.perf_counter()
    for scope in scopes(users):
        t0 = time.perf_counter()
        total = total.add(sweep_scope(store, scope, policy, utcnow(), dry_run))
        per_user.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    if not dry_run:
        store.flush()  # what the owner's tick would do; counted separately
    flush_s = time.perf_counter() - t0
    elapsed = time.perf_counter() - started
    per_user.sort()
    return {"s": round(elapsed, 2), "final_flush_s": round(flush_s, 2),
            "memories_per_s": round(total.scanned / elapsed, 0) if total.scanned else 0,
            "user_p50_ms": round(per_user[len(per_user) // 2] * 1000, 1),
            "user_p95_ms": round(per_user[int(len(per_user) * 0.95)] * 1000, 1),
            **total.model_dump()}


def sweep_job(db_path: str, users: int, work: str) -> dict[str, Any]:
    """The real job path: StoreOwner + 2 shards on local Ray, ``sweep_all``."""
    import ray

    from actors.directory import ShardDirectory
    from actors.store_owner import start_store_owner
    from jobs.decay_sweep import sweep_all
    from strata.settings import Settings
    from strata.stores.redis import RedisStore
    from strata.stores.redis_server import EmbeddedRedis

    ns = "decaybench"
    redis = EmbeddedRedis(os.path.join(work, "redis")).start()
    ray_tmp = tempfile.mkdtemp(prefix="rbdec_", dir="/tmp")
    out: dict[str, Any] = {}
    try:
        settings = Settings(data_dir=work, milvus_uri=db_path, redis_url=redis.url,
                            redis_prefix="bench:", embedder="hash", hash_dim=DIM,
                            session_shards=2, demo_knowledge=False)
        store = RedisStore(settings.redis_url, settings.redis_prefix)
        for scope in scopes(users):
            store.register_user(scope.key)
        ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=ray_tmp,
                 namespace=ns, log_to_driver=False, configure_logging=False)
        t0 = time.perf_counter()
        owner = start_store_owner(settings, DIM, ns)
        ray.get(owner.call.remote("ping"))
        shards = ShardDirectory(settings.model_dump(mode="json"), settings.session_shards, ns)
        ray.get([h.pid.remote() for h in shards.handles])
        out["startup_s"] = round(time.perf_counter() - t0, 1)
        for label in ("sweep1", "sweep2"):
            t0 = time.perf_counter()
            swept = sweep_all(settings, dry_run=False, namespace=ns, progress_every=10**9)
            elapsed = time.perf_counter() - t0
            # sweep_all returns the totals, or (totals, users per shard) in newer trees
            counts, per_shard = swept if isinstance(swept, tuple) else (swept, None)
            out[label] = {"s": round(elapsed, 2), "users_per_shard": per_shard,
                          "memories_per_s": round(counts.scanned / elapsed, 0),
                          **counts.model_dump()}
            print(f"  job {label}: {json.dumps(out[label])}", flush=True)
        shards.shutdown()
        ray.get(owner.shutdown.remote())
        ray.kill(owner, no_restart=True)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        redis.stop()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    return out


def run_size(memories: int, users: int, job: bool, reps: int) -> dict[str, Any]:
    work = tempfile.mkdtemp(prefix="decay_", dir="/tmp")
    db = os.path.join(work, "milvus.db")
    res: dict[str, Any] = {"memories": memories, "users": users, "load_avg": os.getloadavg()[0]}
    try:
        store = MilvusVectorStore(db)
        store.ensure_collections(DIM)
        res["load"] = load(store, memories, users)
        print(f"[{memories}/{users}] loaded: {json.dumps(res['load'])}", flush=True)
        if job:
            store.close()
            copy = os.path.join(work, "job")
            os.makedirs(copy)
            t0 = time.perf_counter()
            for name in os.listdir(work):
                src = os.path.join(work, name)
                if name.startswith("milvus.db"):
                    (shutil.copytree if os.path.isdir(src) else shutil.copy2)(
                        src, os.path.join(copy, name))
            res["copy_s"] = round(time.perf_counter() - t0, 1)
            store = MilvusVectorStore(db)
            store.ensure_collections(DIM)
        dry = [sweep_inprocess(store, users, dry_run=True) for _ in range(reps)]
        res["dry"] = sorted(dry, key=lambda d: d["s"])[len(dry) // 2]  # the median run
        res["dry_median_s"] = statistics.median(d["s"] for d in dry)
        res["dry_all_s"] = [d["s"] for d in dry]
        print(f"[{memories}/{users}] dry: {json.dumps(res['dry'])}", flush=True)
        res["sweep1"] = sweep_inprocess(store, users, dry_run=False)
        print(f"[{memories}/{users}] sweep1: {json.dumps(res['sweep1'])}", flush=True)
        res["sweep2"] = sweep_inprocess(store, users, dry_run=False)
        print(f"[{memories}/{users}] sweep2: {json.dumps(res['sweep2'])}", flush=True)
        store.close()
        if job:
            res["job"] = sweep_job(os.path.join(work, "job", "milvus.db"), users, work)
        res["load_avg_end"] = os.getloadavg()[0]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return res


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="2,000 and 10,000 memories")
    parser.add_argument("--sizes", default="10000:100,100000:1000,1000000:10000",
                        help="comma-separated MEMORIES:USERS")
    parser.add_argument("--job", action="store_true", help="also sweep via sweep_all on Ray")
    parser.add_argument("--job-max", type=int, default=100_000,
                        help="run the job path only up to this many memories")
    parser.add_argument("--reps", type=int, default=3, help="dry-run repetitions (median)")
    parser.add_argument("--load-budget-s", type=float, default=900.0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.reps = "2000:20,10000:100", 1
    sizes = [tuple(int(x) for x in s.split(":")) for s in args.sizes.split(",")]
    results: list[dict[str, Any]] = []
    rate = None
    for memories, users in sizes:
        if rate is not None and memories / rate > args.load_budget_s:
            msg = (f"skipped {memories}/{users}: projected load {memories / rate:.0f}s "
                   f"> budget {args.load_budget_s:.0f}s")
            print(msg, flush=True)
            results.append({"memories": memories, "users": users, "skipped": msg})
            continue
        res = run_size(memories, users, args.job and memories <= args.job_max, args.reps)
        rate = res["load"]["load_rows_per_s"]
        results.append(res)
    print(json.dumps(results, indent=2))
    summary = [(r["memories"], r.get("dry", {}).get("s"), r.get("sweep1", {}).get("s"),
                r.get("sweep2", {}).get("s")) for r in results]
    print("memories, dry_s, sweep1_s, sweep2_s:", summary)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
