"""The kind of answer a question asks for (``strata.recall.answer_types``), and recall
preferring, of two turns about the same thing, the one that holds such an answer."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest

from strata.extract.terms import word_pattern
from strata.models import Layer, SearchHit, StoredRecord
from strata.recall.answer_types import Answer, asked, holds
from strata.recall.granularity import fuse_granularities
from strata.recall.recipes import DEFAULT, without
from strata.recall.scoring import ScoredItem, score_hits
from strata.recall.stages import Stage

PEOPLE = ["Melanie", "Caroline"]


@pytest.mark.parametrize(("query", "answer"), [
    ("How many hikes has Joanna been on?", Answer.NUMBER),
    ("How long has she been practising?", Answer.NUMBER),
    ("我去过几次日本？", Answer.NUMBER),
    ("When did Melanie paint a sunrise?", Answer.TIME),
    ("In what year did he start?", Answer.TIME),
    ("你是什么时候搬家的？", Answer.TIME),
    ("Where did Caroline move from?", Answer.PLACE),
    ("Which cities has Jon visited?", Answer.PLACE),
    ("他现在住在哪里？", Answer.PLACE),
    ("What book did Melanie read?", Answer.NAME),
    ("What is the name of her dog?", Answer.NAME),
    ("我上次看的那部电影叫什么？", Answer.NAME),
    ("Who did Melanie go camping with?", Answer.PERSON),
    ("是谁推荐你去的？", Answer.PERSON),
    ("What activities does Melanie partake in?", None),
    ("Why did Caroline start painting?", None),
    ("Would Caroline pursue counseling?", None),
])
def test_the_answer_a_question_asks_for(query: str, answer: Answer | None) -> None:
    assert asked(query) == answer


@pytest.mark.parametrize(("answer", "text", "found"), [
    (Answer.NUMBER, "Joanna: We've done four hikes so far", True),
    (Answer.NUMBER, "Joanna: Hiking is my favourite thing", False),
    (Answer.NUMBER, "我一共去了3次", True),
    (Answer.TIME, "Melanie: I painted it last Friday", True),
    (Answer.TIME, "Melanie: I love painting sunrises", False),
    (Answer.TIME, "我去年搬的家", True),
    (Answer.PLACE, "Caroline: I moved here from Sweden", True),
    (Answer.PLACE, "Caroline: Thanks to Melanie, I feel at home", False),  # a person
    (Answer.PLACE, "我搬到上海了", True),
    (Answer.NAME, "Melanie: Hey Caroline, I just finished Charlotte's Web", True),
    (Answer.NAME, "Melanie: Hey Caroline, I just finished a great book", False),
    (Answer.NAME, "Melanie: I loved “the little prince”, honestly", False),
    (Answer.NAME, "我最近在看《三体》", True),
    (Answer.PERSON, "Melanie: I went camping with my sister", True),
    (Answer.PERSON, "Melanie: We went camping with Jon and the kids", True),
    (Answer.PERSON, "Melanie: Camping was great, Caroline", False),  # the people speaking
    (Answer.PERSON, "是我朋友推荐的", True),
])
def test_whether_a_turn_holds_such_an_answer(answer: Answer, text: str, found: bool) -> None:
    assert holds(answer, text, PEOPLE) is found


def turn(rid: str, text: str) -> SearchHit:
    record = StoredRecord(id=rid, text=text, created_at=1.0, updated_at=1.0, payload={
        "event_time": "2023-05-08T13:56:00Z", "metadata": {"speaker": "Melanie"},
        "provenance": {"session_id": rid, "turn_ids": [f"{rid}:1"]}})
    return SearchHit(record=record, score=0.0, parts={"dense": 0.5, "lexical": 3.0})


def test_of_two_equal_turns_the_one_holding_the_answer_comes_first() -> None:
    hits = [turn("a", "Melanie: Do you like hiking? We should go hiking together"),
            turn("b", "Melanie: We went hiking four times this summer")]
    query = "How many times has Melanie gone hiking?"
    out = fuse_granularities(hits, [], lambda ids: [], query, DEFAULT)
    assert DEFAULT.answer_boost > 0
    assert [h.record.id for h in out] == ["b", "a"]
    assert out[0].turn is not None and out[1].turn is not None
    assert out[0].turn.term("answer_boost") == DEFAULT.answer_boost
    assert out[1].turn.term("answer_boost") is None
    plain = fuse_granularities(hits, [], lambda ids: [], query, DEFAULT.model_copy(
        update={"stages": without(Stage.ANSWER_BOOST)}))  # the stage left out
    assert all(h.turn is not None and h.turn.term("answer_boost") is None for h in plain)


def test_the_scored_candidate_shows_the_boost_it_got() -> None:
    hit = fuse_granularities([turn("b", "Melanie: We went hiking four times")], [],
                             lambda ids: [], "How many times did Melanie go hiking?",
                             DEFAULT)[0]
    item = ScoredItem(id="b", layer=Layer.EPISODES, kind="episode", text=hit.record.text)
    [scored] = score_hits(Layer.EPISODES, "episode", [hit], [item], DEFAULT,
                          datetime(2023, 5, 9, tzinfo=timezone.utc))
    assert scored.parts["answer"] == DEFAULT.answer_boost  # the debug output's flat parts
    assert scored.breakdown.by_stage(DEFAULT)["answer_boost"] == DEFAULT.answer_boost


@pytest.mark.parametrize(("word", "text", "found"), [
    ("NY", "I moved to NY last year", True),
    ("NY", "my company", False),             # not inside a longer word
    ("Mel", "Melanie said hi", False),
    ("小明", "我和小明去了北京", True),         # Chinese has no spaces around a name
    ("上海", "我搬到上海了", True),
])
def test_a_word_is_found_as_a_word(word: str, text: str, found: bool) -> None:
    assert (re.search(word_pattern(word), text, re.I) is not None) is found


def test_a_chinese_speakers_name_is_no_person_in_the_answer() -> None:
    assert not holds(Answer.PERSON, "小明：和小明一起", ["小明"])
    assert holds(Answer.PERSON, "小明：和朋友一起", ["小明"])
