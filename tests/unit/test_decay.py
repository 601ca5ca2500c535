"""Decay sweep: cold below the threshold, archive rule, idempotence, dry run; the
whole-store plan/apply sweep on both stores; purging archived working memory."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from strata.layers.decay import (
    DecayPolicy,
    StatusChange,
    apply_changes,
    group_changes,
    plan_sweep,
    sweep_scope,
)
from strata.layers.memories import LongTermMemory
from strata.layers.memory_models import MemoryCreate
from strata.layers.summarize import RuleSummarizer
from strata.models import Collection, MemoryKind, Scope, utcnow
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.keys import SessionRef
from strata.stores.milvus import MilvusVectorStore
from strata.stores.ports import DecayScan, StatusWriter, VectorStore
from strata.stores.redis import RedisStore
from strata.testing.fake_vectors import FakeVectorStore

U = Scope(tenant="t", user="u")


def test_sweep_marks_cold_archives_and_is_idempotent() -> None:
    store = FakeVectorStore()
    store.ensure_collections(64)
    lt = LongTermMemory(store, HashEmbedder(64))
    old_episode, _ = lt.create(U, MemoryCreate(kind=MemoryKind.EPISODE, text="asked about lag",
                                               confidence=0.9))
    stale_fact, _ = lt.create(U, MemoryCreate(kind=MemoryKind.FACT, key="k", value="v",
                                              confidence=0.5))
    fresh, _ = lt.create(U, MemoryCreate(kind=MemoryKind.FACT, key="f", value="fresh",
                                         confidence=0.9))
    now = utcnow()
    for item_id, days, coll in [(old_episode.id, 30, Collection.EPISODES),
                                (stale_fact.id, 120, Collection.FACTS)]:
        rec = store._data[coll][U.key][item_id]
        rec.updated_at = (now - timedelta(days=days)).timestamp()
    dry = sweep_scope(store, U, DecayPolicy(), now, dry_run=True)
    assert (dry.cold, dry.archived) == (1, 1)
    assert store.get(Collection.EPISODES, U, [old_episode.id])[0].status == "active"
    done = sweep_scope(store, U, DecayPolicy(), now)
    assert (done.scanned, done.cold, done.archived) == (3, 1, 1)
    assert store.get(Collection.EPISODES, U, [old_episode.id])[0].status == "cold"
    assert store.get(Collection.FACTS, U, [stale_fact.id])[0].status == "archived"
    assert store.get(Collection.FACTS, U, [fresh.id])[0].status == "active"
    again = sweep_scope(store, U, DecayPolicy(), now)
    assert (again.cold, again.archived, again.rewarmed) == (0, 0, 0)


# -- the whole-store sweep: plan in one pass, apply through the shard ---------------------------

def _aged(store: VectorStore, scope: Scope, days_by_text: dict[str, tuple[float, float]]
          ) -> dict[str, str]:
    """Facts and episodes aged by (days since update, confidence); returns text → id."""
    lt = LongTermMemory(store, HashEmbedder(64))
    now = utcnow().timestamp()
    ids = {}
    for text, (days, conf) in days_by_text.items():
        kind = MemoryKind.EPISODE if text.startswith("ep") else MemoryKind.FACT
        body = (MemoryCreate(kind=kind, text=text, confidence=conf) if kind is MemoryKind.EPISODE
                else MemoryCreate(kind=kind, key=text, value=text, confidence=conf))
        item, _ = lt.create(scope, body)
        coll = Collection.EPISODES if kind is MemoryKind.EPISODE else Collection.FACTS
        row = store.get(coll, scope, [item.id])[0]
        store.upsert(coll, scope, [row.model_copy(update={"updated_at": now - days * 86400})])
        ids[text] = item.id
    return ids


@pytest.fixture(params=["memory", "milvus-lite"])
def sweep_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    store: VectorStore
    if request.param == "memory":
        store = FakeVectorStore()
    else:
        store = MilvusVectorStore(str(tmp_path / "m.db"), prefix="d_")
    store.ensure_collections(64)
    yield store
    store.close()


def test_plan_then_apply_changes_only_what_decayed(sweep_store: VectorStore) -> None:
    a, b = Scope(tenant="t", user="a"), Scope(tenant="t", user="b")
    ids_a = _aged(sweep_store, a, {"ep lag": (30, 0.9), "stale": (120, 0.5), "fresh": (1, 0.9)})
    ids_b = _aged(sweep_store, b, {"ep new": (0, 0.9), "old but sure": (120, 0.9)})
    sweep_store.flush()
    assert isinstance(sweep_store, DecayScan)
    now = utcnow().timestamp()
    plan = plan_sweep(sweep_store, DecayPolicy(), now)
    assert plan.users == {a.key, b.key}
    assert (plan.counts.scanned, plan.counts.cold, plan.counts.archived) == (5, 2, 1)
    assert {(c.scope, c.id, c.status) for c in plan.changes} == {
        (a.key, ids_a["ep lag"], "cold"), (a.key, ids_a["stale"], "archived"),
        (b.key, ids_b["old but sure"], "cold")}
    before = sweep_store.get(Collection.EPISODES, a, [ids_a["ep lag"]])[0]
    assert isinstance(sweep_store, StatusWriter)
    done = apply_changes(sweep_store, plan.changes, DecayPolicy(), now)
    assert (done.cold, done.archived, done.skipped) == (2, 1, 0)
    sweep_store.flush()
    after = sweep_store.get(Collection.EPISODES, a, [ids_a["ep lag"]])[0]
    # a partial update: only the status moved; text, vector and payload are as stored
    assert after.status == "cold"
    assert after.model_copy(update={"status": "active"}) == before
    assert sweep_store.get(Collection.FACTS, a, [ids_a["stale"]])[0].status == "archived"
    assert sweep_store.get(Collection.FACTS, a, [ids_a["fresh"]])[0].status == "active"
    again = plan_sweep(sweep_store, DecayPolicy(), now)
    assert again.changes == [] and again.counts.scanned == 4  # archived rows are not swept


def test_apply_re_decides_rows_touched_since_the_plan() -> None:
    store = FakeVectorStore()
    store.ensure_collections(64)
    ids = _aged(store, U, {"ep lag": (30, 0.9), "ep old": (40, 0.9)})
    now = utcnow().timestamp()
    plan = plan_sweep(store, DecayPolicy(), now)
    assert len(plan.changes) == 2
    LongTermMemory(store, HashEmbedder(64)).reinforce(U, [ids["ep lag"]])  # recalled meanwhile
    done = apply_changes(store, plan.changes, DecayPolicy(), now)
    assert (done.cold, done.skipped) == (1, 1)
    assert store.get(Collection.EPISODES, U, [ids["ep lag"]])[0].status == "active"
    assert store.get(Collection.EPISODES, U, [ids["ep old"]])[0].status == "cold"


def test_cold_memory_recalled_again_is_rewarmed() -> None:
    store = FakeVectorStore()
    store.ensure_collections(64)
    ids = _aged(store, U, {"ep lag": (30, 0.9)})
    now = utcnow().timestamp()
    apply_changes(store, plan_sweep(store, DecayPolicy(), now).changes, DecayPolicy(), now)
    LongTermMemory(store, HashEmbedder(64)).reinforce(U, [ids["ep lag"]])
    plan = plan_sweep(store, DecayPolicy(), utcnow().timestamp())
    assert plan.counts.rewarmed == 1
    apply_changes(store, plan.changes, DecayPolicy(), utcnow().timestamp())
    assert store.get(Collection.EPISODES, U, [ids["ep lag"]])[0].status == "active"


def test_changes_are_batched_without_splitting_a_user() -> None:
    changes = [StatusChange(Collection.FACTS, f"t:u{u}", f"m{i}", "cold")
               for u in range(3) for i in range(4)]
    batches = group_changes(changes, 5)
    assert [len(b) for b in batches] == [8, 4]
    assert not {c.scope for c in batches[0]} & {c.scope for c in batches[1]}
    assert {c.scope for c in batches[1]} == {"t:u2"}


# -- purging archived working memory past retention (real Redis) --------------------------------

def _shard(redis_store: RedisStore, store: FakeVectorStore | None = None
           ) -> SessionShardService:
    vectors = store or FakeVectorStore()
    vectors.ensure_collections(64)
    lt = LongTermMemory(vectors, HashEmbedder(64))
    return SessionShardService(0, Settings(), redis_store, RuleSummarizer(), longterm=lambda: lt)


def test_purge_deletes_archived_sessions_past_retention(redis_store: RedisStore) -> None:
    shard = _shard(redis_store)
    for sid in ("old", "recent", "live"):
        shard.append_turn(U, sid, "user", f"hello from {sid}")
    shard.close(U, "old")
    shard.close(U, "recent")
    retention = Settings().archive_retention_days * 86400
    now = time.time()
    # "old" was archived past retention; its TTL was lost (e.g. the key was rewritten)
    redis_store.index.archive(SessionRef(U, "old"), retention, at=now - retention - 60)
    redis_store.connection.client.persist(redis_store.connection.key(f"wm:{U.key}:old"))
    due = redis_store.index.archived_before(now - retention)
    assert due == [SessionRef(U, "old")]
    counts = shard.purge_archived_sessions(due, now)
    assert (counts.sessions_purged, counts.sessions_expired) == (1, 0)
    assert redis_store.keys(f"*:{U.key}:old") == []
    assert redis_store.sessions.snapshot(SessionRef(U, "recent")) is not None
    assert shard.view(U, "live").turn_count == 1
    assert redis_store.index.archived_before(now - retention) == []  # idempotent: nothing left
    assert redis_store.index.archived_before(now) == [SessionRef(U, "recent")]


def test_purge_leaves_a_live_session_that_reuses_an_expired_id(redis_store: RedisStore) -> None:
    shard = _shard(redis_store)
    shard.append_turn(U, "s", "user", "first life")
    shard.close(U, "s")
    redis_store.sessions.delete(SessionRef(U, "s"))  # the TTL dropped it
    shard.append_turn(U, "s", "user", "second life")  # the same id, a new session
    shard.flush_snapshots()
    counts = shard.purge_archived_sessions([SessionRef(U, "s")], time.time())
    assert (counts.sessions_purged, counts.sessions_expired) == (0, 1)
    assert shard.view(U, "s").turn_count == 1
    assert redis_store.index.archived_before(time.time()) == []


def test_forgetting_a_user_drops_their_archive_entries(redis_store: RedisStore) -> None:
    shard = _shard(redis_store)
    shard.append_turn(U, "s", "user", "hello")
    shard.close(U, "s")
    assert redis_store.index.archived_before(time.time()) == [SessionRef(U, "s")]
    shard.delete_user(U)
    assert redis_store.index.archived_before(time.time()) == []
