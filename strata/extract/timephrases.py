"""Relative time phrases ("last year", "上个月", "in 2021") in user statements.

A phrase is the *event time* of what the sentence states, never part of a fact's value:
"I moved to Lisbon last year" is location.home = Lisbon, at about a year before the turn.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from pydantic import BaseModel

__all__ = ["TimePhrase", "find_time_phrase", "strip_time_phrases", "zh_number"]

_ZH_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7,
              "八": 8, "九": 9}
_EN_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
               "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "a couple of": 2,
               "a few": 3, "several": 3}
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365, "天": 1, "日": 1, "周": 7,
              "星期": 7, "个月": 30, "月": 30, "年": 365}
_FIXED_DAYS = {"yesterday": 1, "last night": 1, "last week": 7, "last weekend": 7,
               "last month": 30, "last year": 365, "this year": 0, "this month": 0,
               "earlier this year": 60, "recently": 0, "昨天": 1, "昨晚": 1, "前天": 2,
               "上周": 7, "上星期": 7, "上个星期": 7, "上个月": 30, "上月": 30, "去年": 365,
               "前年": 730, "今年": 0, "这个月": 0, "最近": 0, "前几天": 3, "前段时间": 30}

_EN_NUM = r"(?:\d{1,3}|a couple of|a few|several|an?|one|two|three|four|five|six|seven|eight" \
          r"|nine|ten)"
_EN = (r"\b(?:(?P<en_n>" + _EN_NUM + r") (?P<en_u>day|week|month|year)s? ago|"
       r"(?:back )?in (?P<en_y>(?:19|20)\d\d)|"
       r"(?P<en_f>yesterday|last night|last weekend|last week|last month|last year|"
       r"earlier this year|this year|this month|recently))\b")
_ZH = (r"(?P<zh_n>\d{1,3}|[一二两三四五六七八九十]{1,3}|几)"
       r"(?P<zh_u>天|周|个?星期|个月|年)(?:以?前)|"
       r"(?P<zh_y>(?:19|20)\d\d)年|"
       r"(?P<zh_f>昨天|昨晚|前天|上个?星期|上周|上个?月|去年|前年|今年|这个月|最近|前几天|前段时间)")
_PHRASE = re.compile(_EN + "|" + _ZH, re.I)


class TimePhrase(BaseModel):
    """A time phrase found in a sentence and the moment it points to."""

    start: int
    end: int
    text: str
    when: datetime


def zh_number(text: str) -> int | None:
    """A small Chinese numeral (一…九十九) or Arabic digits as an int; None if neither."""
    if text.isdigit():
        return int(text)
    if not text or any(ch not in _ZH_DIGITS and ch != "十" for ch in text):
        return None
    if "十" not in text:
        return int("".join(str(_ZH_DIGITS[ch]) for ch in text)) if len(text) <= 2 else None
    tens, _, ones = text.partition("十")
    return (_ZH_DIGITS.get(tens, 1) if tens else 1) * 10 + (_ZH_DIGITS.get(ones, 0) if ones else 0)


def _days_back(match: re.Match[str], now: datetime) -> datetime | None:
    groups = match.groupdict()
    if groups["en_y"] or groups["zh_y"]:
        year = int(groups["en_y"] or groups["zh_y"])
        return now.replace(year=year, month=1, day=1) if year <= now.year else None
    fixed = groups["en_f"] or groups["zh_f"]
    if fixed:
        return now - timedelta(days=_FIXED_DAYS.get(fixed.lower(), 0))
    if groups["en_n"]:
        number = _EN_NUMBERS.get(groups["en_n"].lower()) or int(groups["en_n"])
        return now - timedelta(days=number * _UNIT_DAYS[groups["en_u"].lower()])
    count = 3 if groups["zh_n"] == "几" else zh_number(groups["zh_n"])
    if count is None:
        return None
    return now - timedelta(days=count * _UNIT_DAYS[groups["zh_u"].removeprefix("个")])


def find_time_phrase(text: str, now: datetime) -> TimePhrase | None:
    """The first past-pointing time phrase of ``text``, resolved against ``now``."""
    for match in _PHRASE.finditer(text):
        when = _days_back(match, now)
        if when is not None:
            return TimePhrase(start=match.start(), end=match.end(), text=match.group(0),
                              when=when)
    return None


def strip_time_phrases(value: str) -> str:
    """``value`` without its time phrases: "Lisbon last year" → "Lisbon"."""
    return re.sub(r"\s{2,}", " ", _PHRASE.sub("", value)).strip(" ,，")
