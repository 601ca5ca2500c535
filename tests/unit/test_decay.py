"""Decay sweep: cold below the threshold, archive rule, idempotence, dry run."""

from __future__ import annotations

from datetime import timedelta

from strata.layers.decay import DecayPolicy, sweep_scope
from strata.layers.memories import LongTermMemory, MemoryCreate
from strata.models import Collection, MemoryKind, Scope, utcnow
from strata.stores.embedders import HashEmbedder
from strata.stores.memory import InMemoryVectorStore

U = Scope(tenant="t", user="u")


def test_sweep_marks_cold_archives_and_is_idempotent() -> None:
    store = InMemoryVectorStore()
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
