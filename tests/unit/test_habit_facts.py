"""A stable habit becomes a fact (``habit.<activity>``); a one-off event, a past habit, a
plan, a hypothetical or advice to someone else stays an episode or nothing (#36)."""

from __future__ import annotations

import pytest

from strata.extract.rules import RuleExtractor
from strata.layers.semantic import FactStore
from strata.models import MemoryKind, MemoryStatus, Role, Scope, Turn
from strata.stores.embedders import HashEmbedder
from strata.testing.fake_vectors import FakeVectorStore

U = Scope(tenant="t", user="u")


def _turn(text: str) -> Turn:
    return Turn(turn_id=f"s:{abs(hash(text)) % 1000}", session_id="s", user_id="u",
                role=Role.USER, content=text)


def _habits(text: str) -> dict[str, str]:
    return {c.key: c.value or "" for c in RuleExtractor().extract([_turn(text)])
            if c.kind is MemoryKind.FACT and (c.key or "").startswith("habit.")}


@pytest.mark.parametrize(("text", "key", "value"), [
    ("I run every morning.", "habit.run", "run every morning"),
    ("I go for a run every morning before work.", "habit.run", "go for a run every morning"),
    ("I usually walk my dog twice a day.", "habit.walk my dog", "walk my dog twice a day"),
    ("Every Sunday I call my mom.", "habit.call my mom", "call my mom Every Sunday"),
    ("I play tennis with friends on Saturdays.", "habit.play tennis",
     "play tennis with friends on Saturdays"),
    ("我每天早上跑步。", "habit.跑步", "每天早上跑步"),
    ("我每周三去游泳。", "habit.游泳", "每周三去游泳"),
    ("我习惯睡前看书。", "habit.看书", "睡前看书"),
    ("我有每天写日记的习惯。", "habit.写日记", "每天写日记"),
])
def test_a_stable_habit_is_a_fact(text: str, key: str, value: str) -> None:
    assert _habits(text) == {key: value}


@pytest.mark.parametrize("text", [
    "I went for a run yesterday.",
    "I ran five miles this morning, legs are dead.",
    "You should run every morning, it clears the head.",
    "If I ran every day I would be much fitter.",
    "I used to swim every weekend.",
    "I'm going to start running every morning.",
    "Do you run every morning?",
    "My sister jogs every morning.",
    "我昨天跑步了。",
    "你应该每天跑步。",
    "我以前每天都游泳。",
    "我打算每天早上跑步。",
    "他每天早上跑步。",
])
def test_a_one_off_a_plan_or_someone_else_s_routine_is_no_habit(text: str) -> None:
    assert _habits(text) == {}


@pytest.mark.parametrize("text", ["I went for a run yesterday, it was great.",
                                  "我昨天晚上去跑步了，跑了五公里。"])
def test_a_one_off_event_stays_an_episode(text: str) -> None:
    kinds = [c.kind for c in RuleExtractor().extract([_turn(text)])]
    assert kinds == [MemoryKind.EPISODE]


@pytest.mark.parametrize("text", ["I swim every Tuesday at the community pool.",
                                  "我每天晚上都练一个小时钢琴。"])
def test_a_habit_is_an_active_fact_in_the_store(text: str) -> None:
    store = FakeVectorStore()
    store.ensure_collections(64)
    facts = FactStore(store, HashEmbedder(64))
    written = [facts.apply(U, c).item for c in RuleExtractor().extract([_turn(text)])
               if c.kind is MemoryKind.FACT and c.key]
    assert [(i.key or "").split(".")[0] for i in written] == ["habit"]
    assert written[0].status is MemoryStatus.ACTIVE
