"""Contract tests of the Redis ports (``strata.stores.redis_ports``): every port test runs
against ``RedisStore`` on a real Redis and against the in-memory double ``FakeRedis``
(the ``store`` fixture, one parameter each). The tests of Redis itself — the key layout on
the wire, TTLs, the AOF, durability across SIGKILL — take ``redis_store`` and run on the
real server only (the section "Redis itself" at the end)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from strata.errors import InvalidInput, QueueStoreError
from strata.models import Scope
from strata.stores.keys import QUEUE_HIGH, QUEUE_LOW, SessionRef, deleted_turn, parse_scope_key
from strata.stores.redis import RedisStore
from strata.stores.redis_ports import (
    FORGET_LOG_MAX,
    FORGET_LOG_TTL_S,
    JOB_TTL_S,
    ForgetRequest,
    JobStatus,
)
from strata.stores.redis_server import EmbeddedRedis, free_port
from strata.testing.fake_redis import FakeRedis

ALICE = Scope(tenant="acme", user="alice")
BOB = Scope(tenant="acme", user="bob")
S1 = SessionRef(ALICE, "s1")

Store = RedisStore | FakeRedis


class FakeClock:
    """Epoch seconds that move only when a test says so."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=[pytest.param("redis", marks=pytest.mark.redis), "memory"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    """The ports on the session's real Redis, then the same ports in memory."""
    if request.param == "memory":
        yield FakeRedis()
        return
    server: EmbeddedRedis = request.getfixturevalue("redis_server")
    # a prefix of its own, without the "[redis]" of the test id: brackets are a glob class
    real = RedisStore(server.url, prefix=f"t:{request.node.originalname}:")
    yield real
    real.close()


# -- the key codec -----------------------------------------------------------------------------

def test_session_and_scope_keys_round_trip() -> None:
    assert S1.key == "acme:alice:s1"
    assert SessionRef.parse("acme:alice:s1") == S1
    assert parse_scope_key("acme:_shared") == Scope.shared("acme")
    assert S1.of(ALICE) and not S1.of(BOB)
    for bad in ("acme", "acme:", ":alice", "a:b:c"):
        with pytest.raises(InvalidInput):
            parse_scope_key(bad)
    with pytest.raises(InvalidInput):
        SessionRef.parse("acme:alice:")


# -- SessionLog --------------------------------------------------------------------------------

def test_wal_appends_in_order_and_reads_after_an_id(store: Store) -> None:
    log = store.sessions
    ids = [log.append(S1, {"n": i, "text": f"turn {i}"}) for i in range(3)]
    ids += log.append_turns(S1, [{"n": 3}, {"n": 4}], ["t3", "t4"])
    assert ids == sorted(ids) and len(set(ids)) == 5
    assert [r["n"] for _, r in log.read(S1)] == [0, 1, 2, 3, 4]
    assert [r["n"] for _, r in log.read(S1, after_id=ids[2])] == [3, 4]
    assert [rid for rid, _ in log.read(S1)] == ids
    assert log.read(SessionRef(ALICE, "other")) == []
    assert log.read(SessionRef(BOB, "s1")) == []  # same session id, another user


def test_turn_ids_join_in_the_wal_transaction(store: Store) -> None:
    log = store.sessions
    assert not log.has_turn_id_set(S1)
    log.append_turns(S1, [{"op": "turn"}] * 2, ["a", "b"])
    assert log.has_turn_id_set(S1)
    assert log.known_turn_ids(S1, ["a", "b", "c"]) == {"a", "b"}
    assert log.known_turn_ids(S1, []) == set()
    assert log.known_turn_ids(SessionRef(BOB, "s1"), ["a"]) == set()
    log.add_turn_ids(S1, ["c"])
    assert log.known_turn_ids(S1, ["c"]) == {"c"}


