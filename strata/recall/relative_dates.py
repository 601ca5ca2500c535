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
carries the dates (``strata.recall.assembly``). Recall also reads the days a phrase may stand
for (``mentions``, "last week" included): a question about June finds "we went camping last
week" said on 2 July (``strata.recall.granularity``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache

from strata.extract.timephrases import zh_number

__all__ = ["Mention", "dated", "mentions", "short_date"]

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_ZH_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_EN_COUNTS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
              "seven": 7, "eight": 8, "nine": 9, "ten": 10, "a couple of": 2}
_COUNT = (r"(?P<n>(?<![\d.,])\d{1,2}|a couple of|an?|one|two|three|four|five|six|seven|eight"
          r"|nine|ten)")
# not "the last year" / "over the last month" (a stretch of time, not the calendar's), not
# "half a year ago"
_EN = re.compile(
    r"(?<!\bthe )(?<!half )\b(?:(?P<before_yesterday>the day before yesterday)"
    r"|(?P<yesterday>yesterday|last night)"
    r"|(?P<today>today|tonight|this (?:morning|afternoon|evening))"
    r"|(?P<tomorrow>tomorrow)"
    r"|(?:last|this past) (?P<weekday>" + "|".join(_WEEKDAYS) + r")"
    r"|(?P<last_weekend>(?:last|this past) weekend)"
    r"|(?P<last_week>last week)"
    r"|(?P<next_week>next week)"
    r"|(?P<last_month>last month)"
    r"|(?P<next_month>next month)"
    r"|(?P<last_year>last year)"
    r"|(?P<next_year>next year)"
    r"|" + _COUNT + r" (?P<unit>day|week|month|year)s? ago)"
    r"\b(?!['’]s\b)(?! of\b)", re.IGNORECASE)  # not "today's game", "the last week of June"
# not inside other words: 目前天气, 然后天亮, 以前天天, 晚上月亮, 2019年前往
_ZH = re.compile(
    r"(?<![目以之当然最先提])(?P<zh_days>前天|昨天|昨晚|今天|今晚|明天|后天)(?![气亮黑空天])"
    r"|(?<![晚早马])上(?:个)?(?:周|星期|礼拜)(?P<zh_weekday>[一二三四五六日天])"
    r"|(?<![晚早马])(?P<zh_last_weekend>上(?:个)?周末)"
    r"|(?<![晚早马])(?P<zh_last_week>上(?:个)?(?:周|星期|礼拜))"
    r"|(?P<zh_next_week>下(?:个)?(?:周|星期|礼拜))"
    r"|(?<![晚早马])(?P<zh_last_month>上(?:个)?月)(?![亮光球份])"
    r"|(?<![天])(?P<zh_next_month>下(?:个)?月)(?![亮光球份])"
    r"|(?P<zh_year>前年|去年|明年)"
    r"|(?<![\d.一两二三四五六七八九十百千几])(?P<zh_n>\d{1,2}|[一两二三四五六七八九十]{1,3})"
    r"(?P<zh_unit>天|周|个星期|个月|年)(?:以)?前(?![往进面后])")
_ZH_DAY_OFFSETS = {"前天": -2, "昨天": -1, "昨晚": -1, "今天": 0, "今晚": 0, "明天": 1, "后天": 2}
_ZH_YEAR_OFFSETS = {"前年": -2, "去年": -1, "明年": 1}


@dataclass(frozen=True)
class Mention:
    """A relative time phrase in a text: where it is, the days it may stand for
    (``first``–``last``), and how precisely it is shown — ``day``, ``month`` or ``year``
    of ``anchor``, ``about`` one of them, or ``""``: not shown (the line's own date says as
    much)."""

    start: int
    end: int
    first: date
    last: date
    anchor: date
    shown: str
    chinese: bool = False


def short_date(when: date) -> str:
    """``3 Mar 2026``: unambiguous in every locale, and fewer tokens than ``2026-03-03``."""
    return f"{when.day} {_MONTHS[when.month - 1]} {when.year}"


