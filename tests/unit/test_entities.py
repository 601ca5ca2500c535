"""The entity extraction (#38): proper nouns, gazetteer places and their containing places,
lexicon things, pets and relatives, Chinese; and the hard negatives (a sentence's first
word, "May" the month, "turkey" the food, "switch" the verb)."""

from __future__ import annotations

import pytest

from strata.entities import (
    CategoryLexicon,
    Entity,
    EntityType,
    Gazetteer,
    LinkKind,
    default_gazetteer,
    default_lexicon,
    extract_entities,
)


@pytest.fixture(scope="module")
def gazetteer() -> Gazetteer:
    return default_gazetteer()


@pytest.fixture(scope="module")
def lexicon() -> CategoryLexicon:
    return default_lexicon()


def _read(text: str, gazetteer: Gazetteer, lexicon: CategoryLexicon, lang: str = "en",
          **kw: object) -> dict[str, Entity]:
    found = extract_entities(text, lang, gazetteer=gazetteer, lexicon=lexicon, **kw)  # type: ignore[arg-type]
    return {e.name: e for e in found}


def _targets(entity: Entity, kind: LinkKind) -> set[str]:
    return {link.target for link in entity.links if link.kind is kind}


def test_a_city_links_to_its_state_and_the_gazetteer_chains_to_the_continent(
        gazetteer: Gazetteer, lexicon: CategoryLexicon) -> None:
    found = _read("Nate: I took my turtles to the beach in Tampa yesterday", gazetteer,
                  lexicon, speakers=["Nate", "Joanna"], speaker="Nate")
    tampa = found["Tampa"]
    assert tampa.type is EntityType.PLACE and tampa.place_level == "city"
    assert _targets(tampa, LinkKind.IN_PLACE) == {"place:state:US-FL"}
    assert [p.name for p in gazetteer.chain(tampa.id)] == [
        "Tampa", "Florida", "United States", "North America"]
    assert "Nate" not in found  # the speaker's own name is no entity of the turn
    assert _targets(found["turtle"], LinkKind.CATEGORY) == {"animal"}


def test_lexicon_things_and_their_links(gazetteer: Gazetteer,
                                        lexicon: CategoryLexicon) -> None:
    found = _read("I play the violin and clarinet. Got a new Switch and played Xenoblade "
                  "Chronicles!", gazetteer, lexicon)
    assert _targets(found["violin"], LinkKind.CATEGORY) == {"instrument"}
    assert _targets(found["clarinet"], LinkKind.CATEGORY) == {"instrument"}
    assert _targets(found["nintendo switch"], LinkKind.CATEGORY) == {"console"}
    game = found["xenoblade chronicles"]
    assert _targets(game, LinkKind.CATEGORY) == {"video_game"}
    assert _targets(game, LinkKind.PLATFORM) == {"thing:nintendo switch"}


def test_switch_the_verb_is_no_console(gazetteer: Gazetteer,
                                       lexicon: CategoryLexicon) -> None:
    assert _read("I need to switch jobs soon", gazetteer, lexicon) == {}


def test_a_pet_named_by_its_owner(gazetteer: Gazetteer, lexicon: CategoryLexicon) -> None:
    found = _read("My dog Max loves the park", gazetteer, lexicon, speaker="Ana")
    max_ = found["Max"]
    assert max_.type is EntityType.PET
    assert _targets(max_, LinkKind.RELATION) == {"dog"}
    assert _targets(max_, LinkKind.OWNER) == {"name:ana"}
    assert "pet" in max_.categories()


def test_a_relative_named_and_a_quoted_title(gazetteer: Gazetteer,
                                             lexicon: CategoryLexicon) -> None:
    found = _read('Melanie: I read "Charlotte\'s Web" to my son Kyle at the Lincoln Public '
                  "Library.", gazetteer, lexicon, speakers=["Melanie"], speaker="Melanie")
    assert found["Kyle"].type is EntityType.PERSON
    assert _targets(found["Kyle"], LinkKind.RELATION) == {"son"}
    assert found["Charlotte's Web"].type is EntityType.TITLE
    assert found["Lincoln Public Library"].type is EntityType.ORGANISATION