def test_remove_turns_deletes_only_those_turns(store: Store) -> None:
    log = store.sessions
    log.append_turns(S1, [{"op": "turn", "turn": {"turn_id": t}} for t in ("a", "b", "c")])
    log.append(S1, {"op": "close"})
    assert log.remove_turns(S1, {"b", "zz"}) == 1
    assert [r.get("turn", {}).get("turn_id") for _, r in log.read(S1)] == ["a", "c", None]
    assert log.remove_turns(S1, {"zz"}) == 0


def test_snapshot_roundtrip_keeps_text_and_delete_removes_the_session(
        store: Store) -> None:
    log = store.sessions
    assert log.snapshot(S1) is None
    log.append_turns(S1, [{"n": 1}], ["t1"])
    log.put_snapshot(S1, {"summary": "我住在北京"}, "5-0")
    assert log.snapshot(S1) == ({"summary": "我住在北京"}, "5-0")
    assert any("我住在北京".encode() in raw for _, raw in store.dump_values())
    log.delete(S1)
    assert (log.snapshot(S1), log.read(S1), log.has_turn_id_set(S1)) == (None, [], False)


def test_delete_user_removes_every_session_of_that_user_only(store: Store) -> None:
    log = store.sessions
    for ref in (S1, SessionRef(ALICE, "s2"), SessionRef(BOB, "s1")):
        log.append_turns(ref, [{"n": 1}], ["t1"])
        log.put_snapshot(ref, {}, "0")
    assert log.delete_user(ALICE) == 6  # wal, turns and wm of two sessions
    assert log.read(S1) == [] and log.snapshot(SessionRef(ALICE, "s2")) is None
    assert len(log.read(SessionRef(BOB, "s1"))) == 1
    assert log.delete_user(ALICE) == 0


# -- SessionIndex ------------------------------------------------------------------------------

def test_idle_sessions_by_shard_and_untrack(store: Store) -> None:
    index = store.index
    s2, bobs = SessionRef(ALICE, "s2"), SessionRef(BOB, "s1")
    index.touch(0, S1, 10.0)
    index.touch(0, s2, 30.0)
    index.touch(0, bobs, 5.0)
    index.touch(1, SessionRef(ALICE, "elsewhere"), 1.0)
    assert index.idle(0, before=20.0) == [bobs, S1]  # oldest first
    assert index.idle(0, before=20.0, limit=1) == [bobs]
    index.untrack(0, bobs)
    index.touch(0, S1, 40.0)  # active again
    assert index.idle(0, before=35.0) == [s2]
    index.untrack_user(0, ALICE)
    assert index.idle(0, before=100.0) == []
    assert index.idle(1, before=100.0) == [SessionRef(ALICE, "elsewhere")]


def test_archive_expires_the_session_and_indexes_it(store: Store) -> None:
    log, index = store.sessions, store.index
    log.append_turns(S1, [{"n": 1}], ["t1"])
    log.put_snapshot(S1, {}, "0")
    index.archive(S1, 600, at=100.0)
    index.archive(SessionRef(ALICE, "s2"), 600, at=200.0)
    index.archive(SessionRef(BOB, "s1"), 600, at=50.0)
    assert index.archived_before(150.0) == [SessionRef(BOB, "s1"), S1]
    assert sorted(index.archived_of(ALICE), key=lambda r: r[1]) == [
        (S1, 100.0), (SessionRef(ALICE, "s2"), 200.0)]
    index.unarchive(S1)
    assert index.archived_before(150.0) == [SessionRef(BOB, "s1")]
    index.unarchive_user(ALICE)
    assert index.archived_of(ALICE) == []
    assert index.archived_before(1e12) == [SessionRef(BOB, "s1")]


# -- WriteQueues -------------------------------------------------------------------------------

