"""Proactive recall (strata.layers.proactive): which open threads to bring up, and when not."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from strata.errors import NotFound
from strata.layers.memories import LongTermMemory
from strata.layers.memory_models import MemoryCreate
from strata.layers.proactive import FollowUp, FollowUpPolicy, choose, from_plans, from_task_states
from strata.layers.summarize import RuleSummarizer
from strata.models import MemoryKind, Scope, StoredRecord
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.redis import RedisStore
from strata.testing.fake_vectors import FakeVectorStore

NOW = datetime(2026, 12, 1, 12, tzinfo=timezone.utc)
POLICY = FollowUpPolicy()
U = Scope(tenant="acme", user="ada")


def plan(rid: str, age: timedelta) -> StoredRecord:
    return StoredRecord(id=rid, text=f"I am going to {rid} next week", status="active",
                        created_at=(NOW - age).timestamp(),
                        payload={"provenance": {"session_id": "s1", "turn_ids": ["t1"]}})


def test_a_plan_is_followed_up_once_its_time_has_come_and_not_after_a_month() -> None:
    found = from_plans([plan("fresh", timedelta(hours=1)), plan("due", timedelta(days=3)),
                        plan("older", timedelta(days=9)), plan("stale", timedelta(days=40))],
                       NOW, POLICY)
    assert [f.topic for f in found] == ["older", "due"]  # oldest first
    assert "going to due" in found[1].text and "3 days ago" in found[1].reason
    assert found[1].provenance.turn_ids == ["t1"]


def test_what_a_closed_session_left_open_is_followed_up() -> None:
    found = from_task_states([
        ("s1", {"goal": "pick a laptop", "open_questions": ["budget?", "screen size?"]},
         NOW - timedelta(days=1)),
        ("s2", {"next_steps": "send the quote"}, NOW - timedelta(days=2)),
        ("s3", {"goal": "done"}, NOW)], NOW, POLICY)
    assert [f.text for f in found] == ["Last session left this open: send the quote",
                                       "Last session left this open: budget?",
                                       "Last session left this open: screen size?"]
    assert len({f.topic for f in found}) == 3 and found[0].provenance.session_id == "s2"
    again = from_task_states([("s1", {"open_questions": ["budget?"]}, NOW)], NOW, POLICY)
    assert again[0].topic == found[1].topic  # the same thread keeps its topic


def item(topic: str, kind: str = "plan") -> FollowUp:
    return FollowUp(topic=topic, kind=kind, text=topic, reason="r", since=NOW)  # type: ignore[arg-type]


def test_choose_skips_quiet_topics_keeps_the_caps_and_prefers_what_was_used() -> None:
    cands = [item("p1"), item("p2"), item("t1", "open_task")]
    quiet = {"p1": (NOW + timedelta(days=1)).timestamp(), "p2": (NOW - timedelta(1)).timestamp()}
    assert [f.topic for f in choose(cands, quiet, NOW, 5, 5, {})] == ["p2", "t1"]
    assert [f.topic for f in choose(cands, {}, NOW, 5, 1, {})] == ["p1"]  # the session's share
    assert choose(cands, {}, NOW, 5, 0, {}) == []
    liked = {"plan": (0, 3), "open_task": (2, 0)}  # plans dismissed, open tasks used
    assert [f.topic for f in choose(cands, {}, NOW, 2, 5, liked)] == ["t1", "p1"]


@pytest.fixture
def shard(redis_store: RedisStore) -> SessionShardService:
    vectors = FakeVectorStore()
    vectors.ensure_collections(64)
    lt = LongTermMemory(vectors, HashEmbedder(64))
    settings = Settings(followup_min_age_s=0, followups_per_session=2)
    return SessionShardService(0, settings, redis_store, RuleSummarizer(), longterm=lambda: lt)


def test_the_shard_proposes_rations_and_learns_from_feedback(shard: SessionShardService) -> None:
    shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, metadata={"type": "plan"},
                                        text="I'm going to visit Kyoto next week"))
    shard.append_turn(U, "s1", "user", "Help me choose a laptop")
    shard.patch_task_state(U, "s1", {"open_questions": ["what budget?"]})
    shard.close(U, "s1")

    first = shard.follow_ups(U, "s2", limit=5)
    assert sorted(f.kind for f in first) == ["open_task", "plan"]
    assert shard.follow_ups(U, "s2", limit=5) == []  # the session had its two
    assert shard.follow_ups(U, "s3", limit=5) == []  # proposed once: quiet for a week
    kyoto = next(f for f in first if f.kind == "plan")
    shard.follow_up_feedback(U, kyoto.topic, "dismissed")
    with pytest.raises(NotFound):
        shard.follow_up_feedback(U, "never-proposed", "used")
    shard.delete_user(U)
    assert shard._redis.followups.state(U, None) == ({}, {}, 0)  # forgotten with the user
