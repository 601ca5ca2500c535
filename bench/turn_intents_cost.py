"""What the learned intent reading adds to a turn (issue #36's "p50 ≤ 5 ms per turn"): the
same user turns said through two shards in the same run — ``intent_detector=learned`` (the
default) and ``rules`` — alternating turn by turn, so the machine's noise falls on both.
Each shard has a real Redis (embedded) and a long-term memory on the in-process vector
store with the hash embedder, holding a few memories per user so a forget has something
to match. The turns: ordinary conversation (LoCoMo dev, every speaker's turn said as the
user's) and, separately, the held-out writers' forget requests (where the learned reading
also fits a target span and the forget runs).

    .venv/bin/python bench/turn_intents_cost.py                  # 2,000 LoCoMo turns
    .venv/bin/python bench/turn_intents_cost.py --turns 500
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from intents import HELD_OUT, load

from bench.common.stats import percentile_ms
from bench.common.workload import locomo_users
from strata.extract.intent_model import packaged_detector
from strata.layers.memories import LongTermMemory
from strata.layers.memory_models import MemoryCreate
from strata.layers.summarize import RuleSummarizer
from strata.models import MemoryKind, Scope
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.redis import RedisStore
from strata.stores.redis_server import EmbeddedRedis
from strata.testing.fake_vectors import FakeVectorStore

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev"
SEED_MEMORIES = ("I adopted a grey cat named Pixel last spring.",
                 "My sister Dana lives in Porto and teaches maths.",
                 "I go climbing at the Boulder Barn on Thursdays.")


def _shard(redis: RedisStore, detector: str) -> SessionShardService:
    lt = LongTermMemory(FakeVectorStore(), HashEmbedder(64))
    return SessionShardService(0, Settings(intent_detector=detector), redis, RuleSummarizer(),
                               longterm=lambda: lt)


def _row(name: str, times: list[float]) -> str:
    return (f"{name:<10} n={len(times):>5}  p50 {percentile_ms(times, 50):6.2f} ms  "
            f"p95 {percentile_ms(times, 95):6.2f} ms  p99 {percentile_ms(times, 99):6.2f} ms")


def _run(label: str, turns: list[tuple[str, str]], shards: dict[str, SessionShardService]
         ) -> None:
    times: dict[str, list[float]] = {name: [] for name in shards}
    seeded: set[tuple[str, str]] = set()
    for i, (user, text) in enumerate(turns):
        order = list(shards.items()) if i % 2 == 0 else list(reversed(shards.items()))
        for name, shard in order:
            scope = Scope(tenant=name, user=user)
            if (name, user) not in seeded:
                for memory in SEED_MEMORIES:
                    shard.create_memory(scope, MemoryCreate(kind=MemoryKind.EPISODE,
                                                            text=memory))
                seeded.add((name, user))
            start = time.perf_counter()
            shard.append_turn(scope, "s-" + label.replace(" ", "-"), "user", text)
            times[name].append(time.perf_counter() - start)
    print(f"\n{label}: {len(turns)} turns, each through both shards")
    for name, series in times.items():
        print(_row(name, series))
    added = percentile_ms(times["learned"], 50) - percentile_ms(times["rules"], 50)
    print(f"added p50 (learned - rules): {added:+.2f} ms; p95 "
          f"{percentile_ms(times['learned'], 95) - percentile_ms(times['rules'], 95):+.2f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=2000)
    args = parser.parse_args()
    started = time.perf_counter()
    packaged_detector()  # fitted or loaded once, as at a shard's start (not on a turn)
    print(f"detector ready in {time.perf_counter() - started:.1f} s")
    ordinary = [(user.user_id, t.content) for user in locomo_users(DATA, "cost")
                for s in user.sessions for t in s.turns][:args.turns]
    forgets = [(f"w-{i % 20}", row["text"]) for i, row in enumerate(
        r for r in load() if r["writer"] in HELD_OUT and r["intent"] == "forget")]
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(Path(tmp) / "redis").start()
        try:
            redis = RedisStore(server.url)
            shards = {"learned": _shard(redis, "learned"), "rules": _shard(redis, "rules")}
            _run("locomo-dev", ordinary, shards)
            _run("held-out forgets", forgets, shards)
            redis.close()
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