def test_queue_consume_ack_removes_the_payload(store: Store) -> None:
    queues = store.queues
    queues.ensure_group(QUEUE_LOW, "extractors")
    queues.ensure_group(QUEUE_LOW, "extractors")  # idempotent
    ids = [queues.enqueue(QUEUE_LOW, {"job": i}) for i in range(3)]
    assert queues.depth(QUEUE_LOW, "extractors").backlog == 3
    assert queues.oldest_ids(QUEUE_LOW, 2) == ids[:2]
    got = queues.consume(QUEUE_LOW, "extractors", "w1", count=2)
    assert [m.payload["job"] for m in got] == [0, 1] and got[0].deliveries == 1
    depth = queues.depth(QUEUE_LOW, "extractors")
    assert (depth.length, depth.pending, depth.lag, depth.backlog) == (3, 2, 1, 3)
    assert queues.ack(QUEUE_LOW, "extractors", [m.id for m in got]) == 2
    assert queues.ack(QUEUE_LOW, "extractors", []) == 0
    assert [p["job"] for _, p in queues.entries(QUEUE_LOW)] == [2]
    assert queues.depth(QUEUE_LOW, "extractors").backlog == 1
    assert queues.depth(QUEUE_HIGH, "extractors").backlog == 0  # no stream yet


def test_a_crashed_consumers_entries_are_claimed_with_their_delivery_count(
        store: Store) -> None:
    queues = store.queues
    queues.ensure_group(QUEUE_LOW, "g")
    queues.enqueue(QUEUE_LOW, {"job": "x"})
    taken = queues.consume(QUEUE_LOW, "g", "dead-worker")
    assert len(taken) == 1
    assert queues.consume(QUEUE_LOW, "g", "w2") == []  # not redelivered as new
    assert queues.claim_stale(QUEUE_LOW, "g", "w2", min_idle_ms=60_000) == []  # not stale yet
    claimed = queues.claim_stale(QUEUE_LOW, "g", "w2", min_idle_ms=0)
    assert [(m.id, m.payload, m.deliveries) for m in claimed] == [(taken[0].id, {"job": "x"}, 2)]


def test_a_job_is_queued_from_its_first_moment_and_its_record_follows_it(store: Store) -> None:
    queues = store.queues
    queues.ensure_group(QUEUE_LOW, "g")
    job_id = queues.enqueue(QUEUE_LOW, {"type": "extract_session", "reason": "close",
                                        "tenant": "acme", "user_id": "alice",
                                        "session_id": "s1", "wal_from": "0", "wal_to": "1-0"})
    record = queues.job(job_id)
    assert record is not None and record.status is JobStatus.QUEUED and not record.finished
    assert (record.id, record.kind, record.reason, record.tenant, record.user_id,
            record.session_id, record.queue) == (
        job_id, "extract_session", "close", "acme", "alice", "s1", QUEUE_LOW)
    assert "wal_from" not in record.model_dump()  # ids and counts only
    queues.update_job(job_id, JobStatus.RUNNING, attempts=1)
    queues.update_job(job_id, JobStatus.QUEUED, error="TimeoutError")
    assert (queues.job(job_id).status, queues.job(job_id).error) == (  # type: ignore[union-attr]
        JobStatus.QUEUED, "TimeoutError")
    queues.update_job(job_id, JobStatus.DONE, attempts=2, written={"facts.insert": 1})
    done = queues.job(job_id)
    assert done is not None and done.finished and done.error is None
    assert (done.attempts, done.written, done.created_at) == (2, {"facts.insert": 1},
                                                              record.created_at)
    assert queues.job("1-0") is None
    queues.update_job("1-0", JobStatus.DONE)  # no record: nothing written
    assert queues.job("1-0") is None


def test_a_job_record_expires(redis_store: RedisStore) -> None:
    job_id = redis_store.queues.enqueue(QUEUE_LOW, {"tenant": "acme", "user_id": "alice"})
    ttl = redis_store.connection.client.ttl(redis_store.connection.key(f"job:{job_id}"))
    assert JOB_TTL_S - 60 < ttl <= JOB_TTL_S


