"""The Redis primitives, against a real redis-server started by the test setup."""

from __future__ import annotations

import pytest

from strata.errors import InvalidInput, QueueStoreError
from strata.stores.redis import QUEUE_LOW, RedisStore
from strata.stores.redis_server import EmbeddedRedis


def test_wal_append_read_trim(redis_store: RedisStore) -> None:
    ids = [redis_store.wal_append("s1", {"n": i, "text": f"turn {i}"}) for i in range(5)]
    assert [r["n"] for _, r in redis_store.wal_read("s1")] == [0, 1, 2, 3, 4]
    assert [r["n"] for _, r in redis_store.wal_read("s1", after_id=ids[2])] == [3, 4]
    assert redis_store.wal_trim("s1", ids[2]) == 3
    assert [r["n"] for _, r in redis_store.wal_read("s1")] == [3, 4]
    assert redis_store.wal_read("other") == []


def test_snapshot_roundtrip_keeps_chinese_text(redis_store: RedisStore) -> None:
    assert redis_store.snapshot_get("s1") is None
    redis_store.snapshot_put("s1", {"summary": "我住在北京"}, "5-0")
    data, wal_id = redis_store.snapshot_get("s1") or ({}, "")
    assert data == {"summary": "我住在北京"} and wal_id == "5-0"
    # stored as text (not \\u escapes), so a forgetting scan can find it
    assert any("我住在北京".encode() in raw for _, raw in redis_store.dump_values())
    redis_store.delete_session("s1")
    assert redis_store.snapshot_get("s1") is None


def test_queue_consume_ack_removes_payload(redis_store: RedisStore) -> None:
    redis_store.ensure_group(QUEUE_LOW, "extractors")
    redis_store.ensure_group(QUEUE_LOW, "extractors")  # idempotent
    for i in range(3):
        redis_store.enqueue(QUEUE_LOW, {"job": i})
    assert redis_store.queue_depth(QUEUE_LOW, "extractors").backlog == 3
    got = redis_store.consume(QUEUE_LOW, "extractors", "w1", count=2)
    assert [m.payload["job"] for m in got] == [0, 1]
    depth = redis_store.queue_depth(QUEUE_LOW, "extractors")
    assert (depth.pending, depth.lag) == (2, 1)
    assert redis_store.ack(QUEUE_LOW, "extractors", [m.id for m in got]) == 2
    assert [p["job"] for _, p in redis_store.scan_queue(QUEUE_LOW)] == [2]


def test_crashed_consumer_entries_are_claimed(redis_store: RedisStore) -> None:
    redis_store.ensure_group(QUEUE_LOW, "g")
    redis_store.enqueue(QUEUE_LOW, {"job": "x"})
    taken = redis_store.consume(QUEUE_LOW, "g", "dead-worker")
    assert len(taken) == 1
    assert redis_store.consume(QUEUE_LOW, "g", "w2") == []  # not redelivered as new
    claimed = redis_store.claim_stale(QUEUE_LOW, "g", "w2", min_idle_ms=0)
    assert [m.payload for m in claimed] == [{"job": "x"}]
    assert claimed[0].deliveries == 2


def test_idempotency_keys(redis_store: RedisStore) -> None:
    assert redis_store.claim_once("abc") is True
    assert redis_store.claim_once("abc") is False
    redis_store.release("abc")
    assert redis_store.claim_once("abc") is True


def test_audit_is_content_free(redis_store: RedisStore) -> None:
    redis_store.audit("acme:alice", action="delete", memory_id="m1", count=1)
    with pytest.raises(InvalidInput):
        redis_store.audit("acme:alice", action="delete", text="I am allergic to peanuts")
    assert redis_store.audit_read("acme:alice") == [
        {"action": "delete", "memory_id": "m1", "count": "1"}]


def test_acknowledged_writes_survive_a_killed_redis(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = EmbeddedRedis(tmp_path / "r").start()
    store = RedisStore(server.url)
    acked = [store.wal_append("s", {"n": i}) for i in range(50)]
    server.kill()  # SIGKILL: no shutdown save, AOF is all there is
    store.close()
    with pytest.raises(QueueStoreError):
        RedisStore(server.url).ping()
    restarted = EmbeddedRedis(tmp_path / "r", port=server.port).start()
    try:
        again = RedisStore(restarted.url)
        assert [rid for rid, _ in again.wal_read("s")] == acked
        again.close()
    finally:
        restarted.stop()


def test_missing_binary_is_a_clear_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(QueueStoreError, match="redis-server not found"):
        EmbeddedRedis(tmp_path, binary=str(tmp_path / "nope")).start()
