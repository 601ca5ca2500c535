"""Relative time phrases resolved against the day they were said, for the recalled context.

A memory says "I went to the workshop yesterday" on the day it was said; read months later,
"yesterday" points nowhere, and "last Friday" or "4 years ago" needs a calendar. The context
shows such a phrase with the date it stands for, next to the phrase and never instead of it:
"yesterday (7 May 2023)", "last Friday (5 May 2023)", "two weeks ago (about 24 Apr 2023)",
"last month (Apr 2023)", "4 years ago (about 2019)", "上周五（2023年5月5日）", "去年（2022年）".
What a phrase does not pin down says so ("about") rather than inventing a day. A phrase
whose date is the line's own ("today") or only relative to it ("last week": the week before
the line's date) gets nothing: the line's label already says as much, and every annotation
costs tokens the other items need. English and Chinese.

The stored text is not changed: the API's items keep what was said; only the context line
carries the dates (``strata.recall.assembly``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime, timedelta

__all__ = ["dated", "short_date"]

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_ZH_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_EN_COUNTS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
              "seven": 7, "eight": 8, "nine": 9, "ten": 10, "a couple of": 2}
_ZH_COUNTS = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8,
              "九": 9, "十": 10}
_COUNT = r"(?P<n>\d{1,2}|a couple of|an?|one|two|three|four|five|six|seven|eight|nine|ten)"
_EN = re.compile(
    r"\b(?:(?P<before_yesterday>the day before yesterday)"
    r"|(?P<yesterday>yesterday|last night)"
    r"|(?P<tomorrow>tomorrow)"
    r"|(?:last|this past) (?P<weekday>" + "|".join(_WEEKDAYS) + r")"
    r"|(?P<last_month>last month|a month ago)"
    r"|(?P<next_month>next month)"
    r"|(?P<last_year>last year|a year ago)"
    r"|(?P<next_year>next year)"
    r"|" + _COUNT + r" (?P<unit>day|week|month|year)s? ago)"
    r"\b(?!['’]s\b)(?! of\b)", re.IGNORECASE)  # not "today's game", "the last week of June"
_ZH = re.compile(
    r"(?P<zh_days>前天|昨天|昨晚|明天|后天)"
    r"|上(?:个)?(?:周|星期|礼拜)(?P<zh_weekday>[一二三四五六日天])"
    r"|(?P<zh_last_month>上(?:个)?月)"
    r"|(?P<zh_next_month>下(?:个)?月)"
    r"|(?P<zh_year>前年|去年|明年)"
    r"|(?P<zh_n>\d{1,2}|[一两二三四五六七八九十])(?P<zh_unit>天|周|个星期|个月|年)(?:以)?前")
_ZH_DAY_OFFSETS = {"前天": -2, "昨天": -1, "昨晚": -1, "明天": 1, "后天": 2}
_ZH_YEAR_OFFSETS = {"前年": -2, "去年": -1, "明年": 1}


def short_date(when: date) -> str:
    """``3 Mar 2026``: unambiguous in every locale, and fewer tokens than ``2026-03-03``."""
    return f"{when.day} {_MONTHS[when.month - 1]} {when.year}"


def _month(day: date, shift: int) -> tuple[int, int]:
    index = day.year * 12 + day.month - 1 + shift
    return index // 12, index % 12 + 1


def _en_month(day: date, shift: int) -> str:
    year, month = _month(day, shift)
    return f"{_MONTHS[month - 1]} {year}"


def _en(match: re.Match[str], said: date) -> str | None:
    """What an English phrase stands for, said on ``said``."""
    g = match.groupdict()
    if g["before_yesterday"]:
        return short_date(said - timedelta(days=2))
    for name, offset in (("yesterday", -1), ("tomorrow", 1)):
        if g[name]:
            return short_date(said + timedelta(days=offset))
    if g["weekday"]:  # the last such weekday before the day it was said
        back = (said.weekday() - _WEEKDAYS.index(g["weekday"].lower()) - 1) % 7 + 1
        return short_date(said - timedelta(days=back))
    for name, shift in (("last_month", -1), ("next_month", 1)):
        if g[name]:
            return _en_month(said, shift)
    for name, shift in (("last_year", -1), ("next_year", 1)):
        if g[name]:
            return str(said.year + shift)
    count = _EN_COUNTS.get(g["n"].lower()) if g["n"] and not g["n"].isdigit() else (
        int(g["n"]) if g["n"] else None)
    if not count:
        return None
    unit = g["unit"].lower()
    if unit == "day":
        return short_date(said - timedelta(days=count))
    if unit == "week":
        return f"about {short_date(said - timedelta(weeks=count))}"
    if unit == "month":
        return f"about {_en_month(said, -count)}"
    return f"about {said.year - count}"


def _zh_date(day: date) -> str:
    return f"{day.year}年{day.month}月{day.day}日"


def _zh(match: re.Match[str], said: date) -> str | None:
    """What a Chinese phrase stands for, said on ``said``."""
    g = match.groupdict()
    if g["zh_days"]:
        return _zh_date(said + timedelta(days=_ZH_DAY_OFFSETS[g["zh_days"]]))
    if g["zh_weekday"]:  # that weekday of the week before the one it was said in
        monday = said - timedelta(days=said.weekday() + 7)
        return _zh_date(monday + timedelta(days=_ZH_WEEKDAYS[g["zh_weekday"]]))
    for name, shift in (("zh_last_month", -1), ("zh_next_month", 1)):
        if g[name]:
            year, month = _month(said, shift)
            return f"{year}年{month}月"
    if g["zh_year"]:
        return f"{said.year + _ZH_YEAR_OFFSETS[g['zh_year']]}年"
    count = int(g["zh_n"]) if g["zh_n"].isdigit() else _ZH_COUNTS[g["zh_n"]]
    unit = g["zh_unit"]
    if unit == "天":
        return _zh_date(said - timedelta(days=count))
    if unit in ("周", "个星期"):
        return f"约{_zh_date(said - timedelta(weeks=count))}"
    if unit == "个月":
        year, month = _month(said, -count)
        return f"约{year}年{month}月"
    return f"约{said.year - count}年"


def dated(text: str, said: datetime) -> str:
    """``text`` with each relative time phrase followed by the date it stands for, reckoned
    from ``said`` (the day the text was said): "(7 May 2023)" after English, "（2023年5月7日）"
    after Chinese. A phrase already followed by a bracket is left as it is."""
    day = said.date()

    def annotate(pattern: re.Pattern[str], resolve: Callable[[re.Match[str], date], str | None],
                 opening: str, closing: str, source: str) -> str:
        out: list[str] = []
        last = 0
        for match in pattern.finditer(source):
            value = resolve(match, day)
            follows = source[match.end():match.end() + 2].lstrip()
            if value is None or follows.startswith(("(", "（")):
                continue
            out.append(source[last:match.end()] + f"{opening}{value}{closing}")
            last = match.end()
        return "".join(out) + source[last:]

    text = annotate(_EN, _en, " (", ")", text)
    return annotate(_ZH, _zh, "（", "）", text)
