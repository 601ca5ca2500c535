"""Batch appends: many turns of one session, all or none, each idempotent by turn_id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from strata.client import Client
from strata.errors import Conflict, InvalidInput, NotFound
from strata.eval.locomo import evaluate, turn_rank
from strata.layers.memories import LongTermMemory
from strata.layers.summarize import RuleSummarizer
from strata.models import Scope
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.keys import QUEUE_HIGH, SessionRef
from strata.stores.redis import RedisStore
from strata.testing.fake_vectors import FakeVectorStore

ALICE = Scope(tenant="acme", user="alice")
KEY = SessionRef(ALICE, "s")


def shard(redis_store: RedisStore, **overrides: Any) -> SessionShardService:
    return SessionShardService(0, Settings(**{"window_turns": 8, **overrides}), redis_store,
                               RuleSummarizer())


def turns(n: int, start: int = 1, ids: bool = False) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 else "assistant", "content": f"turn {i}: fine",
             **({"turn_id": f"c-{i}"} if ids else {})} for i in range(start, start + n)]


def wal_turn_ids(redis_store: RedisStore) -> list[str]:
    return [r["turn"]["turn_id"] for _, r in redis_store.sessions.read(KEY) if r["op"] == "turn"]


def test_batch_keeps_order_and_numbers_turns_like_single_appends(
        redis_store: RedisStore) -> None:
    svc = shard(redis_store)
    svc.append_turn(ALICE, "s", "user", "turn 0: before the batch")
    acks = svc.append_turns(ALICE, "s", turns(12))
    assert [a.turn_id for a in acks] == [f"s:{i}" for i in range(2, 14)]
    assert [a.turn_count for a in acks] == list(range(2, 14))
    assert svc.append_turn(ALICE, "s", "user", "after").turn_id == "s:14"
    view = svc.view(ALICE, "s")
    assert [t.content.split(":")[0] for t in view.window] == (
        [f"turn {i}" for i in range(6, 13)] + ["after"])
    assert wal_turn_ids(redis_store) == [f"s:{i}" for i in range(1, 15)]


def test_batch_fields_dates_and_metadata_are_kept(redis_store: RedisStore) -> None:
    svc = shard(redis_store)
    svc.append_turns(ALICE, "s", [{"role": "user", "content": "Ann: hi there",
                                   "created_at": "2023-05-08T13:56:00+00:00",
                                   "metadata": {"speaker": "Ann"}, "turn_id": "d1"}])
    turn = svc.view(ALICE, "s").window[0]
    assert (turn.turn_id, turn.metadata, turn.created_at.isoformat()) == (
        "d1", {"speaker": "Ann"}, "2023-05-08T13:56:00+00:00")


def test_retried_batch_is_all_duplicate_and_written_once(redis_store: RedisStore) -> None:
    svc = shard(redis_store)
    batch = turns(5, ids=True)
    first = svc.append_turns(ALICE, "s", batch)
    again = svc.append_turns(ALICE, "s", batch)
    assert not any(a.duplicate for a in first)
    assert all(a.duplicate for a in again)
    assert [a.turn_id for a in again] == [a.turn_id for a in first]
    assert wal_turn_ids(redis_store) == [f"c-{i}" for i in range(1, 6)]
    assert svc.view(ALICE, "s").turn_count == 5


def test_retry_of_a_batch_longer_than_the_remembered_ids(redis_store: RedisStore) -> None:
    svc = shard(redis_store)
    batch = turns(150, ids=True)  # the window remembers 64 ids; the WAL tail covers the rest
    svc.append_turns(ALICE, "s", batch)
    assert all(a.duplicate for a in svc.append_turns(ALICE, "s", batch))
    assert len(wal_turn_ids(redis_store)) == 150


def test_a_turn_id_repeated_inside_the_batch_is_written_once(redis_store: RedisStore) -> None:
    svc = shard(redis_store)
    acks = svc.append_turns(ALICE, "s", [{"role": "user", "content": "hello", "turn_id": "x"},
                                         {"role": "user", "content": "hello", "turn_id": "x"},
                                         {"role": "user", "content": "next"}])
    assert [(a.turn_id, a.duplicate) for a in acks] == [("x", False), ("x", True),
                                                        ("s:2", False)]
    assert wal_turn_ids(redis_store) == ["x", "s:2"]


@pytest.mark.parametrize(("bad", "says"), [
    ({"role": "user", "content": "   "}, "turn 2: content is empty"),
    ({"role": "robot", "content": "x"}, "turn 2: role must be"),
    ({"role": "user", "content": "x", "surprise": 1}, "turn 2: surprise"),
    ({"role": "user"}, "turn 2: content"),
    ({"role": "user", "content": "x" * 1001}, "turn 2: content and metadata are 1001 bytes"),
])
def test_one_bad_turn_rejects_the_whole_batch(redis_store: RedisStore, bad: dict[str, Any],
                                              says: str) -> None:
    svc = shard(redis_store, max_turn_bytes=1000)
    with pytest.raises(InvalidInput, match=says):
        svc.append_turns(ALICE, "s", [*turns(2), bad, *turns(2, start=3)])
    assert redis_store.sessions.read(KEY) == []
    with pytest.raises(NotFound):
        svc.view(ALICE, "s")


def test_batch_size_is_bounded(redis_store: RedisStore) -> None:
    svc = shard(redis_store, max_batch_turns=3)
    for batch in (turns(4), []):
        with pytest.raises(InvalidInput, match="STRATA_MAX_BATCH_TURNS"):
            svc.append_turns(ALICE, "s", batch)
    assert len(svc.append_turns(ALICE, "s", turns(3))) == 3


def test_closed_session_takes_only_duplicates(redis_store: RedisStore) -> None:
    svc = shard(redis_store)
    svc.append_turns(ALICE, "s", turns(2, ids=True))
    svc.close(ALICE, "s")
    assert all(a.duplicate for a in svc.append_turns(ALICE, "s", turns(2, ids=True)))
    with pytest.raises(Conflict):
        svc.append_turns(ALICE, "s", turns(3, ids=True))
    assert wal_turn_ids(redis_store) == ["c-1", "c-2"]


def test_batch_snapshots_and_restart_rebuilds_it(redis_store: RedisStore) -> None:
    svc = shard(redis_store, snapshot_every_turns=3)
    svc.append_turns(ALICE, "s", turns(5))
    svc.flush_snapshots()
    snap = redis_store.sessions.snapshot(KEY)
    assert snap is not None and snap[0]["turn_count"] == 5
    assert shard(redis_store).view(ALICE, "s").model_dump() == (
        svc.view(ALICE, "s").model_dump())


def test_explicit_intents_apply_per_user_turn(redis_store: RedisStore) -> None:
    vectors = FakeVectorStore()
    vectors.ensure_collections(64)
    lt = LongTermMemory(vectors, HashEmbedder(64))
    svc = SessionShardService(0, Settings(), redis_store, RuleSummarizer(),
                              longterm=lambda: lt)
    scope = Scope(tenant="t", user="u")
    acks = svc.append_turns(scope, "s1", [
        {"role": "assistant", "content": "Remember that I'm allergic to peanuts."},
        {"role": "user", "content": "Remember that I'm allergic to peanuts."},
        {"role": "user", "content": "what a nice day"}])
    assert [bool(a.intents.remembered) for a in acks] == [False, True, False]
    fact = lt.facts.current(scope, "constraint.allergy:peanuts")
    assert fact is not None and fact.provenance.turn_ids == [acks[1].turn_id]
    assert redis_store.queues.depth(QUEUE_HIGH, "extractors").backlog == 0



def test_locomo_eval_sends_one_batch_per_session_and_maps_the_service_ids(tmp_path: Path) -> None:
    sent: list[tuple[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        sent.append((request.url.path, body))
        if request.url.path == "/metrics":
            return httpx.Response(200, text='strata_queue_backlog{queue="low"} 0\n')
        if request.url.path == "/v1/recall":  # the evidence turn, by the id the service gave
            return httpx.Response(200, json={"context": "c", "items": [
                {"provenance": {"turn_ids": ["s1:2"]}}]})
        if request.url.path.endswith("/batch"):  # the ids the service gives a new session
            session = request.url.path.split("/")[3]
            return httpx.Response(200, json={"acks": [{"turn_id": f"{session}:{i}"}
                                                      for i in range(1, len(body["turns"]) + 1)]})
        return httpx.Response(200, json={"closed": True})

    (tmp_path / "conv-a.json").write_text(json.dumps({
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ann", "text": "hi", "dia_id": "D1:1"},
                      {"speaker": "Bob", "text": "hello", "dia_id": "D1:2"}],
        "session_2_date_time": "2:00 pm on 9 May, 2023",
        "session_2": [{"speaker": "Bob", "text": "again", "dia_id": "D2:1"}],
        "qa": [{"question": "who said hello?", "evidence": ["D1:2"], "category": 4}]}))
    client = Client("http://x", api_key="k", transport=httpx.MockTransport(handler))
    report = evaluate(client, tmp_path, ks=(5,))
    assert (report.turns, report.overall.recall_at) == (3, {"5": 1.0})
    writes = [(path, body) for path, body in sent if path.startswith("/v1/sessions/")]
    assert [path for path, _ in writes] == [
        "/v1/sessions/s1/turns/batch", "/v1/sessions/s1/close",
        "/v1/sessions/s2/turns/batch", "/v1/sessions/s2/close"]
    assert writes[0][1]["turns"] == [
        {"role": "user", "content": "Ann: hi",
         "created_at": "2023-05-08T13:56:00+00:00", "metadata": {"speaker": "Ann"}},
        {"role": "user", "content": "Bob: hello",
         "created_at": "2023-05-08T13:56:30+00:00", "metadata": {"speaker": "Bob"}}]
    reused = evaluate(client, tmp_path, ks=(5,), reuse_tag="x")  # ids known without writing
    assert reused.overall.recall_at == {"5": 1.0}


def test_the_turn_rank_counts_every_turn_shown_before_the_evidence() -> None:
    to_dia = {f"s1:{i}": f"D1:{i}" for i in range(1, 9)}

    def item(*turns: str) -> dict[str, object]:
        return {"provenance": {"turn_ids": list(turns)}}

    items = [item("s1:1", "s1:2"), item("s1:3", "s1:4", "s1:6"), item("s1:5"), item()]
    assert turn_rank(items, to_dia, {"D1:2"}) == 2     # the second turn of a merged pair
    assert turn_rank(items, to_dia, {"D1:5"}) == 4     # after a pair and a summary line
    assert turn_rank(items, to_dia, {"D1:6"}) is None  # named only by a 3-turn item
    assert turn_rank(items, to_dia, {"D1:8"}) is None
