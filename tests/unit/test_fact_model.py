"""The learned fact reader (strata/extract/fact_model.py) and the keys it stores facts under
(strata/extract/fact_keys.py), English and Chinese."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from strata.extract.base import Intent
from strata.extract.fact_keys import CATEGORIES, category_of, fact_key
from strata.extract.fact_model import LearnedFacts, training_rows, value_units
from strata.extract.llm import make_extractor
from strata.extract.rules import RuleExtractor, stated_text
from strata.models import MemoryKind, Role, Turn
from strata.settings import Settings


def _row(text: str, *facts: tuple[str, str]) -> dict[str, Any]:
    return {"text": text, "facts": [{"category": c, "value": v} for c, v in facts]}


# a small corpus: pets (en, zh), jobs (en, zh), and rows that state no fact of the speaker's
ROWS = [
    _row("Biscuit is my beagle, total menace", ("pet", "beagle Biscuit")),
    _row("our corgi Waffles sleeps all day", ("pet", "corgi Waffles")),
    _row("got a tabby called Miso last year", ("pet", "tabby Miso")),
    _row("Pepper my old terrier still chases cars", ("pet", "terrier Pepper")),
    _row("家里那只柯基叫豆豆", ("pet", "柯基豆豆")),
    _row("我养的橘猫叫年糕", ("pet", "橘猫年糕")),
    _row("家里那只金毛叫旺财", ("pet", "金毛旺财")),
    _row("I drive a bus for the city, night routes mostly", ("work", "bus driver")),
    _row("been a nurse at the clinic for ten years", ("work", "nurse")),
    _row("still baking bread at the bakery every dawn, I'm the baker", ("work", "baker")),
    _row("我在医院当护士", ("work", "护士")),
    _row("我开出租车十五年了", ("work", "出租车司机")),
    _row("我在银行做柜员", ("work", "柜员")),
    _row("ugh mondays man"),
    _row("lol thanks, helpful"),
    _row("you should get some sleep, seriously"),
    _row("哈哈哈笑死"),
    _row("明天见啦"),
    _row("that sounds fun, enjoy the trip"),
]


@pytest.fixture(scope="module")
def reader() -> LearnedFacts:
    # a toy corpus: the token probabilities stay lower than on the packaged rows
    return LearnedFacts(ROWS, threshold=0.5, token_threshold=0.5, run_threshold=0.0)


def _turn(text: str) -> Turn:
    return Turn(turn_id="t1", session_id="s1", user_id="u", role=Role.USER, content=text)


@pytest.mark.parametrize(("category", "value", "key"), [
    ("pet", "beagle Biscuit", "pet.dog:biscuit"),
    ("pet", "柯基豆豆", "pet.狗"),
    ("relationship", "sister Rosa", "relationship.sister:rosa"),
    ("relationship", "Mom", "relationship.mother"),
    ("relationship", "老公", "relationship.丈夫"),
    ("home", "Oakland", "location.home"),
    ("hometown", "保定", "identity.origin"),
    ("work", "Ubisoft", "work.employer"),
    ("work", "ER nurse", "work.role"),
    ("education", "U of T", "education.school"),
    ("like", "jazz music", "preference.music:jazz music"),
    ("habit", "runs every morning", "habit.runs"),  # the activity, as the rules key it
])
def test_a_category_is_keyed_as_the_rules_key_it(category: str, value: str, key: str) -> None:
    keyed = fact_key(category, value)
    assert keyed is not None and keyed[0] == key


def test_every_category_maps_back_through_its_key() -> None:
    # the bench's categories and the store's keys agree: a learned fact counts as what it is
    samples = {"name": "Maya", "age": "38", "dislike": "香菜", "health": "bad back",
               "diet": "vegetarian", "language": "German", "possession": "a red Vespa",
               "goal": "open a restaurant"}
    for category in CATEGORIES:
        value = samples.get(category, "Oakland" if category != "relationship" else "sister")
        keyed = fact_key(category, value)
        assert keyed is not None, category
        assert category_of(*keyed) == category, (category, keyed)


def test_a_dislike_is_stored_as_one_in_either_language() -> None:
    assert fact_key("dislike", "cilantro") == ("preference:cilantro", "dislikes cilantro")
    assert fact_key("dislike", "香菜") == ("preference.food:香菜", "不喜欢香菜")


def test_value_units_are_stemmed_words_and_characters() -> None:
    assert value_units("the painting classes") == {"paint", "class"}
    assert value_units("柯基豆豆") == {"柯", "基", "豆"}


def test_the_model_reads_a_category_and_its_value_in_english(reader: LearnedFacts) -> None:
    probs = reader.categories("my beagle Rocky ate a sock again")
    assert probs["pet"] > probs["work"]
    added, dropped = reader.read("my beagle Rocky ate a sock again", [])
    assert ("pet.dog:rocky", "beagle Rocky") in added or any(
        k.startswith("pet.") and "Rocky" in v for k, v in added), added
    assert not dropped


def test_the_model_reads_a_category_and_its_value_in_chinese(reader: LearnedFacts) -> None:
    added, _ = reader.read("我在邮局当快递员", [])
    assert any(k.startswith("work.") for k, _ in added), added


def test_a_value_whose_surest_token_is_unsure_is_not_kept(reader: LearnedFacts) -> None:
    _, probs = reader.token_probabilities("my beagle Rocky ate a sock again", "pet")
    assert reader.values("my beagle Rocky ate a sock again", "pet")
    reader.run_threshold = max(probs) + 0.01
    try:
        assert reader.values("my beagle Rocky ate a sock again", "pet") == []
    finally:
        reader.run_threshold = 0.0


def test_small_talk_reads_as_no_fact(reader: LearnedFacts) -> None:
    for text in ("ugh fridays man", "哈哈哈", "lol thanks"):
        assert reader.read(text, [])[0] == [], text


def test_a_category_the_rules_found_is_left_to_them(reader: LearnedFacts) -> None:
    added, _ = reader.read("my beagle Rocky ate a sock again", [("pet.dog:rocky", "Rocky")])
    assert not any(k.startswith("pet.") for k, _ in added)


def test_a_rule_fact_the_model_reads_as_none_is_dropped_at_the_veto() -> None:
    strict = LearnedFacts(ROWS, veto=0.99)
    _, dropped = strict.read("ugh mondays man", [("work.role", "nurse")])
    assert dropped == {"work.role"}
    assert LearnedFacts(ROWS, veto=0.0).read("ugh mondays man", [("work.role", "nurse")])[1] \
        == frozenset()


class _Fixed:
    """A reader that always adds one fact and drops one key."""

    def __init__(self, added: list[tuple[str, str]], dropped: Sequence[str] = ()) -> None:
        self.added, self.dropped = added, frozenset(dropped)
        self.seen: list[str] = []

    def read(self, stated: str, ruled: Sequence[tuple[str, str]]
             ) -> tuple[list[tuple[str, str]], frozenset[str]]:
        self.seen.append(stated)
        return self.added, self.dropped


def test_the_extractor_adds_the_readers_facts_as_stated_facts() -> None:
    fixed = _Fixed([("pet.dog:biscuit", "Biscuit")])
    cands = RuleExtractor(reads_facts=fixed).extract([_turn("Biscuit ate a sock again lol")])
    facts = [c for c in cands if c.kind is MemoryKind.FACT]
    assert [(c.key, c.value) for c in facts] == [("pet.dog:biscuit", "Biscuit")]
    assert facts[0].metadata["read_by"] == "fact_model" and facts[0].intent is Intent.NONE


def test_the_extractor_drops_the_rule_facts_the_reader_rejects() -> None:
    text = "I live in Boston"
    assert any(c.key == "location.home" for c in RuleExtractor().extract([_turn(text)]))
    cands = RuleExtractor(reads_facts=_Fixed([], ["location.home"])).extract([_turn(text)])
    assert not any(c.key == "location.home" for c in cands)


def test_questions_quotes_and_hypotheticals_never_reach_the_reader() -> None:
    fixed = _Fixed([("pet.dog:biscuit", "Biscuit")])
    for text in ("did you get a dog?", "你养狗了吗？", "if I had a dog I'd call him Biscuit",
                 "要是我有钱就养只狗"):
        assert stated_text(text) == "", text
        cands = RuleExtractor(reads_facts=fixed).extract([_turn(text)])
        assert not [c for c in cands if c.kind is MemoryKind.FACT], text
    assert fixed.seen == []
    assert "Biscuit" not in stated_text('He said "my dog Biscuit is the best". Nice.')


def test_a_sarcastic_liking_is_not_added() -> None:
    fixed = _Fixed([("preference:being on hold", "being on hold")])
    cands = RuleExtractor(reads_facts=fixed).extract([_turn("I just LOVE being on hold 🙄")])
    assert not [c for c in cands if c.kind is MemoryKind.FACT]


def test_the_shipped_extractor_reads_facts_only_when_set_to() -> None:
    assert training_rows(), "the packaged facts corpus ships with the package"
    assert make_extractor(Settings(fact_reader="rules"))._reads_facts is None  # type: ignore[attr-defined]


def test_the_joint_tagger_reads_a_value_the_category_models_do_not_pass() -> None:
    # the category path is shut (threshold 0.99): only the joint tagger can add the pet
    common = {"threshold": 0.99, "token_threshold": 0.5, "run_threshold": 0.0}
    text = "got a corgi called Mochi last week"
    with_joint = LearnedFacts(ROWS, joint=0.5, joint_gate=0.0, **common).read(text, [])[0]
    assert any(k.startswith("pet.dog") for k, _ in with_joint), with_joint
    assert LearnedFacts(ROWS, joint=0.0, **common).read(text, [])[0] == []


def test_the_joint_tagger_is_gated_by_the_category_model() -> None:
    common = {"threshold": 0.99, "token_threshold": 0.5, "run_threshold": 0.0, "joint": 0.5}
    assert LearnedFacts(ROWS, joint_gate=1.0, **common).read(
        "got a corgi called Mochi last week", [])[0] == []


@pytest.mark.parametrize(("key", "value", "kept"), [
    ("habit.day", "day", False),
    ("habit.every", "every", False),
    ("work.role", "homeless", False),   # "volunteering at a homeless shelter"
    ("work.role", "team", False),
    ("work.role", "volunteer", False),  # "I got to volunteer at a career fair"
    ("work.role", "homeless shelter", False),
    ("work.role", "assistant manager", True),
    ("work.role", "护士", True),
    ("habit.runs", "runs every morning", True),
    ("pet.dog:mochi", "corgi Mochi", True),
])
def test_a_learned_value_is_kept_only_when_it_names_something(key: str, value: str,
                                                              kept: bool) -> None:
    from strata.extract.fact_model import _kept_value

    assert _kept_value(key, value) is kept


@pytest.mark.parametrize(("value", "stated", "kept"), [
    ("pottery class", "Hey Jon! I finally took a pottery class yesterday and loved it.", False),
    ("pottery class", "I take a pottery class every Thursday night.", True),
    ("painting", "Tuesday nights are for painting, non-negotiable.", True),
    ("打羽毛球", "我上周末去打羽毛球了", False),
    ("打羽毛球", "周末都去打羽毛球", True),
    ("打羽毛球", "昨天打羽毛球扭到脚了", False),
])
def test_a_learned_habit_needs_the_turn_to_say_it_recurs(value: str, stated: str,
                                                         kept: bool) -> None:
    from strata.extract.fact_model import _kept_value

    assert _kept_value(f"habit.{value}", value, stated) is kept
    assert _kept_value(f"like:{value}", value, stated)  # only a habit must recur


@pytest.mark.parametrize(("key", "value", "kept"), [
    ("relationship.朵朵", "朵朵", False),         # a name, not who she is to the speaker
    ("relationship.儿", "儿", False),             # one character the tagger cut
    ("location.home", "北", False),
    ("relationship.妈妈", "妈", True),            # a relation said in one character
    ("relationship.sister:rosa", "sister Rosa", True),
    ("relationship.friend", "Aylin", False),
    ("relationship.friend:leah", "friend Leah", True),
    ("relationship.老伴", "老伴儿", True),
])
def test_a_learned_person_is_a_relation_and_one_character_is_no_value(
        key: str, value: str, kept: bool) -> None:
    from strata.extract.fact_model import _kept_value

    assert _kept_value(key, value) is kept


@pytest.mark.parametrize(("value", "stated", "kept"), [
    ("Harbin", "Born in Harbin so very cold place, now Shenzhen too hot for me", False),
    ("Cornwall", "If the book sells I'm buying a cottage in Cornwall.", False),
    ("Delft", "studied architecture in Delft, now I design kitchens", False),
    ("Mexico City", "just moved to Medellín after 3 years in Mexico City", False),
    ("Austin", "I'm from Monterrey but I live in Austin now", True),
    ("Denver", "moved from Phoenix to Denver last month", True),
    ("Melbourne", "born and raised in Cork but been in Melbourne 6 years now", True),
    ("黄山", "我老家是安徽黄山的，上大学才来的杭州。", False),
])
def test_a_learned_home_is_not_where_the_speaker_comes_from_or_was(value: str, stated: str,
                                                                   kept: bool) -> None:
    from strata.extract.fact_model import _kept_value

    assert _kept_value("location.home", value, stated) is kept


@pytest.mark.parametrize("value", ["每天早上", "每周六", "周末下班"])
def test_a_learned_chinese_value_that_only_says_when_is_no_value(value: str) -> None:
    from strata.extract.fact_model import _kept_value

    assert not _kept_value(f"habit.{value}", value, "我每天都这样")


def test_a_reminder_request_states_no_habit() -> None:
    assert stated_text("提醒我周末去买纸尿裤") == ""
    assert stated_text("Remind me to book the flu jab next week. I run every Sunday.") \
        == "I run every Sunday."
    turn = Turn(turn_id="t", session_id="s", user_id="u", role=Role.USER,
                content="remind me to go swimming every Saturday")
    assert not [c for c in RuleExtractor().extract([turn]) if (c.key or "").startswith("habit")]


@pytest.mark.parametrize(("value", "stated", "kept"), [
    ("Spanish", "I've always wanted to learn Spanish", False),
    ("日语", "我一直想学日语，有机会去日本", False),
    ("Spanish", "I started learning Spanish in January", True),
    ("日语", "我在学日语", True),
])
def test_a_learned_language_is_not_one_the_speaker_only_wishes_for(value: str, stated: str,
                                                                  kept: bool) -> None:
    from strata.extract.fact_model import _kept_value

    assert _kept_value(f"language.{value.lower()}", value, stated) is kept


@pytest.mark.parametrize(("value", "kept"), [
    ("Berlin next year", False),   # "I might move to Berlin next year": the place, not the goal
    ("78", False),
    ("run a marathon", True),
    ("open a café in Chiang Mai", True),
    ("考CPA", True),
])
def test_a_learned_goal_says_what_to_do(value: str, kept: bool) -> None:
    from strata.extract.fact_model import _kept_value

    assert _kept_value(f"goal:{value.lower()}", value) is kept
