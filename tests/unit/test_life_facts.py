"""Facts of ordinary conversation (#36): pets and their names, people, work, home, origin,
languages, health, diet, goals and likes with their objects, the value the thing itself; and
no fact or note from a reminder, advice, a quote, a hypothetical or a sarcastic like."""

from __future__ import annotations

import pytest

from strata.extract.rules import RuleExtractor
from strata.models import MemoryKind, Role, Turn


def _facts(text: str, speaker: str | None = "Maya") -> dict[str, str]:
    turn = Turn(turn_id="s:1", session_id="s", user_id="u", role=Role.USER, content=text,
                metadata={"speaker": speaker} if speaker else {})
    return {c.key: c.value or "" for c in RuleExtractor().extract([turn])
            if c.kind is MemoryKind.FACT and c.key}


@pytest.mark.parametrize(("text", "key", "value"), [
    ("Luna (our new pup) keeps us busy these days.", "pet.dog:luna", "Luna"),
    ("I finally adopted a cat named Biscuit!", "pet.cat:biscuit", "Biscuit"),
    ("我们上个月领养了一只柯基，叫豆豆。", "pet.狗:豆豆", "豆豆"),
    ("My sister Rachel is getting married in June.", "relationship.sister:rachel",
     "sister Rachel"),
    ("我跟我老婆周末去看电影了。", "relationship.妻子", "老婆"),
    ("I work as a nurse at Mercy General Hospital.", "work.employer", "Mercy General Hospital"),
    ("Still at the brewery, nothing new.", "work.employer", "brewery"),
    ("我在一家银行上班，挺忙的。", "work.employer", "银行"),
    ("Honestly Toronto feels like home now.", "location.home", "Toronto"),
    ("I grew up in a tiny town in Kerala.", "identity.origin", "Kerala"),
    ("我老家哈尔滨的，不怕冷。", "identity.origin", "哈尔滨"),
    ("Been learning Japanese for about eight months now.", "language.japanese", "Japanese"),
    ("最近在学日语。", "language.日语", "日语"),
    ("I was diagnosed with asthma as a kid.", "health.asthma", "asthma"),
    ("We've gone fully vegetarian at home since January.", "constraint.diet", "vegetarian"),
    ("The dream is still a little farm with goats someday.",
     "goal:little farm with goats someday", "little farm with goats someday"),
    ("Still obsessed with that one Radiohead album.", "preference:radiohead album",
     "Radiohead album"),
    ("我是真的受不了香菜。", "preference:香菜", "不喜欢香菜"),
    ("I'm 34 and just learned how to ride a bike.", "identity.age", "34"),
])
def test_a_conversational_fact_is_kept_with_its_thing_as_the_value(text: str, key: str,
                                                                  value: str) -> None:
    assert _facts(text).get(key) == value, _facts(text)


@pytest.mark.parametrize("text", [
    "remember to bring the board games Friday, I'm not losing at Catan again",
    "Don't forget to send me that chili recipe before Saturday!!",
    "Remember, it takes time to form a bond.",
    "Remember Jon, just do it!",
    "记得游完多喝水啊，头发吹干再出门。",
    "下周三小林生日，别忘了准备礼物哦。",
    'Lol he literally said "I\'m not a dog person" and then played with the corgi all night.',
    "If I lived in Paris I'd eat croissants every morning.",
    "要是我有钱，我也辞职去大理开个客栈。",
    "Oh yeah, I just LOVE spending my Saturday on hold with the insurance company 🙄",
    "You should really try yoga every morning.",
    "I'm a total night owl these days.",
    "I'd love to have you over again sometime!",
])
def test_advice_reminders_quotes_hypotheticals_and_sarcasm_keep_no_fact(text: str) -> None:
    assert _facts(text) == {}


def test_a_remember_request_with_the_speaker_s_own_information_is_still_a_note() -> None:
    facts = _facts("Please remember that my locker code changes every term.", speaker=None)
    assert any(k.startswith("note:") for k in facts), facts


@pytest.mark.parametrize(("text", "kept", "not_kept"), [
    ("my roommate just adopted a ferret and it's pure chaos", "relationship.roommate",
     "pet.ferret"),
    ("我表哥在新加坡做程序员，他说那边节奏也挺快的", None, "work.role"),
    ("我妹妹在华西当护士，她说最近甲流特别多", "relationship.妹妹", "work.employer"),
    ("my mom just got diagnosed with osteoporosis, so proud of her", "relationship.mother",
     "health.osteoporosis"),
])
def test_a_clause_about_someone_else_gives_only_the_relation(text: str, kept: str | None,
                                                             not_kept: str) -> None:
    facts = _facts(text)
    assert not_kept not in facts, facts
    assert kept is None or kept in facts, facts


@pytest.mark.parametrize(("text", "key", "value"), [
    ("my partner Sam and I moved to Denver last year.", "location.home", "Denver"),
    ("My sister Ana and I adopted a cat named Miso.", "pet.cat:miso", "Miso"),
    ("我在杭州一家医院上班，老公在银行。", "work.employer", "医院"),
    ("我退休前在纺织厂当了三十年会计。", "work.role", "会计"),
    ("I'm an accountant at a small firm.", "work.role", "accountant"),
])
def test_a_clause_the_speaker_shares_is_still_the_speaker_s(text: str, key: str,
                                                            value: str) -> None:
    assert _facts(text).get(key) == value, _facts(text)


def test_a_duration_or_a_word_after_i_am_is_not_a_fact() -> None:
    facts = _facts("I'm actually sober, 3 years in August!")
    assert "work.role" not in facts and "location.home" not in facts, facts
    assert list(_facts("我对芒果过敏！！")) == ["constraint.allergy:芒果"]
