"""Turn ids are idempotent for a session's whole life; an archived session's working memory
is redacted (issue #15)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from strata.errors import QueueStoreError
from strata.layers.summarize import RuleSummarizer
from strata.layers.working import WorkingMemory
from strata.models import Scope
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.keys import SessionRef
from strata.stores.redis import RedisStore
from strata.stores.redis.sessions import RedisSessionLog

ALICE = Scope(tenant="acme", user="alice")
KEY = SessionRef(ALICE, "s")
OLD = WorkingMemory.RECENT_IDS + 36  # turns after the first: well past what the window recalls


def shard(redis_store: RedisStore, **overrides: Any) -> SessionShardService:
    return SessionShardService(0, Settings(**{"window_turns": 8, **overrides}), redis_store,
                               RuleSummarizer())


def wal_turn_ids(redis_store: RedisStore, key: SessionRef = KEY) -> list[str]:
    return [r["turn"]["turn_id"] for _, r in redis_store.sessions.read(key) if r["op"] == "turn"]


def long_session(svc: SessionShardService) -> None:
    svc.append_turn(ALICE, "s", "user", "the very first turn", turn_id="first")
    for i in range(OLD):
        svc.append_turn(ALICE, "s", "user", f"turn {i}: fine", turn_id=f"c-{i}")


def test_a_retry_older_than_the_remembered_ids_is_a_duplicate(redis_store: RedisStore) -> None:
    svc = shard(redis_store)
    long_session(svc)
    again = svc.append_turn(ALICE, "s", "user", "the very first turn", turn_id="first")
    assert again.duplicate and again.turn_id == "first"
    assert svc.view(ALICE, "s").turn_count == OLD + 1
    assert wal_turn_ids(redis_store).count("first") == 1


@pytest.mark.parametrize("snapshot_every_turns", [1000, 5])  # WAL replay only / snapshot + tail
def test_a_retry_after_a_shard_restart_is_a_duplicate(redis_store: RedisStore,
                                                      snapshot_every_turns: int) -> None:
    svc = shard(redis_store, snapshot_every_turns=snapshot_every_turns)
    long_session(svc)
    svc.flush_snapshots()
    restarted = shard(redis_store, snapshot_every_turns=snapshot_every_turns)  # empty memory
    again = restarted.append_turn(ALICE, "s", "user", "the very first turn", turn_id="first")
    assert again.duplicate
    assert restarted.view(ALICE, "s").turn_count == OLD + 1
    assert wal_turn_ids(redis_store).count("first") == 1


def test_a_batch_with_old_and_new_ids_stores_only_the_new(redis_store: RedisStore) -> None:
    svc = shard(redis_store)
    long_session(svc)
    acks = svc.append_turns(ALICE, "s", [
        {"role": "user", "content": "the very first turn", "turn_id": "first"},
        {"role": "user", "content": "turn 0: fine", "turn_id": "c-0"},
        {"role": "user", "content": "something new", "turn_id": "new-1"}])
    assert [a.duplicate for a in acks] == [True, True, False]
    ids = wal_turn_ids(redis_store)
    assert (ids.count("first"), ids.count("c-0"), ids[-1]) == (1, 1, "new-1")
    assert svc.view(ALICE, "s").turn_count == OLD + 2


def test_the_turn_id_set_expires_and_goes_with_the_session(redis_store: RedisStore) -> None:
    svc = shard(redis_store)
    svc.append_turn(ALICE, "s", "user", "hello", turn_id="h1")
    assert redis_store.sessions.known_turn_ids(KEY, ["h1", "h2"]) == {"h1"}
    svc.close(ALICE, "s")
    ttl = redis_store.connection.client.ttl(redis_store.connection.key(f"turns:{KEY.key}"))
    assert 0 < ttl <= Settings().archive_retention_days * 86400
    redis_store.sessions.delete_user(ALICE)
    assert redis_store.sessions.known_turn_ids(KEY, ["h1"]) == set()


def test_a_session_written_before_the_set_is_filled_from_its_wal(
        redis_store: RedisStore) -> None:
    svc = shard(redis_store)
    long_session(svc)
    svc.shutdown()
    # as an older Strata left it
    redis_store.connection.client.delete(redis_store.connection.key(f"turns:{KEY.key}"))
    restarted = shard(redis_store)
    assert restarted.append_turn(ALICE, "s", "user", "again", turn_id="first").duplicate
    assert wal_turn_ids(redis_store).count("first") == 1


class ReplyLost(RedisSessionLog):
    """Redis takes the WAL write, then the connection breaks before the reply (once)."""

    lose_next = False

    def append_turns(self, ref: SessionRef, records: Sequence[Mapping[str, Any]],
                     turn_ids: Sequence[str] = ()) -> list[str]:
        ids = super().append_turns(ref, records, turn_ids)
        if self.lose_next:
            self.lose_next = False
            raise QueueStoreError("redis wal append failed: connection reset")
        return ids


def test_a_write_whose_reply_was_lost_is_retried_as_a_duplicate(
        redis_server: Any, request: pytest.FixtureRequest) -> None:
    store = RedisStore(redis_server.url, prefix=f"t:{request.node.name}:")
    store.sessions = lossy = ReplyLost(store.connection)
    try:
        svc = shard(store)
        svc.append_turn(ALICE, "s", "user", "one", turn_id="t1")
        lossy.lose_next = True
        with pytest.raises(QueueStoreError):
            svc.append_turn(ALICE, "s", "user", "two", turn_id="t2")
        assert svc.append_turn(ALICE, "s", "user", "two", turn_id="t2").duplicate
        view = svc.view(ALICE, "s")  # the shard's copy caught up with what Redis holds
        assert (view.turn_count, [t.turn_id for t in view.window]) == (2, ["t1", "t2"])
        assert svc.append_turn(ALICE, "s", "user", "three").turn_id == "s:3"
        assert wal_turn_ids(store) == ["t1", "t2", "s:3"]
    finally:
        store.close()


SECRETS = ["13812345678", "hunter2-secret", "4111 1111 1111 1111"]


def test_working_memory_is_stored_redacted_and_archived_redacted(
        redis_store: RedisStore) -> None:
    """What is acknowledged is stored redacted (the WAL, so Redis's AOF, never holds a
    secret): the live working memory as read, its snapshots and the archive alike."""
    svc = shard(redis_store, snapshot_every_turns=2)
    svc.append_turn(ALICE, "s", "user", f"Remember my phone number is {SECRETS[0]}")
    svc.append_turn(ALICE, "s", "user", f"my password is {SECRETS[1]}",
                    metadata={"note": f"card {SECRETS[2]}"})
    for i in range(12):  # the first turns leave the window for the summary
        svc.append_turn(ALICE, "s", "assistant", f"reply {i} about the trip plans")
    svc.append_turn(ALICE, "s", "user", f"important: my card is {SECRETS[2]}")
    svc.patch_task_state(ALICE, "s", {"goal": f"call back on {SECRETS[0]}"})
    live = json.dumps(svc.view(ALICE, "s").model_dump(mode="json"))
    assert not any(s in live for s in SECRETS) and "[REDACTED:" in live, live
    wal = json.dumps(redis_store.sessions.read(KEY), default=str)
    assert not any(s in wal for s in SECRETS), wal
    svc.close(ALICE, "s")
    snapshot = redis_store.sessions.snapshot(KEY)
    assert snapshot is not None
    for archived in (json.dumps(snapshot[0]),
                     json.dumps(svc.view(ALICE, "s").model_dump(mode="json")),
                     json.dumps(shard(redis_store).view(ALICE, "s").model_dump(mode="json"))):
        assert not any(s in archived for s in SECRETS), archived
        assert "[REDACTED:" in archived
    view = svc.view(ALICE, "s")
    assert view.closed and view.turn_count == 15
    assert "trip plans" in " ".join(t.content for t in view.window)
