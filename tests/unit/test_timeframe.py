"""Dates named in a query, and recall preferring what happened then."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from strata.models import Collection, Layer, RecallRequest, Scope, SearchHit, StoredRecord
from strata.recall.granularity import fuse_granularities
from strata.recall.recipes import RECIPES, RecallRecipe, without
from strata.recall.service import RecallService
from strata.recall.stages import Stage
from strata.recall.timeframe import Period, mentioned_periods
from strata.stores.embedders import HashEmbedder
from strata.testing.fake_vectors import FakeVectorStore

EMB = HashEmbedder(64)


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


def test_a_period_spans_its_days() -> None:
    assert Period(2022, 11, 9).span() == (date(2022, 11, 8), date(2022, 11, 11))  # ± a day
    assert Period(2022, 12).span() == (date(2022, 12, 1), date(2023, 1, 1))
    assert Period(2023).span() == (date(2023, 1, 1), date(2024, 1, 1))
    assert Period(None, 6).span() is None and Period(2023, 2, 31).span() is None


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
    assert out[0].turn is not None and out[1].turn is not None
    assert out[0].turn.term("time_boost") == RECIPES["hybrid"].time_boost
    assert out[1].turn.term("time_boost") is None
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
    assert [h.record.id for h in out] == ["b", "a"]
    assert out[0].turn is not None and (out[0].turn.term("time_boost") or 0) > 0
    said_only = RECIPES["hybrid"].model_copy(update={"time_mentions": False})
    assert all(h.turn is not None and h.turn.term("time_boost") is None
               for h in fuse_granularities(hits, [], lambda ids: [], query, said_only))


def test_a_turn_said_on_the_named_day_is_found_though_it_shares_no_words() -> None:
    store = FakeVectorStore()
    store.ensure_collections(EMB.dim)
    user = Scope(tenant="t", user="nate")
    said = [("2022-11-02T10:00:00Z", f"What dish should I make? Nate's dish number {i}")
            for i in range(12)]
    said.append(("2022-11-09T10:00:00Z", "Wild week! Tried out some cooking instead."))
    records = [StoredRecord(
        id=f"e{i}", text=text, vector=EMB.encode([text])[0].tolist(), created_at=1.0,
        updated_at=1.0, payload={"kind": "episode", "event_time": when,
                                 "provenance": {"session_id": f"s{i}", "turn_ids": [f"s{i}:1"]}})
        for i, (when, text) in enumerate(said)]
    store.upsert(Collection.EPISODES, user, records)
    query = "What dish did Nate make on 9 November, 2022?"
    narrow = RECIPES["hybrid"].model_copy(update={"candidates_per_layer": 5})
    request = RecallRequest(user_id="nate", query=query, layers=[Layer.EPISODES])
    vector = EMB.encode([query])[0].tolist()

    def found(recipe: RecallRecipe) -> list[str]:
        service = RecallService(store, recipe, parallelism=1)
        return [i.text for i in service.recall(user, request, vector).items]

    assert any("cooking" in t for t in found(narrow))
    assert not any("cooking" in t for t in found(narrow.model_copy(
        update={"stages": without(Stage.SAID_THEN)})))
