"""The kind of answer a question asks for, and whether a turn holds one (English, Chinese).

"How many hikes…", "when did he…", "where did she move…", "which book…", "who…" ask for a
number, a time, a place, a name or a person; of two turns about the same thing, the one that
holds such a thing ("we did four hikes", "last Friday", "moved to Ohio", "Charlotte's Web",
"with my sister") is more likely the answer than one that only asks or talks about it.
``strata.recall.granularity`` adds ``answer_boost`` to such a turn. The names of the
conversation's people are not places, titles or other people. ("Why…" is not among them:
"because" marks the answer no better than the turns around it, measured in
docs/benchmarks.md.)
"""

from __future__ import annotations

import re
from collections.abc import Collection
from enum import Enum

from strata.extract.terms import word_pattern

__all__ = ["Answer", "asked", "holds"]


class Answer(Enum):
    NUMBER = "number"
    PLACE = "place"
    TIME = "time"
    NAME = "name"
    PERSON = "person"


_ASKED = [  # the first that matches wins
    (Answer.NUMBER, re.compile(
        r"^\s*how (many|much|long|often|old|far)\b|多少|几(个|次|岁|年|天|本|只|位|遍|回)|多久|"
        r"多长时间|多大", re.I)),
    (Answer.TIME, re.compile(
        r"^\s*when\b|\b(what|which) (year|month|day|date|time|week)\b|什么时候|哪(一)?年|"
        r"几月|几号|几点|哪天|哪一天|何时", re.I)),
    (Answer.PLACE, re.compile(
        r"^\s*where\b|\b(what|which) (city|cities|country|countries|state|states|town|place|"
        r"places|restaurant|park|beach|island|region)\b|哪里|哪儿|在哪|哪个(城市|国家|地方|省)",
        re.I)),
    (Answer.PERSON, re.compile(r"^\s*who\b|\bwhose\b|\bwith whom\b|谁", re.I)),
    (Answer.NAME, re.compile(
        r"\b(what|which) (book|books|novel|movie|movies|film|films|song|songs|band|bands|"
        r"game|games|show|shows|album|albums|artist|artists|author|brand)\b|\bname of\b|"
        r"\bwhat is the name\b|\bcalled\b|哪本|什么书|叫什么|名字|哪部|哪首", re.I)),
]
_PERSON = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+\b|\b(my|her|his|our|their) "
                     r"(mom|mother|dad|father|sister|brother|friend|friends|husband|wife|son|"
                     r"daughter|kids|partner|boss|teacher|mentor|family|grandma|grandpa)\b|"
                     r"妈妈|爸爸|朋友|姐姐|妹妹|哥哥|弟弟|老师|同事")
_NUMBER = re.compile(
    r"\b(\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|hundred|"
    r"thousand|twice|once|several|a few|a couple)\b|[0-9０-９]|[一二两三四五六七八九十百千万]"
    r"(个|次|岁|年|天|本|只|位|遍|回|周|小时|公里|块|元)", re.I)
_TIME = re.compile(  # not "may", "last" or "fall" alone: a verb, an adjective, a verb
    r"\b(yesterday|today|tonight|tomorrow|ago|night|week|weeks|month|months|year|years|"
    r"weekend|morning|evening|monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    r"january|february|march|april|june|july|august|september|october|november|"
    r"december|spring|summer|autumn|winter|\d{4})\b|\b(?-i:May)\b|昨天|今天|明天|前天|上周|下周|"
    r"上个月|下个月|去年|明年|年前|天前|周末|早上|晚上|[0-9一二三四五六七八九十]+(年|月|日|号)",
    re.I)
_PLACE = re.compile(
    r"\b(?:in|at|to|from|near|visited|visit|around|across)\s+(?:the\s+)?[A-Z][\w'’-]+|"
    r"(?:(?<![现过看想得听收遇做感直])(?:在|去|到)|住|来自|搬到)[\u4e00-\u9fff]{2,}")
_NAME = re.compile(r"[\"“‘][A-Z][^\"”’]{2,}[\"”’]|《[^》]+》|"
                   r"\b[A-Z][\w'’-]+(?:\s+(?:of\s+|the\s+)?[A-Z][\w'’-]+)+")
_SPEAKER = re.compile(r"^[^:\n]{1,40}:\s*")


def asked(query: str) -> Answer | None:
    """The kind of answer ``query`` asks for, if it asks for one of these."""
    return next((answer for answer, pattern in _ASKED if pattern.search(query)), None)


def holds(answer: Answer, text: str, people: Collection[str] = ()) -> bool:
    """Whether ``text`` (a turn, its speaker's name first or not) holds such an answer;
    ``people``: the names of the conversation's people, which are no place or title."""
    body = _SPEAKER.sub("", text, count=1)
    if answer is Answer.NUMBER:
        return bool(_NUMBER.search(body))
    if answer is Answer.TIME:
        return bool(_TIME.search(body))
    for name in people:
        body = re.sub(word_pattern(name), "someone", body, flags=re.I)
    if answer is Answer.PERSON:
        return bool(_PERSON.search(body))
    return bool((_PLACE if answer is Answer.PLACE else _NAME).search(body))
