"""The entity index as a recall candidate source (#38): the hot index keeps each user's
entity index current, and the ``entities`` stage adds the turns it reaches.

The shard is the real ``SessionShardService`` over the real Redis the tests start, its hot
index over the in-memory durable double, with the real gazetteer and category lexicon.
"""

from __future__ import annotations

import pytest

from strata.layers.memories import LongTermMemory
from strata.layers.memory_models import MemoryCreate
from strata.layers.summarize import RuleSummarizer
from strata.models import Collection, MemoryKind, MemoryStatus, RecallRequest, Scope
from strata.recall.late import embed_queries
from strata.recall.recipes import DEFAULT, RECIPES, RecallRecipe, with_stages, without
from strata.recall.stages import DEFAULT_STAGES, ORDER, Stage
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.hot import HotIndexStore
from strata.stores.hot_entities import ENTITY_BYTES_PER_TURN, indexable
from strata.stores.redis import RedisStore
from strata.testing.fake_vectors import FakeVectorStore

U = Scope(tenant="t", user="u")
EMB = HashEmbedder(64)
QUESTION = "What state did Nate visit?"
TAMPA = "Nate: I took my turtles to the beach in Tampa yesterday!"
# talk that shares the question's words (and so outranks the Tampa turn in the search)
FILLER = [f"Nate: did you visit the state fair {n}? what a state of things, visit again"
          for n in range(8)]
# the search keeps only the best two turns: the Tampa turn is never one of them
NARROW = {"candidates_per_layer": 2, "period_candidates": 0}
WITH = RecallRecipe(name="with", stages=with_stages(Stage.ENTITIES), **NARROW)
WITHOUT = RecallRecipe(name="without", **NARROW)


@pytest.fixture
def shard(redis_store: RedisStore) -> SessionShardService:
    durable = FakeVectorStore()
    durable.ensure_collections(64)
    hot = HotIndexStore(durable, 64, tokens=lambda: EMB)
    lt = LongTermMemory(hot, EMB)
    return SessionShardService(0, Settings(), redis_store, RuleSummarizer(), longterm=lambda: lt)


def hot(shard: SessionShardService) -> HotIndexStore:
    vectors = shard.longterm.vectors
    assert isinstance(vectors, HotIndexStore)
    return vectors


def said(shard: SessionShardService, text: str) -> str:
    made = shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text=text,
                                               metadata={"speaker": "Nate"}))
    return str(made["memory"]["id"])


def candidates(shard: SessionShardService, recipe: RecallRecipe,
               query: str = QUESTION) -> dict[str, dict[str, float]]:
    """The episodes' candidates of a recall with ``recipe``: text → its flat parts."""
    request = RecallRequest(user_id=U.user, query=query, layers=["episodes"], debug=True)
    embedded = embed_queries(EMB, [query])[0]
    answer = shard.recall_memory(U, request, lambda: embedded, recipe=recipe)
    return {c.text: c.parts for c in answer.found.candidates}


def reached(shard: SessionShardService, query: str = QUESTION) -> set[str]:
    reach = hot(shard).entity_reach(U)
    assert reach is not None
    return reach(query).ids()


def test_the_stage_adds_a_reached_turn_the_search_misses(shard: SessionShardService) -> None:
    tampa = said(shard, TAMPA)
    for text in FILLER:
        said(shard, text)
    assert tampa in reached(shard)  # Tampa is in Florida: "what state" reaches it
    assert TAMPA not in candidates(shard, WITHOUT)
    found = candidates(shard, WITH)
    assert TAMPA in found and found[TAMPA]["entity"] == WITH.entity_weight
    # a turn the search found too gets the weight only if the index reached it
    assert all("entity" not in parts for text, parts in found.items() if text != TAMPA)


def test_the_weight_lifts_the_reached_turn(shard: SessionShardService) -> None:
    said(shard, TAMPA)
    for text in FILLER:
        said(shard, text)
    low = candidates(shard, WITH.model_copy(update={"entity_weight": 0.0}))[TAMPA]
    high = candidates(shard, WITH.model_copy(update={"entity_weight": 0.5}))[TAMPA]
    assert high["similarity"] == pytest.approx(low["similarity"] + 0.5, abs=0.01)


def test_a_deleted_turn_leaves_the_entity_index_at_once(shard: SessionShardService) -> None:
    tampa = said(shard, TAMPA)
    said(shard, FILLER[0])
    assert tampa in reached(shard)
    shard.delete_memory(U, tampa)
    assert tampa not in reached(shard)
    assert TAMPA not in candidates(shard, WITH)


def test_a_forgotten_turn_is_not_reached(shard: SessionShardService) -> None:
    tampa = said(shard, TAMPA)
    said(shard, FILLER[0])
    assert tampa in reached(shard)
    forgotten = shard.longterm.forget_matching(U, "the turtles at the beach in Tampa")
    assert tampa in forgotten
    assert tampa not in reached(shard)  # weight 0: out of the index, not only filtered
    assert TAMPA not in candidates(shard, WITH)
    shard.longterm.restore(U, forgotten)  # undone: reached again
    assert tampa in reached(shard)


