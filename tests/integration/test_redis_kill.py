"""No acknowledged turn lost when the embedded Redis is killed mid-stream (#39).

Concurrent writers append turns through ``RedisSessionLog.append_turns`` (the shard's WAL
call) on an ``EmbeddedRedis`` with its default fsync policy, the redis-server gets SIGKILL
while they write, and the restarted server must hold every acknowledged turn once.
``bench/redis_durability.py`` repeats this 20 times per policy and measures the cost.
"""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from pathlib import Path

import pytest
import redis
from pydantic import ValidationError

from strata.errors import QueueStoreError
from strata.models import Scope
from strata.runtime import LocalServices
from strata.settings import Settings
from strata.stores.keys import SessionRef
from strata.stores.redis import RedisStore
from strata.stores.redis_server import EmbeddedRedis

pytestmark = pytest.mark.redis

WRITERS = 4
ACKED_BEFORE_KILL = 300


def record(turn_id: str) -> dict[str, object]:
    return {"op": "turn", "at": "2026-12-03T10:00:00+00:00",
            "turn": {"turn_id": turn_id, "role": "user", "content": f"turn {turn_id}"}}


def lost_and_duplicated(store: RedisStore, acked: dict[SessionRef, list[str]]) -> tuple[int, int]:
    """Acknowledged turns missing from the WAL or the turn-id set; WAL entries repeated."""
    lost = duplicated = 0
    for ref, ids in acked.items():
        stored = Counter(rec["turn"]["turn_id"] for _, rec in store.sessions.read(ref))
        in_set = store.sessions.known_turn_ids(ref, ids)
        lost += sum(1 for t in ids if stored[t] == 0 or t not in in_set)
        duplicated += sum(n - 1 for n in stored.values() if n > 1)
    return lost, duplicated


def config(server: EmbeddedRedis, name: str) -> str:
    client = redis.Redis.from_url(server.url, decode_responses=True)
    try:
        return str(client.config_get(name)[name])
    finally:
        client.close()


@pytest.mark.redis  # a redis-server of its own
def test_acknowledged_turns_survive_a_sigkill_mid_stream(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "redis").start()
    assert config(server, "appendfsync") == "always"  # the default this guarantee rests on
    store = RedisStore(server.url, prefix="t:")
    acked: dict[SessionRef, list[str]] = {
        SessionRef(Scope(tenant="t", user=f"u{w}"), f"s{w}"): [] for w in range(WRITERS)}
    enough = threading.Event()
    errors: list[str] = []

    def write(ref: SessionRef, ids: list[str]) -> None:
        n = 0
        while True:
            turn_id = f"{ref.session_id}-{n}"
            try:
                store.sessions.append_turns(ref, [record(turn_id)], [turn_id])
            except QueueStoreError as exc:  # the kill: stop at the first refused write
                errors.append(str(exc))
                return
            ids.append(turn_id)
            n += 1
            if sum(map(len, acked.values())) >= ACKED_BEFORE_KILL:
                enough.set()

    threads = [threading.Thread(target=write, args=item, daemon=True) for item in acked.items()]
    try:
        for t in threads:
            t.start()
        assert enough.wait(60), "the writers did not reach 300 acknowledged turns in 60 s"
        assert server.pid is not None
        os.kill(server.pid, signal.SIGKILL)  # while every writer is mid-stream
        server.kill()
        for t in threads:
            t.join(timeout=30)
        assert not any(t.is_alive() for t in threads)
        assert len(errors) == WRITERS  # each writer saw the crash
    finally:
        store.close()
        server.kill()
    restarted = EmbeddedRedis(tmp_path / "redis", port=server.port).start()
    again = RedisStore(restarted.url, prefix="t:")
    try:
        total = sum(map(len, acked.values()))
        assert total >= ACKED_BEFORE_KILL
        assert lost_and_duplicated(again, acked) == (0, 0), f"of {total} acknowledged"
    finally:
        again.close()
        restarted.stop()


def test_the_count_sees_a_lost_and_a_duplicated_turn(redis_store: RedisStore) -> None:
    """The assertion above can fail: a turn acknowledged but gone, and one written twice."""
    ref = SessionRef(Scope(tenant="t", user="u"), "s")
    ids = [f"t{i}" for i in range(5)]
    wal = [redis_store.sessions.append_turns(ref, [record(t)], [t])[0] for t in ids]
    assert lost_and_duplicated(redis_store, {ref: ids}) == (0, 0)
    redis_store.sessions.remove_turns(ref, {"t3"})  # acknowledged, then gone from the WAL
    redis_store.sessions.append(ref, record("t1"))  # a retry written twice
    assert wal and lost_and_duplicated(redis_store, {ref: ids}) == (1, 1)


@pytest.mark.redis  # a redis-server of its own
def test_the_policy_is_a_setting_passed_to_the_embedded_redis(tmp_path: Path) -> None:
    assert Settings().redis_appendfsync == "always"
    with pytest.raises(ValidationError):
        Settings(redis_appendfsync="no")
    settings = Settings(data_dir=tmp_path, redis_appendfsync="everysec")
    with LocalServices(settings) as effective:
        client = redis.Redis.from_url(effective.redis_url, decode_responses=True)
        try:
            assert client.config_get("appendfsync") == {"appendfsync": "everysec"}
            assert client.config_get("appendonly") == {"appendonly": "yes"}
        finally:
            client.close()


def test_an_unknown_policy_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="appendfsync"):
        EmbeddedRedis(tmp_path, appendfsync="no")  # type: ignore[arg-type]
