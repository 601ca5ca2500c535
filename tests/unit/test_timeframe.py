"""Dates named in a query, and recall preferring what happened then."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from strata.models import SearchHit, StoredRecord
from strata.recall.granularity import fuse_granularities
from strata.recall.recipes import RECIPES
from strata.recall.timeframe import Period, mentioned_periods


@pytest.mark.parametrize(("query", "periods"), [
    ("What painting did Melanie show on October 13, 2023?", [Period(2023, 10, 13)]),
    ("What did Gina find on 1 February, 2023?", [Period(2023, 2, 1)]),
    ("what happened on the 3rd of June, 2023", [Period(2023, 6, 3)]),
    ("notes from 2023-10-13 please", [Period(2023, 10, 13)]),
    ("我2023年10月13日说了什么", [Period(2023, 10, 13)]),
    ("Where did Joanna travel to in July 2022?", [Period(2022, 7)]),
    ("2023年10月我在哪", [Period(2023, 10)]),
    ("When did Melanie go camping in June?", [Period(None, 6)]),
    ("How often did she go to the beach in 2023?", [Period(2023)]),
    ("What may I cook tonight?", []),
    ("What did I say last week?", []),
])
def test_mentioned_periods(query: str, periods: list[Period]) -> None:
    assert mentioned_periods(query) == periods


def test_a_day_matches_its_neighbours_and_a_month_any_year() -> None:
    at = datetime(2023, 10, 14, 23, 0, tzinfo=timezone.utc)
    assert Period(2023, 10, 13).contains(at) and not Period(2023, 10, 11).contains(at)
    assert Period(None, 10).contains(at) and not Period(2022, 10).contains(at)
    assert not Period(2023, 2, 31).contains(at)


def turn(rid: str, text: str, when: str) -> SearchHit:
    record = StoredRecord(id=rid, text=text, created_at=1.0, updated_at=1.0, payload={
        "event_time": when, "provenance": {"session_id": rid, "turn_ids": [f"{rid}:1"]}})
    return SearchHit(record=record, score=0.0, parts={"dense": 0.5, "lexical": 3.0})


def test_turns_from_the_named_date_come_first() -> None:
    hits = [turn("a", "I painted a sunset", "2023-05-08T13:56:00Z"),
            turn("b", "I painted a sunrise", "2023-10-13T10:00:00+00:00")]
    out = fuse_granularities(hits, [], lambda ids: [], "What did she paint on 13 October, 2023?",
                             RECIPES["hybrid"])
    assert [h.record.id for h in out] == ["b", "a"]
    assert out[0].parts["time"] == RECIPES["hybrid"].time_boost and "time" not in out[1].parts
    undated = fuse_granularities(hits, [], lambda ids: [], "What did she paint?",
                                 RECIPES["hybrid"])
    assert undated[0].score == undated[1].score


def test_a_period_overlaps_a_span_of_days_no_longer_than_itself() -> None:
    late_june = (date(2023, 6, 25), date(2023, 7, 1))
    assert Period(None, 6).overlaps(*late_june) and Period(2023, 7).overlaps(*late_june)
    assert not Period(2023, 5).overlaps(*late_june) and not Period(2022, 6).overlaps(*late_june)
    assert not Period(2023, 7, 1).overlaps(*late_june)  # a week is not a day
    one_day = (date(2023, 7, 1), date(2023, 7, 1))
    assert Period(2023, 7, 2).overlaps(*one_day)  # a day's neighbour, as in contains
    assert not Period(2023, 7, 3).overlaps(*one_day)
    assert Period(None, 1).overlaps(date(2022, 12, 20), date(2023, 1, 2))
    year_2022 = (date(2022, 1, 1), date(2022, 12, 31))
    assert Period(2022).overlaps(*year_2022) and Period(2022).overlaps(*late_june) is False
    assert not Period(2022, 6).overlaps(*year_2022) and not Period(None, 6).overlaps(*year_2022)
    assert not Period(2023, 2, 31).overlaps(*late_june)
    assert not Period(2023, 5, 3).overlaps(date.min, date.min)


def test_a_turn_speaking_of_the_named_month_comes_first_with_time_mentions() -> None:
    hits = [turn("a", "We went camping in the mountains", "2023-07-20T13:56:00Z"),
            turn("b", "We went camping last week", "2023-07-02T10:00:00+00:00")]
    query = "When did Melanie go camping in June?"
    mentioned = RECIPES["hybrid"].model_copy(update={"time_mentions": True})
    out = fuse_granularities(hits, [], lambda ids: [], query, mentioned)
    assert [h.record.id for h in out] == ["b", "a"] and out[0].parts["time"] > 0
    said_only = RECIPES["hybrid"].model_copy(update={"time_mentions": False})
    assert all("time" not in h.parts for h in fuse_granularities(hits, [], lambda ids: [],
                                                                  query, said_only))
