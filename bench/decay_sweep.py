"""Decay-sweep cost by size: memories/s and seconds for a full sweep of every user.

For each size ``MEMORIES:USERS`` this loads a fresh milvus-lite file in a temp dir through a
``MilvusVectorStore`` (16-d vectors from ``HashEmbedder(16)`` over a pool of short memory
texts, half facts and half episodes, ``updated_at`` uniform over the last 200 days,
confidence uniform in [0.5, 0.95], 20% recalled in the last 10 days), flushes, then times:

* ``plan``:   ``strata.layers.decay.plan_sweep`` in this process (``--reps`` times, median):
              the one pass over each collection, decay columns only; the scan cost alone;
* the job, ``jobs.decay_sweep.sweep_all`` on a local Ray (``num_cpus=2``) with an embedded
  Redis (users registered, ``--sessions`` closed sessions archived past retention), the
  ``StoreOwner`` owning the file and the default 2 session shards:
  ``dry`` (``dry_run=True``), ``sweep1`` (the real sweep: marks cold / archived, purges),
  ``sweep2`` (the same sweep right after: idempotent, nothing to change).

Loading uses the store's client (``insert`` of 10,000-row batches, built exactly like
``MilvusVectorStore._row``) with no flush until the end; loading time is reported too.
``--load-budget-s`` skips sizes whose projected load time (from the previous size's rate)
exceeds the budget.

    .venv/bin/python bench/decay_sweep.py --quick
    .venv/bin/python bench/decay_sweep.py --sizes 10000:100,100000:1000,1000000:10000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common.milvus_lite_engine import release
from strata.layers.decay import DecayPolicy, plan_sweep
from strata.layers.records import to_record
from strata.models import Collection, MemoryItem, MemoryKind, Scope
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
                "lexical": pool[texts[n]],
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


def plan_inprocess(store: MilvusVectorStore) -> dict[str, Any]:
    started = time.perf_counter()
    plan = plan_sweep(store, DecayPolicy(), time.time())
    elapsed = time.perf_counter() - started
    return {"s": round(elapsed, 2), "memories_per_s": round(plan.counts.scanned / elapsed, 0),
            "changes": len(plan.changes), **plan.counts.model_dump()}


def sweep_job(db_path: str, users: int, sessions: int, work: str,
              skip_dry: bool = False) -> dict[str, Any]:
    """The real job path: StoreOwner + 2 shards on local Ray, ``sweep_all``."""
    import ray

    from actors.directory import ShardDirectory
    from actors.store_owner import start_store_owner
    from jobs.decay_sweep import sweep_all
    from strata.settings import Settings
    from strata.stores.keys import SessionRef
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
            store.users.register(scope)
        old = time.time() - (settings.archive_retention_days + 1) * DAY
        for i in range(sessions):  # closed sessions archived past retention
            ref = SessionRef(scopes(users)[i % users], f"s{i}")
            store.sessions.put_snapshot(ref, {"closed": True}, "0")
            store.index.archive(ref, 3600, at=old)
        ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=ray_tmp,
                 namespace=ns, log_to_driver=False, configure_logging=False)
        t0 = time.perf_counter()
        owner = start_store_owner(settings, DIM, ns)
        ray.get(owner.ping.remote())
        shards = ShardDirectory.start(settings.model_dump(mode="json"), settings.session_shards, ns)
        ray.get([h.pid.remote() for h in shards.handles])
        out["startup_s"] = round(time.perf_counter() - t0, 1)
        runs = [("dry", True), ("sweep1", False), ("sweep2", False)][1 if skip_dry else 0:]
        for label, dry in runs:
            t0 = time.perf_counter()
            counts, per_shard = sweep_all(settings, dry_run=dry, namespace=ns, progress=False)
            elapsed = time.perf_counter() - t0
            out[label] = {"s": round(elapsed, 2), "users_per_shard": per_shard,
                          "memories_per_s": round(counts.scanned / elapsed, 0),
                          **counts.model_dump()}
            print(f"  job {label}: {json.dumps(out[label])}", flush=True)
        out["load_avg_end"] = os.getloadavg()[0]
        shards.shutdown()
        ray.get(owner.shutdown.remote())
        ray.kill(owner, no_restart=True)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        redis.stop()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    return out


def run_size(memories: int, users: int, reps: int, sessions: int,
             skip_dry: bool = False) -> dict[str, Any]:
    work = tempfile.mkdtemp(prefix="decay_", dir="/tmp")
    db = os.path.join(work, "milvus.db")
    res: dict[str, Any] = {"memories": memories, "users": users, "load_avg": os.getloadavg()[0]}
    try:
        store = MilvusVectorStore(db)
        store.ensure_collections(DIM)
        res["load"] = load(store, memories, users)
        print(f"[{memories}/{users}] loaded: {json.dumps(res['load'])}", flush=True)
        plans = [plan_inprocess(store) for _ in range(reps)]
        if plans:
            res["plan"] = sorted(plans, key=lambda d: d["s"])[len(plans) // 2]  # the median
            res["plan_all_s"] = [d["s"] for d in plans]
            print(f"[{memories}/{users}] plan: {json.dumps(res['plan'])} "
                  f"all {res['plan_all_s']}", flush=True)
        store.close()
        # milvus-lite keeps the file's server (and lock) in this process until released
        release(db)
        res["job"] = sweep_job(db, users, sessions, work, skip_dry)
        res["load_avg_end"] = os.getloadavg()[0]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return res


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="2,000 and 10,000 memories")
    parser.add_argument("--sizes", default="10000:100,100000:1000,1000000:10000",
                        help="comma-separated MEMORIES:USERS")
    parser.add_argument("--reps", type=int, default=3,
                        help="in-process plan repetitions (median; 0 skips it)")
    parser.add_argument("--skip-dry", action="store_true", help="no dry run of the job")
    parser.add_argument("--sessions", type=int, default=1000,
                        help="closed sessions archived past retention, for the purge")
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
        res = run_size(memories, users, args.reps, args.sessions, args.skip_dry)
        rate = res["load"]["load_rows_per_s"]
        results.append(res)
    print(json.dumps(results, indent=2))
    summary = [(r["memories"], r.get("plan", {}).get("s"),
                *(r.get("job", {}).get(k, {}).get("s") for k in ("dry", "sweep1", "sweep2")))
               for r in results]
    print("memories, plan_s, job dry_s, sweep1_s, sweep2_s:", summary)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
