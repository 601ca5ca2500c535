"""One shard's batched append in process, as the HTTP path's batches reach it: synthetic
users' 100-turn batches of user turns (60 % stating a fact) through
``SessionShardService.append_turns`` with the packaged intent detector, a real embedded
Redis, the in-process vector store and the hash embedder; turns a second, and with ``prof``
a cProfile listing. (``bench/shard_append.py``: alternating turns on the Redis double.)

    .venv/bin/python bench/batch_append.py 30          # 30 batches of 100 turns
    .venv/bin/python bench/batch_append.py 20 prof
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common.workload import UserData, synthetic_users
from strata.layers.memories import LongTermMemory
from strata.layers.summarize import RuleSummarizer
from strata.models import Scope
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.redis import RedisStore
from strata.stores.redis_server import EmbeddedRedis
from strata.testing.fake_vectors import FakeVectorStore


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    profile = cProfile.Profile() if sys.argv[2:] == ["prof"] else None
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(Path(tmp), appendfsync="everysec").start()
        try:
            lt = LongTermMemory(FakeVectorStore(), HashEmbedder(64))
            shard = SessionShardService(0, Settings(), RedisStore(server.url),
                                        RuleSummarizer(), longterm=lambda: lt)
            users = synthetic_users(n + 2, 100, "append", 7, questions_per_user=0)

            def batch(user: UserData) -> None:
                turns = user.sessions[0].turns
                shard.append_turns(Scope(tenant="t", user=user.user_id), "s1",
                                   [{"role": t.role, "content": t.content} for t in turns])

            for user in users[:2]:  # the detector's load, the first session
                batch(user)
            started = time.perf_counter()
            if profile:
                profile.enable()
            for user in users[2:]:
                batch(user)
            if profile:
                profile.disable()
            seconds = time.perf_counter() - started
        finally:
            server.stop()
    turns = n * 100
    print(f"{turns} turns in {seconds:.2f} s: {turns / seconds:.0f} turns/s "
          f"({seconds / turns * 1000:.2f} ms a turn)")
    if profile:
        pstats.Stats(profile).sort_stats("cumulative").print_stats(45)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