def test_a_consumer_waits_for_block_ms_and_a_missing_group_is_an_error(store: Store) -> None:
    queues = store.queues
    queues.ensure_group(QUEUE_LOW, "g")
    started = time.monotonic()
    assert queues.consume(QUEUE_LOW, "g", "w", block_ms=100) == []
    assert time.monotonic() - started >= 0.09
    with pytest.raises(QueueStoreError):
        queues.consume(QUEUE_LOW, "nobody", "w")
    with pytest.raises(QueueStoreError):
        queues.claim_stale(QUEUE_HIGH, "g", "w", min_idle_ms=0)


def test_a_pending_entry_deleted_before_its_claim_is_dropped(store: Store) -> None:
    queues = store.queues
    queues.ensure_group(QUEUE_LOW, "g")
    for scope in (ALICE, BOB):
        queues.enqueue(QUEUE_LOW, {"tenant": scope.tenant, "user_id": scope.user})
    queues.consume(QUEUE_LOW, "g", "dead")
    assert queues.remove_user(QUEUE_LOW, ALICE) == 1  # a forgotten user's job, mid-flight
    assert queues.depth(QUEUE_LOW, "g").pending == 2
    claimed = queues.claim_stale(QUEUE_LOW, "g", "w", min_idle_ms=0)
    assert [m.payload["user_id"] for m in claimed] == ["bob"]
    assert queues.depth(QUEUE_LOW, "g").pending == 1
    assert queues.ack(QUEUE_LOW, "g", [m.id for m in claimed]) == 1
    assert queues.depth(QUEUE_LOW, "g").backlog == 0


def test_remove_user_drops_only_that_users_jobs(store: Store) -> None:
    queues = store.queues
    for scope in (ALICE, BOB, ALICE, Scope(tenant="other", user="alice")):
        queues.enqueue(QUEUE_LOW, {"tenant": scope.tenant, "user_id": scope.user})
    assert queues.remove_user(QUEUE_LOW, ALICE) == 2
    assert [(p["tenant"], p["user_id"]) for _, p in queues.entries(QUEUE_LOW)] == [
        ("acme", "bob"), ("other", "alice")]
    assert queues.remove_user(QUEUE_LOW, ALICE) == 0


# -- AuditLog, RecallLog, UserRegistry, FollowUpState, AppendOnlyFile --------------------------

def test_audit_is_content_free_and_per_user(store: Store) -> None:
    audit = store.audit
    audit.append(ALICE, action="delete", memory_id="m1", count=1)
    with pytest.raises(InvalidInput, match="content-free"):
        audit.append(ALICE, action="delete", text="I am allergic to peanuts")
    assert audit.read(ALICE) == [{"action": "delete", "memory_id": "m1", "count": "1"}]
    assert audit.read(BOB) == []
    assert not any(b"peanuts" in raw for _, raw in store.dump_values())


def test_recall_log_removal_by_user_and_by_memory(store: Store) -> None:
    recalls = store.recalls
    recalls.add(ALICE, ["m1", "m2"], "personal")
    recalls.add(ALICE, ["m3"], "knowledge")
    recalls.add(BOB, ["m1"], "personal")
    assert recalls.remove(ALICE, {"m2", "zz"}) == 1
    assert recalls.remove(ALICE, {"m2"}) == 0
    assert recalls.remove(ALICE) == 1
    assert recalls.remove(BOB, {"m1"}) == 1


def test_user_registry(store: Store) -> None:
    users = store.users
    for scope in (BOB, ALICE, ALICE, Scope.shared("acme")):
        users.register(scope)
    assert users.all() == [Scope.shared("acme"), ALICE, BOB]
    users.unregister(ALICE)
    assert users.all() == [Scope.shared("acme"), BOB]


