"""The per-user entity index (#38): entities across turns, what a question reaches through
it ("what state", "which instruments", "何种宠物", a named pet), forgetting, deleting, and
its snapshot through the store port."""

from __future__ import annotations

import pytest

from strata.entities import (
    EntityIndex,
    EntityType,
    InMemoryEntityStore,
    asked_for,
    default_gazetteer,
    default_lexicon,
    reach,
)
from strata.models import Scope

SPEAKERS = ["Nate", "Joanna"]
TURNS = [
    ("s1:1", "Nate", "Nate: I took my turtles to the beach in Tampa yesterday"),
    ("s1:2", "Joanna", "Joanna: Fun! I stayed home and practised the violin."),
    ("s2:1", "Nate", "Nate: Finally beat Xenoblade Chronicles last night!"),
    ("s2:2", "Joanna", "Joanna: My dog Max chewed my sheet music again."),
    ("s3:1", "Nate", "Nate: Max sounds like a handful. I'm baking a peach cobbler."),
    ("s3:2", "Joanna", "Joanna: We flew to Boston in May for my cousin's wedding."),
]


@pytest.fixture
def index() -> EntityIndex:
    built = EntityIndex(default_gazetteer(), default_lexicon())
    for memory_id, speaker, text in TURNS:
        built.add(memory_id, text, "en", speaker=speaker, speakers=SPEAKERS)
    return built


def test_a_state_reaches_the_turns_of_its_cities(index: EntityIndex) -> None:
    assert index.turns_of("place:state:US-FL") == {"s1:1"}
    assert index.turns_at_level("state") == {"s1:1", "s3:2"}  # Tampa, Boston
    got = reach(index, "What state did Nate visit?", "en", SPEAKERS)
    assert got.ids() == {"s1:1"}  # Boston is Joanna's
    assert got.memories["s1:1"] == {"level:state", "level:city", "level:country"}


def test_the_types_a_question_asks_for(index: EntityIndex) -> None:
    asked = asked_for("Which instruments does Joanna play?", index, "en", SPEAKERS)
    assert asked.categories == ["instrument"] and asked.speaker == "Joanna"
    assert reach(index, "Which instruments does Joanna play?", "en", SPEAKERS).ids() == {"s1:2"}
    # a console reaches the turn about a game on it
    assert reach(index, "What console does Nate own?", "en", SPEAKERS).ids() == {"s2:1"}
    assert reach(index, "What desserts has Nate made?", "en", SPEAKERS).ids() == {"s3:1"}


def test_a_named_pet_is_one_entity_across_turns(index: EntityIndex) -> None:
    max_ = index.find("Max")
    assert max_ is not None and max_.type is EntityType.PET
    assert index.mentions(max_.id) == {"s2:2", "s3:1"}  # "Max sounds …" starts a sentence
    got = reach(index, "What are Joanna's pets' names?", "en", SPEAKERS)
    assert "s2:2" in got.ids()
    assert any(w.startswith("people:") for w in got.memories["s2:2"])


def test_a_question_without_anything_the_index_knows_reaches_nothing(
        index: EntityIndex) -> None:
    assert reach(index, "How is Nate feeling today?", "en", SPEAKERS).ids() == set()


def test_a_chinese_question_asks_for_pets() -> None:
    built = EntityIndex(default_gazetteer(), default_lexicon())
    built.add("s1:1", "我的狗叫旺财，它很喜欢公园。", "zh", speaker="小明")
    built.add("s1:2", "周末我们去了成都吃火锅。", "zh", speaker="小明")
    assert reach(built, "小明养了何种宠物？", "zh").ids() == {"s1:1"}
    assert reach(built, "小明去过哪个国家？", "zh").ids() == {"s1:2"}


def test_forgetting_a_memory_drops_what_only_it_named(index: EntityIndex) -> None:
    assert index.find("xenoblade chronicles") is not None
    removed = index.forget(["s2:1"])
    assert removed >= 2  # the game, and the console nothing else links to any more
    assert index.find("xenoblade chronicles") is None
    assert "thing:nintendo switch" not in index.entities
    assert reach(index, "What console does Nate own?", "en", SPEAKERS).ids() == set()
    assert index.find("Max") is not None  # still named by s2:2 and s3:1


def test_deleting_an_entity(index: EntityIndex) -> None:
    max_ = index.find("Max")
    assert max_ is not None and index.delete_entity(max_.id)
    assert index.find("Max") is None and index.mentions(max_.id) == set()
    assert not index.delete_entity(max_.id)


def test_the_snapshot_round_trips_through_the_store(index: EntityIndex) -> None:
    store = InMemoryEntityStore()
    scope = Scope(tenant="t", user="u")
    assert store.load(scope) is None
    store.save(scope, index.snapshot())
    loaded = store.load(scope)
    assert loaded is not None and loaded == index.snapshot()
    again = EntityIndex.from_snapshot(loaded, default_gazetteer(), default_lexicon())
    question = "What state did Nate visit?"
    assert reach(again, question, "en", SPEAKERS).memories == \
        reach(index, question, "en", SPEAKERS).memories
    assert again.speaker("s1:1") == "Nate"
    assert store.delete(scope) and store.load(scope) is None
