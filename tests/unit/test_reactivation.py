"""A cold memory the user mentions again is current again (issue #36): after the session's
extraction it is active, with the mention as its last access, in English and Chinese; what
the turns do not mention stays cold, and so does a forgotten memory or one the agent spoken
to may not see. The sentences are this file's own, in no corpus."""

from __future__ import annotations

from datetime import timedelta

import pytest

from strata.extract.rules import RuleExtractor
from strata.extract.worker import ExtractionWorker
from strata.layers.decay import DecayPolicy, sweep_scope
from strata.layers.memory_models import MemoryCreate
from strata.layers.reactivation import Said, mentions, reactivate
from strata.models import Collection, MemoryKind, MemoryStatus, Scope, utcnow
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.redis import RedisStore
from strata.testing.fake_vectors import FakeVectorStore

U = Scope(tenant="t", user="u")


@pytest.mark.parametrize(("turn", "memory", "value"), [
    ("Can you move my cleaning with Dr. Patel to Friday?", "My dentist is Dr. Patel.",
     "Dr. Patel"),
    ("The washing machine leaked all over the kitchen floor again!",
     "The washing machine leaked all over the kitchen floor.", None),
    ("我的大提琴老师Ines下个月要搬走了", "我在学大提琴，老师叫Ines。", "Ines"),
])
def test_a_turn_that_speaks_of_the_memory_mentions_it(turn: str, memory: str,
                                                     value: str | None) -> None:
    assert mentions(turn, memory, value, dense=0.0)


@pytest.mark.parametrize(("turn", "memory"), [
    ("We're going to Osaka in May.", "We're planning a trip to Tokyo in spring."),
    ("My brother just bought a car.", "My car is a blue Honda Civic."),
    ("今天的汤胡椒放多了", "我的狗叫小黑。"),
])
def test_a_turn_about_another_thing_does_not(turn: str, memory: str) -> None:
    assert not mentions(turn, memory, None, dense=0.0)


def _cold(store: FakeVectorStore, collection: Collection, item_id: str, days: int) -> None:
    store._data[collection][U.key][item_id].updated_at = (
        utcnow() - timedelta(days=days)).timestamp()


def test_the_mentioned_cold_memory_is_active_again_and_the_others_stay_cold(
        shard: SessionShardService, vectors: FakeVectorStore, redis_store: RedisStore) -> None:
    lt = shard.longterm
    cello, _ = lt.create(U, MemoryCreate(kind=MemoryKind.EPISODE, confidence=0.9,
                                         text="Started cello lessons with my teacher Ines"))
    hike, _ = lt.create(U, MemoryCreate(kind=MemoryKind.EPISODE, confidence=0.9,
                                        text="Got lost hiking near Lake Tahoe with Sam"))
    dentist, _ = lt.create(U, MemoryCreate(kind=MemoryKind.FACT, key="health.dentist",
                                           value="Dr. Patel", confidence=0.9))
    for item_id, coll, days in ((cello.id, Collection.EPISODES, 40),
                                (hike.id, Collection.EPISODES, 40),
                                (dentist.id, Collection.FACTS, 200)):
        _cold(vectors, coll, item_id, days)
    assert sweep_scope(vectors, U, DecayPolicy(), utcnow()).cold == 3
    for role, text in (("user", "My teacher Ines started the cello lessons again."),
                       ("assistant", "That's great to hear!"),
                       ("user", "Also I need to book a cleaning with Dr. Patel soon.")):
        shard.append_turn(U, "s1", role, text)
    shard.close(U, "s1")
    ExtractionWorker(redis_store.queues, redis_store.sessions, RuleExtractor(),
                     shard.write_longterm, "w").run_once()
    status = {r.id: r for coll in (Collection.EPISODES, Collection.FACTS)
              for r in vectors.get(coll, U, [cello.id, hike.id, dentist.id])}
    assert status[cello.id].status is MemoryStatus.ACTIVE
    assert status[dentist.id].status is MemoryStatus.ACTIVE
    assert status[hike.id].status is MemoryStatus.COLD
    # the mention is the last access: the next sweep does not put it back
    assert status[cello.id].payload["access_count"] == 1
    assert sweep_scope(vectors, U, DecayPolicy(), utcnow()).cold == 0


def test_a_forgotten_or_unseen_cold_memory_is_not_woken() -> None:
    store = FakeVectorStore()
    store.ensure_collections(64)
    from strata.layers.memories import LongTermMemory

    lt = LongTermMemory(store, HashEmbedder(64))
    hidden, _ = lt.create(U, MemoryCreate(kind=MemoryKind.EPISODE, confidence=0.9,
                                          text="The washing machine leaked on the floor"))
    private, _ = lt.create(U, MemoryCreate(kind=MemoryKind.EPISODE, confidence=0.9,
                                           text="Booked the Kyoto ryokan for April",
                                           agent="travel", visibility="private"))
    for item_id in (hidden.id, private.id):
        _cold(store, Collection.EPISODES, item_id, 40)
    sweep_scope(store, U, DecayPolicy(), utcnow())
    row = store._data[Collection.EPISODES][U.key][hidden.id]
    row.payload = {**row.payload, "weight": 0.0}  # hidden by a forget
    said = [Said("the washing machine leaked on the floor again", "support"),
            Said("is the Kyoto ryokan still booked for April?", "support")]
    assert reactivate(store, HashEmbedder(64), U, said, utcnow()) == 0
    assert reactivate(store, HashEmbedder(64), U, [Said(said[1].text, "travel")],
                      utcnow()) == 1


class _Counting(HashEmbedder):
    calls = 0

    def encode(self, texts):  # type: ignore[no-untyped-def]
        type(self).calls += 1
        return super().encode(texts)


def test_a_user_with_no_cold_memory_costs_no_embedding() -> None:
    store = FakeVectorStore()
    store.ensure_collections(64)
    assert reactivate(store, _Counting(64), U, [Said("anything at all")], utcnow()) == 0
    assert _Counting.calls == 0
