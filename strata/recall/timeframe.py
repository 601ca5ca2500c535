"""Dates a query names ("on 13 October, 2023", "in July 2022", "in May", "2023年10月"), so
that recall can prefer what happened then.

Only absolute dates: a relative one ("last week") needs the time the question refers to,
which a stored conversation does not give. A day matches its neighbours too (a turn written
late in the evening may be stored on the next day in UTC).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

__all__ = ["Period", "mentioned_periods"]

_ABBR = {m: i for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)}
_MONTH = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|" \
         r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"


@dataclass(frozen=True)
class Period:
    """A day, a month (of one year, or of any year) or a year."""

    year: int | None
    month: int | None = None
    day: int | None = None

    def contains(self, when: datetime) -> bool:
        if self.day is not None and self.month is not None and self.year is not None:
            try:
                return abs((when.date() - date(self.year, self.month, self.day)).days) <= 1
            except ValueError:  # 31 February
                return False
        if self.month is not None and when.month != self.month:
            return False
        return self.year is None or when.year == self.year

    def span(self) -> tuple[date, date] | None:
        """The days it covers, as (first, the day after the last): a day with its neighbours
        (as ``contains``), a month of a year, a year; None for a month of any year."""
        if self.year is None:
            return None
        if self.month is None:
            return date(self.year, 1, 1), date(self.year + 1, 1, 1)
        if self.day is None:
            after = (date(self.year + 1, 1, 1) if self.month == 12
                     else date(self.year, self.month + 1, 1))
            return date(self.year, self.month, 1), after
        try:
            day = date(self.year, self.month, self.day)
        except ValueError:
            return None
        return day - timedelta(days=1), day + timedelta(days=2)

    def overlaps(self, first: date, last: date) -> bool:
        """Whether a span of days from ``first`` to ``last`` no longer than the period falls
        in it (a day: or its neighbours, as in ``contains``): "last week" is in June, "last
        year" is not in a day of it."""
        try:
            if self.day is not None and self.month is not None and self.year is not None:
                day = date(self.year, self.month, self.day)
                return (last - first).days <= 2 and (
                    first - timedelta(days=1) <= day <= last + timedelta(days=1))
            if self.month is None:
                return self.year is not None and first.year == last.year == self.year
            if (last - first).days > 30:
                return False
            return any(d.month == self.month and self.year in (None, d.year)
                       for d in (first, last))
        except (ValueError, OverflowError):  # 31 February; a span at the calendar's ends
            return False


def _month(word: str) -> int:
    return _ABBR[word[:3].lower()]


def mentioned_periods(query: str) -> list[Period]:
    """The most precise absolute dates the query names (days, else months, else years)."""
    q = query.lower()
    days = [Period(int(y), _month(m), int(d)) for d, m, y in re.findall(
        rf"\b(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?{_MONTH},? (\d{{4}})\b", q)]
    days += [Period(int(y), _month(m), int(d)) for m, d, y in re.findall(
        rf"\b{_MONTH}\.? (\d{{1,2}})(?:st|nd|rd|th)?,? (\d{{4}})\b", q)]
    days += [Period(int(y), int(m), int(d)) for y, m, d in re.findall(
        r"\b(\d{4})-(\d{2})-(\d{2})\b", q)]
    days += [Period(int(y), int(m), int(d)) for y, m, d in re.findall(
        r"(\d{4})年(\d{1,2})月(\d{1,2})[日号]", q)]
    if days:
        return days
    months = [Period(int(y), _month(m)) for m, y in re.findall(
        rf"\b{_MONTH},? (\d{{4}})\b", q)]
    months += [Period(int(y), int(m)) for y, m in re.findall(r"(\d{4})年(\d{1,2})月", q)]
    if months:
        return months
    # a month without a year only after "in"/"during" ("in May"; "may" is also a verb)
    months = [Period(None, _month(m)) for m in re.findall(
        rf"\b(?:in|during|early|late|mid)[ -]{_MONTH}\b", q)]
    if months:
        return months
    return [Period(int(y)) for y in re.findall(r"\b(?:in|during|of) ((?:19|20)\d\d)\b", q)] + [
        Period(int(y)) for y in re.findall(r"((?:19|20)\d\d)年", q)]
