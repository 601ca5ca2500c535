"""``STRATA_REDIS_WAIT_REPLICAS``: a WAL append acknowledged only once that many replicas
have it (Redis ``WAIT`` after the append's MULTI/EXEC, on the same connection), against real
redis-servers: a primary alone, and a primary with a replica (#39)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from pydantic import ValidationError

from strata.errors import QueueStoreError
from strata.models import Scope
from strata.settings import Settings
from strata.stores.keys import SessionRef
from strata.stores.redis import RedisStore
from strata.stores.redis_server import EmbeddedRedis

pytestmark = pytest.mark.redis

REF = SessionRef(Scope(tenant="t", user="u"), "s")


def turn(turn_id: str) -> dict[str, object]:
    return {"op": "turn", "turn": {"turn_id": turn_id, "content": "hello"}}


@pytest.fixture
def replicated(tmp_path: Path) -> Iterator[tuple[EmbeddedRedis, EmbeddedRedis]]:
    """A primary and a replica of it, the link up."""
    with EmbeddedRedis(tmp_path / "primary") as primary, \
            EmbeddedRedis(tmp_path / "replica") as replica:
        client = redis.Redis.from_url(replica.url, decode_responses=True)
        try:
            client.replicaof("127.0.0.1", primary.port)
            deadline = time.monotonic() + 20
            while client.info("replication").get("master_link_status") != "up":
                assert time.monotonic() < deadline, "the replica did not sync in 20 s"
                time.sleep(0.05)
        finally:
            client.close()
        yield primary, replica


def test_with_no_replica_the_append_is_refused_after_the_timeout(
        redis_server: EmbeddedRedis) -> None:
    store = RedisStore(redis_server.url, prefix="t:wait-none:", wait_replicas=1,
                       wait_timeout_ms=50)
    try:
        started = time.monotonic()
        with pytest.raises(QueueStoreError, match="reached 0 of 1 replicas in 50 ms"):
            store.sessions.append_turns(REF, [turn("a")], ["a"])
        assert time.monotonic() - started >= 0.045  # WAIT blocked for its timeout
        with pytest.raises(QueueStoreError, match="0 of 1 replicas"):
            store.sessions.append(REF, {"op": "close"})
        # on the primary, unacknowledged: a retry of turn "a" is recognised by its id
        assert [r["turn"]["turn_id"] for _, r in store.sessions.read(REF)
                if r["op"] == "turn"] == ["a"]
        assert store.sessions.known_turn_ids(REF, ["a"]) == {"a"}
    finally:
        store.connection.client.delete(*store.connection.client.keys("t:wait-none:*"))
        store.close()


def test_with_a_replica_the_append_returns_once_the_replica_has_it(
        replicated: tuple[EmbeddedRedis, EmbeddedRedis]) -> None:
    primary, replica = replicated
    store = RedisStore(primary.url, wait_replicas=1, wait_timeout_ms=5000)
    on_replica = RedisStore(replica.url)
    try:
        ids = store.sessions.append_turns(REF, [turn("a"), turn("b")], ["a", "b"])
        closed = store.sessions.append(REF, {"op": "close"})
        # acknowledged means on the replica already: no waiting here
        assert [rid for rid, _ in on_replica.sessions.read(REF)] == [*ids, closed]
        assert on_replica.sessions.known_turn_ids(REF, ["a", "b"]) == {"a", "b"}
        with pytest.raises(QueueStoreError, match="1 of 2 replicas"):
            RedisStore(primary.url, wait_replicas=2, wait_timeout_ms=50).sessions.append_turns(
                REF, [turn("c")], ["c"])
    finally:
        store.close()
        on_replica.close()


def test_the_settings_bound_the_wait() -> None:
    assert Settings().redis_wait_replicas == 0  # no WAIT unless asked for
    for bad in ({"redis_wait_replicas": -1}, {"redis_wait_timeout_ms": 0}):
        with pytest.raises(ValidationError):
            Settings(**bad)  # type: ignore[arg-type]