def test_follow_up_state(store: Store) -> None:
    fu = store.followups
    assert fu.state(ALICE, S1) == ({}, {}, 0)
    fu.proposed(ALICE, S1, ["trip", "task:x"], 100.0, 60)
    fu.proposed(ALICE, None, ["other"], 50.0, 60)
    fu.outcome(ALICE, "trip", "plan", "used", 1e9)
    fu.outcome(ALICE, "task:x", "open_task", "dismissed", 200.0)
    fu.outcome(ALICE, "other", "plan", "dismissed", 300.0)
    assert fu.state(ALICE, S1) == ({"trip": 1e9, "task:x": 200.0, "other": 300.0},
                                   {"plan": (1, 1), "open_task": (0, 1)}, 2)
    assert fu.state(ALICE, SessionRef(ALICE, "s2"))[2] == 0
    assert fu.state(BOB, None) == ({}, {}, 0)
    assert fu.delete_user(ALICE) == 3  # quiet, outcomes, the session's count
    assert fu.state(ALICE, S1) == ({}, {}, 0)


def test_forget_log_keeps_deleted_turns_by_id(store: Store) -> None:
    log = store.forgets
    log.add_deleted_turns(ALICE, "s1", ["s1:2", "t9"])
    log.add_deleted_turns(ALICE, "s1", ["s1:2"])  # again: still one
    log.add_deleted_turns(ALICE, "s2", [])
    assert log.deleted_turns(ALICE) == {deleted_turn("s1", "s1:2"), deleted_turn("s1", "t9")}
    assert deleted_turn("s1", "t9") == "s1:t9" and log.deleted_turns(BOB) == set()
    log.add(ALICE, ForgetRequest(turn_id="t1", at=datetime(2026, 1, 1), target="x"))
    assert log.delete_user(ALICE) == 2  # the requests and the deleted turns
    assert log.deleted_turns(ALICE) == set() and log.recent(ALICE) == []


def test_forget_log_keeps_each_request_once_oldest_first_and_capped(store: Store) -> None:
    log = store.forgets
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    later = ForgetRequest(turn_id="t2", at=start + timedelta(hours=1), target="the Tokyo trip",
                          viewer="travel", speaker="Ann")
    codename = ForgetRequest(turn_id="t1", at=start, target="my codename")
    log.add(ALICE, later)
    log.add(ALICE, codename)
    log.add(ALICE, codename)  # a retried job: still one
    log.add(ALICE, gym := ForgetRequest(turn_id="t1", at=start, target="my gym"))  # same turn
    assert log.recent(ALICE)[-1] == later and len(log.recent(ALICE)) == 3
    assert {r.target for r in log.recent(ALICE)[:2]} == {"my codename", "my gym"}
    assert log.recent(BOB) == []
    assert (log.remove(ALICE, [codename, gym]), log.recent(ALICE)) == (2, [later])
    assert log.remove(ALICE, []) == 0
    log.add(ALICE, ForgetRequest(turn_id="t0", at=datetime(1, 1, 1), target="x"))  # naive: UTC
    assert [r.turn_id for r in log.recent(ALICE)] == ["t0", "t2"]
    log.remove(ALICE, log.recent(ALICE)[:1])
    for i in range(FORGET_LOG_MAX + 3):
        log.add(BOB, ForgetRequest(turn_id=f"b{i}", at=start + timedelta(minutes=i), target="x"))
    kept = log.recent(BOB)
    assert len(kept) == FORGET_LOG_MAX and kept[0].turn_id == "b3"  # the oldest three went
    assert (log.delete_user(ALICE), log.recent(ALICE), len(log.recent(BOB))) == (
        1, [], FORGET_LOG_MAX)



def test_forget_schedule_hands_each_shard_its_due_requests_earliest_first(store: Store) -> None:
    log = store.forgets
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    old = ForgetRequest(turn_id="t1", at=at, target="my old flat", forgotten={"m1": 0.9})
    new = ForgetRequest(turn_id="t2", at=at, target="the gym")
    log.schedule(0, ALICE, new, due=200.0)
    log.schedule(0, BOB, old, due=100.0)
    log.schedule(1, ALICE, old, due=50.0)  # another shard's
    assert log.due(0, now=99.0) == []
    assert log.due(0, now=300.0) == [(BOB, old.key), (ALICE, new.key)]
    assert log.due(0, now=300.0, limit=1) == [(BOB, old.key)]
    log.schedule(0, ALICE, new, due=400.0)  # again: the new time stands
    assert log.due(0, now=300.0) == [(BOB, old.key)]
    log.unschedule(0, BOB, old.key)
    log.unschedule(0, BOB, old.key)  # again: nothing
    assert log.due(0, now=1e12) == [(ALICE, new.key)]
    assert log.due(1, now=1e12) == [(ALICE, old.key)]
    log.add(ALICE, old)
    kept = log.recent(ALICE)[0]
    assert kept.forgotten == {"m1": 0.9} and kept.purged_at is None
    assert kept.forget_id == old.forget_id and kept.forget_id.isalnum()

