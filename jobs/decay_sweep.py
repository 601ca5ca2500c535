"""Decay sweep across all users: cold, archive; archived working memory expires by Redis TTL.

    python -m jobs.decay_sweep [--dry-run]
    ray job submit -- python -m jobs.decay_sweep

Users come from the Redis registry the shards keep; each user's sweep runs in that user's
shard (its single writer), many at a time, so the work spreads over the shards' nodes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import ray

from actors.directory import ShardDirectory, running_settings
from strata.layers.decay import DecayPolicy, SweepCounts
from strata.models import Scope
from strata.settings import Settings
from strata.stores.redis import RedisStore

NAMESPACE = "strata"
IN_FLIGHT = 64


def sweep_all(settings: Settings, dry_run: bool, namespace: str = NAMESPACE,
              progress_every: int = 1000) -> tuple[SweepCounts, dict[int, int]]:
    """Sweep every registered user; returns the totals and users swept per shard."""
    redis = RedisStore(settings.redis_url, settings.redis_prefix)
    shards = ShardDirectory(settings.model_dump(mode="json"), settings.session_shards, namespace)
    policy = DecayPolicy()
    users = redis.users()
    total = SweepCounts()
    pending: list[Any] = []
    per_shard: dict[int, int] = {}
    started = time.perf_counter()
    for n, key in enumerate(users, 1):
        tenant, user = key.split(":", 1)
        scope = Scope(tenant=tenant, user=user)
        index = shards.ring.shard_for(scope)
        per_shard[index] = per_shard.get(index, 0) + 1
        pending.append(shards.handles[index].sweep_decay.remote(scope, policy, dry_run))
        if len(pending) >= IN_FLIGHT:
            done, pending = ray.wait(pending, num_returns=len(pending) // 2)
            for counts in ray.get(done):
                total = total.add(counts)
        if n % progress_every == 0:
            print(f"{n}/{len(users)} users ({time.perf_counter() - started:.1f}s)", flush=True)
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