def _month(day: date, shift: int) -> date:
    """The first day of the month ``shift`` months from ``day``'s."""
    index = day.year * 12 + day.month - 1 + shift
    return date(index // 12, index % 12 + 1, 1)


def _month_end(first: date) -> date:
    return _month(first, 1) - timedelta(days=1)


def _day(day: date) -> tuple[date, date, date, str]:
    return day, day, day, "day"


def _about_day(day: date) -> tuple[date, date, date, str]:
    return day - timedelta(days=3), day + timedelta(days=3), day, "about day"


def _in_month(first: date, shown: str = "month") -> tuple[date, date, date, str]:
    return first, _month_end(first), first, shown


def _in_year(year: int, shown: str = "year") -> tuple[date, date, date, str]:
    return date(year, 1, 1), date(year, 12, 31), date(year, 1, 1), shown


def _unshown(first: date, last: date) -> tuple[date, date, date, str]:
    return first, last, first, ""


def _ago(count: int, unit: str, said: date) -> tuple[date, date, date, str] | None:
    if count < 1:
        return None
    if unit == "day":
        return _day(said - timedelta(days=count))
    if unit == "week":
        return _about_day(said - timedelta(weeks=count))
    if unit == "month":
        return _in_month(_month(said, -count), "about month")
    return _in_year(said.year - count, "about year")


def _weekend_before(said: date) -> tuple[date, date, date, str]:
    sunday = said - timedelta(days=(said.weekday() - 6) % 7 or 7)
    return _unshown(sunday - timedelta(days=1), sunday)


def _en(g: dict[str, str | None], said: date) -> tuple[date, date, date, str] | None:
    """The days an English phrase stands for, said on ``said``."""
    offsets = {"before_yesterday": -2, "yesterday": -1, "today": 0, "tomorrow": 1}
    for name, offset in offsets.items():
        if g[name]:
            day = said + timedelta(days=offset)
            return _unshown(day, day) if offset == 0 else _day(day)
    weekday = g["weekday"]
    if weekday:  # the last such weekday before the day it was said
        return _day(said - timedelta(
            days=(said.weekday() - _WEEKDAYS.index(weekday.lower()) - 1) % 7 + 1))
    if g["last_weekend"]:
        return _weekend_before(said)
    if g["last_week"]:
        return _unshown(said - timedelta(days=7), said - timedelta(days=1))
    if g["next_week"]:
        return _unshown(said + timedelta(days=1), said + timedelta(days=7))
    for name, shift in (("last_month", -1), ("next_month", 1)):
        if g[name]:
            return _in_month(_month(said, shift))
    for name, shift in (("last_year", -1), ("next_year", 1)):
        if g[name]:
            return _in_year(said.year + shift)
    n, unit = g["n"], g["unit"]
    if not n or not unit:
        return None
    return _ago(int(n) if n.isdigit() else _EN_COUNTS[n.lower()], unit.lower(), said)


def _zh(g: dict[str, str | None], said: date) -> tuple[date, date, date, str] | None:
    """The days a Chinese phrase stands for, said on ``said``."""
    if g["zh_days"]:
        offset = _ZH_DAY_OFFSETS[g["zh_days"]]
        day = said + timedelta(days=offset)
        return _unshown(day, day) if offset == 0 else _day(day)
    if g["zh_weekday"]:  # that weekday of the week before the one it was said in
        monday = said - timedelta(days=said.weekday() + 7)
        return _day(monday + timedelta(days=_ZH_WEEKDAYS[g["zh_weekday"]]))
    if g["zh_last_weekend"]:
        return _weekend_before(said)
    if g["zh_last_week"]:  # the week before the one it was said in
        monday = said - timedelta(days=said.weekday() + 7)
        return _unshown(monday, monday + timedelta(days=6))
    if g["zh_next_week"]:
        monday = said + timedelta(days=7 - said.weekday())
        return _unshown(monday, monday + timedelta(days=6))
    for name, shift in (("zh_last_month", -1), ("zh_next_month", 1)):
        if g[name]:
            return _in_month(_month(said, shift))
    if g["zh_year"]:
        return _in_year(said.year + _ZH_YEAR_OFFSETS[g["zh_year"]])
    n, unit = g["zh_n"], g["zh_unit"]
    count = zh_number(n) if n else None
    if count is None or not unit:
        return None
    units = {"天": "day", "周": "week", "个星期": "week", "个月": "month", "年": "year"}
    return _ago(count, units[unit], said)


def mentions(text: str, said: date) -> tuple[Mention, ...]:
    """The relative time phrases of ``text`` said on ``said``, in order (one that would fall
    outside the calendar, "99 years ago" said in year 50, is none). Not cached: both
    languages' patterns over a context's thirty candidates take ~0.1 ms."""
    found = []
    for pattern, resolve, chinese in ((_EN, _en, False), (_ZH, _zh, True)):
        for match in pattern.finditer(text):
            try:
                days = resolve(match.groupdict(), said)
            except (ValueError, OverflowError):  # before year 1 or after 9999
                continue
            if days is not None:
                found.append(Mention(match.start(), match.end(), *days, chinese=chinese))
    return tuple(sorted(found, key=lambda m: m.start))


def _shown(mention: Mention) -> str:
    day, precision = mention.anchor, mention.shown.removeprefix("about ")
    about = mention.shown.startswith("about")
    if mention.chinese:
        value = {"day": f"{day.year}年{day.month}月{day.day}日",
                 "month": f"{day.year}年{day.month}月", "year": f"{day.year}年"}[precision]
        return f"（{'约' if about else ''}{value}）"
    value = {"day": short_date(day), "month": f"{_MONTHS[day.month - 1]} {day.year}",
             "year": str(day.year)}[precision]
    return f" ({'about ' if about else ''}{value})"


_DATED = re.compile(r"\s*[(（]\s*(?:about |约)?\d")  # "yesterday (7 May 2023)" is dated already


@lru_cache(maxsize=4096)  # a user's memories come back recall after recall
def dated(text: str, said: datetime) -> str:
    """``text`` with each relative time phrase followed by the date it stands for, reckoned
    from ``said`` (the day the text was said): "(7 May 2023)" after English, "（2023年5月7日）"
    after Chinese. A phrase already followed by a date in brackets is left as it is. A pure
    function of its arguments, so its answers are kept (recall's assembly asks it of every
    item, ~5 % of the ingress's CPU a recall before)."""
    out: list[str] = []
    last = 0
    for mention in mentions(text, said.date()):
        if not mention.shown or _DATED.match(text, mention.end):
            continue
        out.append(text[last:mention.end] + _shown(mention))
        last = mention.end
    return "".join(out) + text[last:]