def test_an_archived_turn_leaves_and_a_reactivated_one_returns(
        shard: SessionShardService) -> None:
    tampa = said(shard, TAMPA)
    store = hot(shard)
    store.set_statuses(Collection.EPISODES, [(U.key, tampa, MemoryStatus.ARCHIVED)])
    assert tampa not in reached(shard)
    store.set_statuses(Collection.EPISODES, [(U.key, tampa, MemoryStatus.ACTIVE)])
    assert tampa in reached(shard)


def test_a_reloaded_user_rebuilds_the_index_and_counts_its_bytes(
        redis_store: RedisStore) -> None:
    durable = FakeVectorStore()
    durable.ensure_collections(64)
    first = HotIndexStore(durable, 64, tokens=lambda: EMB)
    shard = SessionShardService(0, Settings(), redis_store, RuleSummarizer(),
                                longterm=lambda: LongTermMemory(first, EMB))
    tampa = said(shard, TAMPA)
    restarted = HotIndexStore(durable, 64, tokens=lambda: EMB)  # loads from the durable store
    reach = restarted.entity_reach(U)
    assert reach is not None and tampa in reach(QUESTION).ids()
    without_entities = HotIndexStore(durable, 64, tokens=lambda: EMB, entities=False)
    assert without_entities.entity_reach(U) is None
    assert (restarted.stats().bytes - without_entities.stats().bytes
            == ENTITY_BYTES_PER_TURN * 1)


def test_exchanges_are_not_indexed(shard: SessionShardService) -> None:
    said(shard, TAMPA)
    [record] = [r for r in hot(shard).scan_scope(Collection.EPISODES, U)]
    assert indexable(record)
    exchange = record.model_copy(update={"payload": {**record.payload,
                                                     "metadata": {"type": "exchange"}}})
    assert not indexable(exchange)
    assert not indexable(record.model_copy(update={"payload": {**record.payload,
                                                               "weight": 0.0}}))


def test_stage_validation() -> None:
    assert not DEFAULT.runs(Stage.ENTITIES) and DEFAULT.stages == DEFAULT_STAGES
    assert RECIPES["entities"].runs(Stage.ENTITIES)
    assert RECIPES["entities"].stages == ORDER  # every stage, in order
    assert with_stages(Stage.ENTITIES).index(Stage.ENTITIES) == ORDER.index(Stage.ENTITIES)
    assert Stage.ENTITIES not in without(Stage.MERGE)
    with pytest.raises(ValueError, match="order"):
        RecallRecipe(name="x", stages=(Stage.SEARCH, Stage.EXCHANGES, Stage.ENTITIES,
                                       Stage.FUSION, Stage.SELECT, Stage.ASSEMBLY))
    with pytest.raises(ValueError, match="twice"):
        RecallRecipe(name="x", stages=(*with_stages(Stage.ENTITIES), Stage.ENTITIES))
    with pytest.raises(ValueError, match="entity sources"):
        RecallRecipe(name="x", entity_sources=("wordnet",))
    with pytest.raises(ValueError):
        RecallRecipe(name="x", entity_candidates=0)
    with pytest.raises(ValueError):
        RecallRecipe(name="x", entity_weight=-0.1)
    assert {r for r in RECIPES if r.startswith("entities-only-")} == {
        "entities-only-gazetteer", "entities-only-lexicon", "entities-only-names"}


def test_a_separate_source_lifts_only_the_turns_it_added(shard: SessionShardService) -> None:
    both = "Nate: what state did I visit? the state I visit most, visit Tampa: state, visit"
    said(shard, TAMPA)
    said(shard, both)  # the search finds it too
    for text in FILLER:
        said(shard, text)
    assert both in candidates(shard, WITHOUT) and TAMPA not in candidates(shard, WITHOUT)
    boost = candidates(shard, WITH)
    added = candidates(shard, WITH.model_copy(update={"entity_found_too": False}))
    assert "entity" in boost[both], boost[both]
    assert "entity" not in added[both], added[both]
    assert added[TAMPA]["entity"] == WITH.entity_weight


def test_reached_turns_can_pass_late_interactions_cut(shard: SessionShardService) -> None:
    other = "Nate: the weather in Tampa was sunny, the beach was nice"
    said(shard, TAMPA)
    said(shard, other)  # both reached: Tampa is in Florida
    for text in FILLER:
        said(shard, text)
    narrow = WITH.model_copy(update={"late_candidates": 1, "entity_weight": 0.0})
    cut = candidates(shard, narrow)
    assert len(cut) == 1 and not {TAMPA, other} <= cut.keys()  # one survives the cut
    kept = candidates(shard, narrow.model_copy(update={"entity_past_late": True}))
    assert {TAMPA, other} <= kept.keys() and len(kept) <= 3
