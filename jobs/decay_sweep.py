"""Decay sweep across all users: cold, archive, and purge archived working memory.

    python -m jobs.decay_sweep [--dry-run]
    ray job submit -- python -m jobs.decay_sweep

1. Plan: one pass over each decaying collection reading only the decay columns (no text, no
   vectors), run where the data is (the StoreOwner of a milvus-lite file, or this process on
   a Milvus server); it lists the status changes. The cost is one scan of each collection,
   whatever the number of users.
2. Apply: the changes, grouped by user and cut into batches, go to the users' shards (their
   single writer), many batches at a time, so the writes spread over the shards' nodes. The
   shard re-reads those rows under its lock, re-decides, and updates the status in place.
3. Purge: closed sessions archived longer than ``archive_retention_days`` are deleted by
   their users' shards (Redis TTL would drop them too; the purge enforces the retention
   when the TTL was lost or the retention shortened, and counts them).

Every shard that holds users gets a call, even with nothing to change. Idempotent: a second
sweep finds nothing to change; ``--dry-run`` plans and counts, and changes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import ray

from actors.directory import ShardDirectory, running_settings
from actors.remote import named_actor
from actors.store_owner import OWNER_NAME
from strata.layers.decay import DecayPolicy, StatusChange, SweepCounts, SweepPlan, group_changes
from strata.layers.decay import plan_sweep as plan_in_process
from strata.settings import Settings
from strata.stores.keys import SessionRef, parse_scope_key
from strata.stores.milvus import MilvusVectorStore
from strata.stores.redis import RedisStore

__all__ = ["plan", "sweep_all"]

NAMESPACE = "strata"
IN_FLIGHT = 8  # apply batches in flight (a shard runs one call at a time)
CHANGES_PER_CALL = 5000
SESSIONS_PER_CALL = 1000


def plan(settings: Settings, policy: DecayPolicy, now: float, namespace: str) -> SweepPlan:
    """The sweep's scan, where the data is."""
    if settings.milvus_is_lite:
        owner = named_actor(OWNER_NAME, namespace)
        result: SweepPlan = ray.get(owner.plan_decay.remote(policy, now))
        return result
    store = MilvusVectorStore(settings.resolved_milvus_uri, token=settings.milvus_token)
    try:
        return plan_in_process(store, policy, now)
    finally:
        store.close()


def _calls(shards: ShardDirectory, users: set[str], changes: list[StatusChange],
           sessions: list[SessionRef], policy: DecayPolicy, now: float,
           dry_run: bool) -> tuple[list[tuple[Any, str, Any]], dict[int, int]]:
    """(handle, method, args) per batch, grouped by shard; and users per shard."""
    per_shard: dict[int, int] = {}
    user_shard: dict[str, int] = {}
    for key in users:
        index = shards.ring.shard_for(parse_scope_key(key))
        user_shard[key] = index
        per_shard[index] = per_shard.get(index, 0) + 1
    by_shard: dict[int, list[StatusChange]] = {i: [] for i in per_shard}
    for change in changes:
        by_shard[user_shard[change.scope]].append(change)
    sessions_by_shard: dict[int, list[SessionRef]] = {}
    for ref in sessions:
        sessions_by_shard.setdefault(shards.ring.shard_for(ref.scope), []).append(ref)
    calls: list[tuple[Any, str, Any]] = []
    if dry_run:
        return calls, per_shard
    for index, planned in by_shard.items():
        for batch in group_changes(planned, CHANGES_PER_CALL) or [[]]:
            calls.append((shards.handles[index], "apply_decay", (batch, policy, now)))
    for index, refs in sessions_by_shard.items():
        for i in range(0, len(refs), SESSIONS_PER_CALL):
            calls.append((shards.handles[index], "purge_archived_sessions",
                          (refs[i:i + SESSIONS_PER_CALL], now)))
    return calls, per_shard


def sweep_all(settings: Settings, dry_run: bool, namespace: str = NAMESPACE,
              progress: bool = True) -> tuple[SweepCounts, dict[int, int]]:
    """Sweep every user; returns the totals and the users handled by each shard."""
    started = time.perf_counter()
    now = time.time()
    policy = DecayPolicy()
    redis = RedisStore(settings.redis_url, settings.redis_prefix)
    shards = ShardDirectory.find(settings.session_shards, namespace)
    planned = plan(settings, policy, now, namespace)
    users = planned.users | {scope.key for scope in redis.users.all()}
    sessions = redis.index.archived_before(now - settings.archive_retention_days * 86400,
                                     limit=10**9)
    redis.close()
    if progress:
        print(f"planned in {time.perf_counter() - started:.1f}s: {planned.counts.scanned} "
              f"memories of {len(users)} users scanned, {len(planned.changes)} to change, "
              f"{len(sessions)} archived sessions past retention", flush=True)
    if dry_run:
        total = planned.counts.model_copy(update={"users": len(users),
                                                  "sessions_purged": len(sessions)})
        return total, _calls(shards, users, [], [], policy, now, True)[1]
    calls, per_shard = _calls(shards, users, planned.changes, sessions, policy, now, False)
    total = SweepCounts(users=len(users), scanned=planned.counts.scanned)
    pending: list[Any] = []
    done_calls = 0
    for handle, method, args in calls:
        pending.append(getattr(handle, method).remote(*args))
        if len(pending) >= IN_FLIGHT:
            ready, pending = ray.wait(pending, num_returns=1)
            for counts in ray.get(ready):
                total = total.add(counts)
            done_calls += len(ready)
            if progress and done_calls % 20 == 0:
                print(f"applied {done_calls}/{len(calls)} batches "
                      f"({time.perf_counter() - started:.1f}s)", flush=True)
    for counts in ray.get(pending):
        total = total.add(counts)
    return total, per_shard


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.decay_sweep")
    parser.add_argument("--dry-run", action="store_true", help="count, change nothing")
    args = parser.parse_args(argv)
    if not ray.is_initialized():
        ray.init(address="auto", namespace=NAMESPACE, log_to_driver=False)
    started = time.perf_counter()
    counts, _ = sweep_all(Settings(**running_settings(NAMESPACE)), args.dry_run)
    summary = counts.model_dump() | {"dry_run": args.dry_run,
                                     "seconds": round(time.perf_counter() - started, 2)}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