def test_a_word_that_only_starts_a_sentence_is_no_entity(gazetteer: Gazetteer,
                                                         lexicon: CategoryLexicon) -> None:
    found = _read("Yesterday was long. Honestly I loved it. Then Max called.", gazetteer,
                  lexicon)
    assert set(found) == {"Max"}
    assert found["Max"].type is EntityType.NAME


def test_a_sentence_never_runs_into_the_next_name(gazetteer: Gazetteer,
                                                  lexicon: CategoryLexicon) -> None:
    found = _read("My grandma lives in my home country, Sweden. She gave me this.",
                  gazetteer, lexicon)
    assert found["Sweden"].id == "place:country:SE"
    assert not any("She" in name for name in found)


def test_a_known_name_counts_at_the_start_of_a_sentence(gazetteer: Gazetteer,
                                                        lexicon: CategoryLexicon) -> None:
    assert "Max" not in _read("Max is asleep.", gazetteer, lexicon)
    assert _read("Max is asleep.", gazetteer, lexicon, known={"max"})["Max"].type \
        is EntityType.NAME


def test_may_the_month_is_no_name_but_a_daughter_may_be(gazetteer: Gazetteer,
                                                        lexicon: CategoryLexicon) -> None:
    assert "May" not in _read("We moved in May and it rained.", gazetteer, lexicon)
    found = _read("We went out with my daughter May and it rained.", gazetteer, lexicon)
    assert found["May"].type is EntityType.PERSON


def test_turkey_the_country_and_turkey_the_food(gazetteer: Gazetteer,
                                                lexicon: CategoryLexicon) -> None:
    found = _read("We had turkey for Thanksgiving, then flew to Turkey.", gazetteer, lexicon)
    assert found["turkey"].id == "thing:turkey"
    assert "food" in found["turkey"].categories()
    assert found["Turkey"].id == "place:country:TR"
    assert found["thanksgiving"].type is EntityType.EVENT


def test_a_city_that_is_also_a_first_name_needs_a_place_word(
        gazetteer: Gazetteer, lexicon: CategoryLexicon) -> None:
    assert _read("We talked to Austin about it.", gazetteer, lexicon)["Austin"].type \
        is EntityType.NAME
    assert _read("We drove to Austin last week.", gazetteer, lexicon)["Austin"].type \
        is EntityType.PLACE
    beside = _read("She grew up near the sea and loves Paris, Texas best.", gazetteer, lexicon)
    assert _targets(beside["Paris"], LinkKind.IN_PLACE) == {"place:state:US-TX"}


def test_chinese_places_things_pets_and_people(gazetteer: Gazetteer,
                                               lexicon: CategoryLexicon) -> None:
    found = _read("我的狗叫旺财，我们去了北京和成都，我还会拉小提琴。", gazetteer, lexicon,
                  lang="zh", speaker="小明")
    assert found["旺财"].type is EntityType.PET
    assert _targets(found["旺财"], LinkKind.RELATION) == {"dog"}
    assert found["Beijing"].id == "place:city:1816670"
    assert _targets(found["Beijing"], LinkKind.IN_PLACE) == {"place:country:CN"}
    assert found["Chengdu"].type is EntityType.PLACE
    # 小提琴 is the violin: one entity in either language
    assert found["violin"].id == "thing:violin"


def test_chinese_hard_negatives(gazetteer: Gazetteer, lexicon: CategoryLexicon) -> None:
    found = _read("我买了一台Switch，周末和张伟去杭州玩。我马上就到。", gazetteer, lexicon,
                  lang="zh")
    assert set(found) == {"nintendo switch", "张伟", "Hangzhou"}  # 马上 is no horse
    assert found["张伟"].type is EntityType.PERSON


def test_a_chinese_country_name_resolves(gazetteer: Gazetteer,
                                         lexicon: CategoryLexicon) -> None:
    found = _read("我明年想去日本和土耳其旅游", gazetteer, lexicon, lang="zh")
    assert {e.id for e in found.values() if e.type is EntityType.PLACE} == {
        "place:country:JP", "place:country:TR"}
    assert "traveling" in found
