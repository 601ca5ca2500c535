"""A session shard's turn append in one process, on the Redis double: turns/s and where
the time goes (cProfile, top functions by cumulative time).

    .venv/bin/python bench/shard_append.py [--batches 40] [--turns 100] [--top 20]

Each batch is one new session of one of 10 users, alternating user/assistant turns of 25
words, so the window overflows and the rolling summary folds turns in (the work a batched
ingestion puts on a shard). No Ray, no Redis server, no HTTP.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import time

from strata.layers.summarize import RuleSummarizer
from strata.models import Role, Scope
from strata.settings import Settings
from strata.shard.models import TurnIn
from strata.shard.service import SessionShardService
from strata.testing.fake_redis import FakeRedis

WORDS = ("the", "a", "we", "went", "to", "park", "and", "I", "like", "jazz", "music", "my",
         "sister", "moved", "to", "Lisbon", "last", "year", "budget", "is", "500", "dollars",
         "deadline", "March")


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--batches", type=int, default=40)
    p.add_argument("--turns", type=int, default=100)
    p.add_argument("--top", type=int, default=20)
    args = p.parse_args()
    rng = random.Random(1)
    shard = SessionShardService(0, Settings(), FakeRedis(), RuleSummarizer())
    batches = [(Scope(tenant="t", user=f"u{i % 10}"), f"s{i}", [
        TurnIn(role=Role.USER if n % 2 == 0 else Role.ASSISTANT,
               content=" ".join(rng.choice(WORDS) for _ in range(25)))
        for n in range(args.turns)]) for i in range(args.batches)]
    profile = cProfile.Profile()
    started = time.perf_counter()
    profile.enable()
    for scope, session_id, turns in batches:
        shard.append_turns(scope, session_id, turns)
    profile.disable()
    elapsed = time.perf_counter() - started
    print(f"{args.batches * args.turns / elapsed:,.0f} turns/s in process "
          f"({args.batches} batches of {args.turns}, {elapsed:.2f} s under cProfile)")
    pstats.Stats(profile).sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
