"""Relative time phrases shown with the date they stand for, in the recalled context only."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from strata.models import Layer, RecallRequest
from strata.recall.assembly import LayerCandidates, assemble
from strata.recall.recipes import DEFAULT
from strata.recall.relative_dates import dated, mentions
from strata.recall.routing import Route, RouteDecision
from strata.recall.scoring import ScoreBreakdown, ScoredItem

SAID = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)  # a Monday
STRONG = ScoreBreakdown(relevance=0.9)  # a candidate well above every threshold


@pytest.mark.parametrize(("text", "shown"), [
    ("Yesterday I took the kids to the museum.",
     "Yesterday (7 May 2023) I took the kids to the museum."),
    ("I went there last night", "I went there last night (7 May 2023)"),
    ("the day before yesterday it rained", "the day before yesterday (6 May 2023) it rained"),
    ("Last Friday I went to a counseling workshop",
     "Last Friday (5 May 2023) I went to a counseling workshop"),
    ("this past Monday was a holiday", "this past Monday (1 May 2023) was a holiday"),
    ("3 days ago we met", "3 days ago (5 May 2023) we met"),
    ("a couple of days ago", "a couple of days ago (6 May 2023)"),
    ("two weeks ago I ran a race", "two weeks ago (about 24 Apr 2023) I ran a race"),
    ("a week ago", "a week ago (about 1 May 2023)"),
    ("I started a new job last month", "I started a new job last month (Apr 2023)"),
    ("three months ago", "three months ago (about Feb 2023)"),
    ("since I moved from Sweden 4 years ago", "since I moved from Sweden 4 years ago (about 2019)"),
    ("We went to Rome last year and go to Oslo next year",
     "We went to Rome last year (2022) and go to Oslo next year (2024)"),
    ("the show is tomorrow, and next month we move",
     "the show is tomorrow (9 May 2023), and next month (Jun 2023) we move"),
    ("我昨天去了北京", "我昨天（2023年5月7日）去了北京"),
    ("上周五见了她，两周前搬家", "上周五（2023年5月5日）见了她，两周前（约2023年4月24日）搬家"),
    ("去年在上海，3个月前开始学钢琴，上个月换了工作",
     "去年（2022年）在上海，3个月前（约2023年2月）开始学钢琴，上个月（2023年4月）换了工作"),
])
def test_a_phrase_is_followed_by_its_date(text: str, shown: str) -> None:
    assert dated(text, SAID) == shown


@pytest.mark.parametrize("text", [
    "I went camping last week with my fam",  # the week before the line's own date: its label
    "We had a blast last weekend!",
    "today's game was fun, and tonight we rest",
    "The last week of June was busy; the last year of college too",
    "I signed up for a pottery class yesterday (7 May 2023).",  # already dated
    "我上周去了北京，今天回来",
    "Nothing relative here, on 3 March 2023.",
])
def test_what_the_label_already_says_or_a_dated_phrase_is_left_alone(text: str) -> None:
    assert dated(text, SAID) == text


def test_the_context_line_carries_the_date_and_the_item_keeps_what_was_said() -> None:
    said = "Melanie: I signed up for a pottery class yesterday."
    items = [ScoredItem(id="e1", layer=Layer.EPISODES, kind="episode", text=said, score=0.9,
                        breakdown=STRONG, created_at=SAID),
             ScoredItem(id="f1", layer=Layer.FACTS, kind="fact", score=0.8, breakdown=STRONG,
                        created_at=SAID, text="I moved to Lisbon last year")]
    request = RecallRequest(user_id="u", query="when did Melanie sign up for pottery",
                            layers=[Layer.FACTS, Layer.EPISODES])
    response = assemble(request, RouteDecision(route=Route.PERSONAL,
                                               layers=[Layer.FACTS, Layer.EPISODES], reason="t"),
                        None, LayerCandidates(candidates=items), DEFAULT, list)
    assert "pottery class yesterday (7 May 2023)." in response.context
    assert [i.text for i in response.items if i.id == "e1"] == [said]
    # a fact's date is when it happened (its time phrase already moved it): not shifted again
    assert "Lisbon last year" in response.context and "(2022)" not in response.context


@pytest.mark.parametrize(("text", "first", "last"), [
    ("I went camping last week", date(2023, 5, 1), date(2023, 5, 7)),
    ("We had a blast last weekend!", date(2023, 5, 6), date(2023, 5, 7)),
    ("today was fun", date(2023, 5, 8), date(2023, 5, 8)),
    ("two weeks ago", date(2023, 4, 21), date(2023, 4, 27)),
    ("last month", date(2023, 4, 1), date(2023, 4, 30)),
    ("4 years ago", date(2019, 1, 1), date(2019, 12, 31)),
    ("next week", date(2023, 5, 9), date(2023, 5, 15)),
    ("我上周去了北京", date(2023, 5, 1), date(2023, 5, 7)),
    ("上周末", date(2023, 5, 6), date(2023, 5, 7)),
])
def test_the_days_a_phrase_may_stand_for(text: str, first: date, last: date) -> None:
    found = mentions(text, SAID.date())
    assert [(m.first, m.last) for m in found] == [(first, last)]


def test_a_sunday_last_weekend_is_the_one_before() -> None:
    sunday = date(2023, 5, 14)
    assert [(m.first, m.last) for m in mentions("last weekend", sunday)] == [
        (date(2023, 5, 6), date(2023, 5, 7))]


@pytest.mark.parametrize(("text", "shown"), [
    ("a month ago", "a month ago (about Apr 2023)"),
    ("a year ago", "a year ago (about 2022)"),
    ("二十年前我来到上海", "二十年前（约2003年）我来到上海"),
    ("十一天前", "十一天前（2023年4月27日）"),
    ("I went to the gym yesterday (×2)", "I went to the gym yesterday (7 May 2023) (×2)"),
    ("yesterday (with my mom) we hiked", "yesterday (7 May 2023) (with my mom) we hiked"),
])
def test_counts_and_brackets_that_are_not_dates(text: str, shown: str) -> None:
    assert dated(text, SAID) == shown


@pytest.mark.parametrize("text", [
    "over the last year I've learned a lot",  # a stretch of time, not the calendar's year
    "in the last month I ran 100 km",
    "the last Friday before Christmas",
    "half a year ago",
    "about 1.5 years ago I moved",
    "我2019年前往日本工作",  # 前往: went to, not "19 years ago"
    "目前天气很好，然后天亮了，以前天天加班，晚上月亮很圆",
    "123天前",
])
def test_words_that_only_look_like_a_phrase_are_left_alone(text: str) -> None:
    assert dated(text, SAID) == text


@pytest.mark.parametrize(("text", "said"), [
    ("I moved here last year", datetime(1, 1, 1, tzinfo=timezone.utc)),
    ("99 years ago", datetime(50, 6, 1, tzinfo=timezone.utc)),
    ("next month, and tomorrow", datetime(9999, 12, 31, tzinfo=timezone.utc)),
])
def test_a_date_at_the_ends_of_the_calendar_is_no_error(text: str, said: datetime) -> None:
    assert dated(text, said) == text
    assert mentions(text, said.date()) == ()