# -- the double's own rules -------------------------------------------------------------------

def test_the_double_expires_archived_sessions_by_its_clock() -> None:
    clock = FakeClock()
    double = FakeRedis(clock=clock)
    double.sessions.append_turns(S1, [{"n": 1}], ["t1"])
    double.sessions.put_snapshot(S1, {}, "0")
    double.followups.proposed(ALICE, S1, ["trip"], 5.0, 60)
    double.index.archive(S1, 600)
    clock.now += 599
    assert double.sessions.has_turn_id_set(S1) and double.followups.state(ALICE, S1)[2] == 0
    clock.now += 2
    assert (double.sessions.read(S1), double.sessions.snapshot(S1)) == ([], None)
    assert not double.sessions.has_turn_id_set(S1)
    assert double.index.archived_before(clock.now) == [S1]  # the index outlives the keys


def test_the_double_has_no_file_to_rewrite() -> None:
    aof = FakeRedis().aof
    assert (aof.rewrite(), aof.rewrite_pending()) == ("off", False)


def test_the_double_claims_by_idle_time_on_its_clock() -> None:
    clock = FakeClock()
    queues = FakeRedis(clock=clock).queues
    queues.ensure_group(QUEUE_LOW, "g")
    queues.enqueue(QUEUE_LOW, {"job": 1})
    queues.consume(QUEUE_LOW, "g", "dead")
    clock.now += 59.9
    assert queues.claim_stale(QUEUE_LOW, "g", "w", min_idle_ms=60_000) == []
    clock.now += 0.2
    assert [m.deliveries for m in queues.claim_stale(QUEUE_LOW, "g", "w", 60_000)] == [2]


# -- Redis itself (real server only: key layout on the wire, TTLs, AOF, SIGKILL) ---------------

def test_the_key_layout_is_what_existing_data_is_stored_under(redis_store: RedisStore) -> None:
    redis_store.sessions.append_turns(S1, [{"n": 1}], ["t1"])
    redis_store.sessions.put_snapshot(S1, {"x": 1}, "0-1")
    redis_store.index.touch(3, S1, 1.0)
    redis_store.index.archive(S1, 60)
    jobs = [redis_store.queues.enqueue(QUEUE_LOW, {"job": 1}),
            redis_store.queues.enqueue(QUEUE_HIGH, {"job": 2})]
    redis_store.audit.append(ALICE, action="delete")
    redis_store.recalls.add(ALICE, ["m1"], "personal")
    redis_store.users.register(ALICE)
    redis_store.followups.proposed(ALICE, S1, ["trip"], 5.0, 60)
    redis_store.followups.outcome(ALICE, "trip", "plan", "used", 9.0)
    redis_store.forgets.add(ALICE, ForgetRequest(turn_id="t1", at=datetime.now(timezone.utc),
                                                 target="the trip"))
    redis_store.forgets.add_deleted_turns(ALICE, "s1", ["s1:1"])
    prefix = redis_store.connection.prefix
    assert {k[len(prefix):] for k in redis_store.keys("*")} == {
        "wal:acme:alice:s1", "turns:acme:alice:s1", "wm:acme:alice:s1", "active:3",
        "archived", "q:ltm:low", "q:ltm:high", "audit:acme:alice", "recall-log", "users",
        "fu:acme:alice:quiet", "fu:acme:alice:outcomes", "fu:acme:alice:s1:count",
        "forgets:acme:alice", "deleted:acme:alice", *(f"job:{j}" for j in jobs)}
    for key in ("forgets:acme:alice", "deleted:acme:alice"):
        ttl = redis_store.connection.client.ttl(redis_store.connection.key(key))
        assert FORGET_LOG_TTL_S - 60 < ttl <= FORGET_LOG_TTL_S


