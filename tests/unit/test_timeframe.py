"""Dates named in a query, and recall preferring what happened then."""

from __future__ import annotations

from datetime import datetime, timezone

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
