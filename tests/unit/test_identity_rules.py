"""The speaker's name and age from a self-introduction (``strata.extract.identity_rules``),
and what is no name or age of the speaker's."""

from __future__ import annotations

import pytest

from strata.extract.identity_rules import match_identity
from strata.extract.rules import RuleExtractor
from strata.models import Role, Turn


def _read(text: str) -> dict[str, str]:
    return {key: value for key, value, _ in match_identity(text)}


@pytest.mark.parametrize(("text", "name", "age"), [
    ("Hey. Priya here, I fix bikes for a living", "Priya", None),
    ("hiya all! Tomasz here 👋", "Tomasz", None),
    ("hello, I'm Mei Ling, I live in Penang", "Mei Ling", None),
    ("yo I'm Kofi, new in town", "Kofi", None),
    ("um, so my name's Hattie, Hattie Cole", "Hattie", None),
    ("Good morning. I am Ahmed Karim, 63 years old, a retired pilot", "Ahmed Karim", "63"),
    ("Jules, 38, Libra, allergic to small talk", "Jules", "38"),
    ("im 17 is that old enough for the student plan", None, "17"),
    ("I'm sixty-four and still climbing", None, "64"),
    ("I just turned 40 and nobody noticed", None, "40"),
    ("32 today and my knees know it", None, "32"),
    ("大家好，我是雨桐，在成都做设计", "雨桐", None),
    ("叫我阿飞就行", "阿飞", None),
    ("我是Leo，刚来深圳", "Leo", None),
    ("我今年五十三了，头一回用这个", None, "53"),
    ("我都38了还在租房", None, "38"),
    ("我才24😂", None, "24"),
    ("东北银，29了，现在在杭州", None, "29"),
])
def test_a_self_introduction_gives_the_name_and_age(text: str, name: str | None,
                                                     age: str | None) -> None:
    read = _read(text)
    assert read.get("identity.name") == name
    assert read.get("identity.age") == age


@pytest.mark.parametrize("text", [
    "I'm Italian, so pineapple on pizza is a crime",
    "I'm 20 minutes away",
    "I'm 30k in debt and counting",
    "i'm 3 episodes in",
    "It's Monday.",
    "I'm Catholic, so no meat on Fridays",
    "Same here tbh",
    "Looky here",
    "This is Sarah, my sister",
    "My son, 15, loves Minecraft",
    "Her name's Biscuit and she's a menace",
    "I want my own flat before I'm 30",
    "I'm 100% done with this week",
    "我是老师，带初三",
    "我是宝妈，孩子两岁",
    "我等了20分钟了",
    "我们20个人去团建",
    "我是90后",
    "有事喊我一声就行",
])
def test_what_is_no_name_or_age_of_the_speaker(text: str) -> None:
    assert _read(text) == {}


def test_the_extractor_keeps_the_introduction_as_facts() -> None:
    turn = Turn(turn_id="t1", session_id="s1", user_id="u1", role=Role.USER,
                content="Hi all! Farah here, 27, moved to Leeds last spring.")
    facts = {c.key: c.value for c in RuleExtractor().extract([turn]) if c.key}
    assert facts.get("identity.name") == "Farah"
    assert facts.get("identity.age") == "27"


@pytest.mark.parametrize(("text", "role"), [
    ("as a midwife I've seen worse", "midwife"),
    ("Electrician in Cardiff. Two kids, one dog.", "Electrician"),
    ("Hi all, Jess here. Data analyst, ex-Deloitte.", "Data analyst"),
    ("I teach Year 6 at a school in Hull", "Year 6 teacher"),
    ("I'm teaching seventh grade maths this year", "seventh grade maths teacher"),
    ("I drive a cab nights", "a cab driver"),
    ("我是老李，开出租的，干了二十年", "出租车司机"),
    ("我在杭州一所中学教数学", "数学老师"),
    ("现在做自由摄影师，挺自在", "自由摄影师"),
])
def test_a_job_said_in_passing_is_the_speakers_role(text: str, role: str) -> None:
    from strata.extract.status_rules import match_status

    assert ("work.role", role, False) in match_status(text)


@pytest.mark.parametrize("text", [
    "Whatever in Paris is fine by me",
    "Remember in March we went to the coast?",
    "I teach kids to swim on Sundays, just for fun",
    "他开出租的，挺辛苦",
    "能请教语文问题吗",
])
def test_what_only_looks_like_a_job(text: str) -> None:
    from strata.extract.status_rules import match_status

    assert not [f for f in match_status(text) if f[0] == "work.role"]