def test_archive_sets_a_ttl_on_the_session_keys(redis_store: RedisStore) -> None:
    redis_store.sessions.append_turns(S1, [{"n": 1}], ["t1"])
    redis_store.sessions.put_snapshot(S1, {}, "0")
    redis_store.index.archive(S1, 600, at=100.0)
    client, key = redis_store.connection.client, redis_store.connection.key
    assert all(0 < client.ttl(key(f"{kind}:acme:alice:s1")) <= 600
               for kind in ("wal", "wm", "turns"))


def test_removed_turns_leave_the_stream_s_bytes_and_the_rest_keeps_its_ids(
        redis_store: RedisStore) -> None:
    log = redis_store.sessions
    ids = log.append_turns(S1, [{"op": "turn", "turn": {"turn_id": t, "content": w}}
                                for t, w in (("a", "kept words"), ("b", "quokka-7781"),
                                             ("c", "more kept words"))])
    redis_store.index.archive(S1, 600, at=100.0)  # an archived session's WAL has a TTL
    client, key = redis_store.connection.client, redis_store.connection.key(f"wal:{S1.key}")
    assert b"quokka-7781" in client.dump(key)
    assert log.remove_turns(S1, {"b"}) == 1
    assert b"quokka-7781" not in client.dump(key)  # XDEL would leave them in the listpack
    assert [rid for rid, _ in log.read(S1)] == [ids[0], ids[2]]
    assert 0 < client.ttl(key) <= 600
    assert log.append(S1, {"op": "close"}) > ids[2]  # ids never go back
    assert log.remove_turns(S1, {"a", "c"}) == 2 and len(log.read(S1)) == 1


def test_aof_rewrite(redis_store: RedisStore) -> None:
    aof = redis_store.aof
    assert aof.rewrite() in ("started", "scheduled", "in_progress")  # the test server has AOF
    # the shared test server also rewrites for other tests' purges: wait for quiet, bounded
    deadline = time.monotonic() + 120
    while aof.rewrite_pending() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not aof.rewrite_pending()



@pytest.mark.redis  # a redis-server of its own, killed
def test_acknowledged_writes_survive_a_killed_redis(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = EmbeddedRedis(tmp_path / "r").start()
    store = RedisStore(server.url)
    acked = [store.sessions.append(S1, {"n": i}) for i in range(50)]
    server.kill()  # SIGKILL: no shutdown save, AOF is all there is
    store.close()
    with pytest.raises(QueueStoreError):
        RedisStore(server.url).ping()
    restarted = EmbeddedRedis(tmp_path / "r", port=server.port).start()
    try:
        again = RedisStore(restarted.url)
        assert [rid for rid, _ in again.sessions.read(S1)] == acked
        again.close()
    finally:
        restarted.stop()


def test_missing_binary_is_a_clear_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(QueueStoreError, match="redis-server not found"):
        EmbeddedRedis(tmp_path, binary=str(tmp_path / "nope")).start()


def test_a_free_port_is_outside_the_range_of_outgoing_connections() -> None:
    """Port 0's ports can be taken by any process's next connection before a server binds
    them (a UI test's Serve proxy failed so under a busy Ray): free_port avoids that range,
    and Ray's worker ports (10002–19999)."""
    low, _ = (int(p) for p in
                 Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    for _ in range(20):
        port = free_port()
        assert 0 < port < 65536
        if low > 21_000:  # and not one of Ray's worker ports, which `ray start` refuses
            assert 20_000 <= port < low
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))  # free
