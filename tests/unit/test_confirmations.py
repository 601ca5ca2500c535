"""A hedged statement confirmed in the next turn becomes a fact (issue #36): "I might move to
Berlin" … "yes, it's settled" — read by the learned detector behind an affirmation cue, in
English and Chinese. The sentences are this file's own, in no corpus."""

from __future__ import annotations

import pytest

from strata.extract.intent_model import confirm_reader
from strata.extract.rules import RuleExtractor
from strata.extract.worker import ExtractionWorker
from strata.models import MemoryKind, MemoryStatus, Role, Scope, Turn
from strata.shard.service import SessionShardService
from strata.stores.redis import RedisStore

pytest.importorskip("sklearn")

U = Scope(tenant="t", user="u")
CASES = [
    ("I might move to Berlin next year.", "Yes, it's settled, we're going.", "location.home",
     "Berlin"),
    ("我好像对花生过敏。", "是的，医生确认了。", "constraint.allergy:花生", "allergic"),
]


def _turns(*texts: tuple[Role, str]) -> list[Turn]:
    return [Turn(user_id="u", session_id="s1", turn_id=f"s1:{i}", role=role, content=text)
            for i, (role, text) in enumerate(texts, start=1)]


def _stated(candidates: list, key: str) -> list:  # type: ignore[type-arg]
    return [c for c in candidates if c.key == key and c.confidence >= 0.6]


@pytest.mark.parametrize(("hedged", "confirmation", "key", "value"), CASES)
def test_a_confirmed_hedge_is_stated_and_without_the_reader_it_waits(
        hedged: str, confirmation: str, key: str, value: str) -> None:
    turns = _turns((Role.USER, hedged), (Role.ASSISTANT, "Noted."), (Role.USER, confirmation))
    stated = _stated(RuleExtractor(reads_confirm=confirm_reader).extract(turns), key)
    assert [(c.value, c.provenance.turn_ids) for c in stated] == [(value, ["s1:3"])]
    assert _stated(RuleExtractor().extract(turns), key) == []  # the rules alone: observed


@pytest.mark.parametrize("after", [
    "What's the weather like there?",  # a question confirms nothing
    "I went to the gym today.",  # another matter, no affirmation
    "今天天气不错。",  # a remark, no affirmation
    pytest.param("Right, and my sister lives in Porto.", marks=pytest.mark.xfail(
        strict=True, reason="a known limit: an affirmation that goes on to another matter "
                            "reads as a confirmation")),
])
def test_what_is_not_a_confirmation_leaves_the_hedge_observed(after: str) -> None:
    turns = _turns((Role.USER, "I might move to Berlin next year."), (Role.USER, after))
    candidates = RuleExtractor(reads_confirm=confirm_reader).extract(turns)
    assert _stated(candidates, "location.home") == [], after


def test_the_confirmed_fact_is_active_after_the_session_s_extraction(
        shard: SessionShardService, redis_store: RedisStore) -> None:
    hedged, confirmation, key, value = CASES[0]
    for role, text in (("user", hedged), ("assistant", "Exciting!"), ("user", confirmation)):
        shard.append_turn(U, "s1", role, text)
    shard.close(U, "s1")
    ExtractionWorker(redis_store.queues, redis_store.sessions,
                     RuleExtractor(reads_confirm=confirm_reader), shard.write_longterm,
                     "w").run_once()
    facts = [m for m in shard.longterm.list_items(U, MemoryKind.FACT) if m.key == key]
    active = [m for m in facts if m.status is MemoryStatus.ACTIVE]
    assert [m.value for m in active] == [value], facts


def test_one_person_does_not_confirm_what_another_said() -> None:
    def said(n: int, who: str, text: str) -> Turn:
        return Turn(user_id="u", session_id="s1", turn_id=f"s1:{n}", role=Role.USER,
                    content=text, metadata={"speaker": who})

    extractor = RuleExtractor(reads_confirm=confirm_reader)
    others = [said(1, "Ann", "I might move to Berlin next year."),
              said(2, "Bo", "Yes, it's settled, we're going.")]
    assert _stated(extractor.extract(others), "location.home") == []
    own = [said(1, "Ann", "I might move to Berlin next year."),
           said(2, "Ann", "Yes, it's settled, we're going.")]
    assert [c.speaker for c in _stated(extractor.extract(own), "location.home")] == ["Ann"]
