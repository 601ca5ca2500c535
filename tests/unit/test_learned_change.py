"""A change the rules do not read, read by the learned detector at the turn (issue #36):
the fact the rules found in it supersedes the current value of its key. Plain declarations
("I live in Denver.") are no change — the learned reading once took them for one — and
stand beside the old value as before. The sentences are this file's own, in no corpus."""

from __future__ import annotations

import pytest

from strata.extract.base import Candidate, Intent
from strata.extract.intent_model import (
    LABEL_THRESHOLDS,
    CombinedIntents,
    Utterance,
    as_override,
    packaged_detector,
)
from strata.extract.rules import detect_intent
from strata.layers.memory_models import MemoryCreate
from strata.layers.summarize import RuleSummarizer
from strata.models import MemoryKind, MemoryStatus, Provenance, Scope
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.redis import RedisStore

pytest.importorskip("sklearn")

U = Scope(tenant="t", user="u")
CHANGES = [  # (old value, the turn, new value): no change word the rules know
    ("work.employer", "Globex", "These days I work at Initech instead of Globex.", "Initech"),
    ("work.employer", "腾讯", "我现在在阿里上班了，不在腾讯了。", "阿里"),
    ("location.home", "上海", "我现在住在杭州了，不在上海了。", "杭州"),
]
DECLARATIONS = [  # a plain statement of a value: no change
    ("location.home", "Denver", "I live in Austin."),
    ("location.home", "上海", "我住在杭州。"),
    ("work.employer", "Globex", "I work at Initech."),
    ("work.employer", "腾讯", "我在阿里上班。"),
]


def facts(shard: SessionShardService, key: str) -> dict[str, MemoryStatus]:
    return {m.value or "": m.status for m in shard.longterm.list_items(U, MemoryKind.FACT)
            if m.key == key}


@pytest.mark.parametrize(("key", "old", "text", "new"), CHANGES)
def test_a_change_no_rule_reads_supersedes_the_old_value(
        shard: SessionShardService, key: str, old: str, text: str, new: str) -> None:
    shard.create_memory(U, MemoryCreate(kind=MemoryKind.FACT, key=key, value=old))
    assert detect_intent(text) is Intent.NONE  # the rules read no change here
    assert packaged_detector().read([Utterance(text)])[0].intent == "change"
    shard.append_turn(U, "s1", "user", text)
    assert facts(shard, key) == {old: MemoryStatus.SUPERSEDED, new: MemoryStatus.ACTIVE}


@pytest.mark.parametrize(("key", "old", "text"), DECLARATIONS)
def test_a_plain_declaration_supersedes_nothing(
        shard: SessionShardService, key: str, old: str, text: str) -> None:
    shard.create_memory(U, MemoryCreate(kind=MemoryKind.FACT, key=key, value=old))
    assert packaged_detector().read([Utterance(text)])[0].intent != "change", text
    shard.append_turn(U, "s1", "user", text)
    assert facts(shard, key) == {old: MemoryStatus.ACTIVE}


def test_with_the_rules_only_the_same_change_supersedes_nothing(
        redis_store: RedisStore, shard: SessionShardService) -> None:
    lt = shard.longterm
    rules_only = SessionShardService(0, Settings(intent_detector="rules"), redis_store,
                                     RuleSummarizer(), longterm=lambda: lt)
    key, old, text, _ = CHANGES[1]
    rules_only.create_memory(U, MemoryCreate(kind=MemoryKind.FACT, key=key, value=old))
    rules_only.append_turn(U, "s1", "user", text)
    assert facts(rules_only, key) == {old: MemoryStatus.ACTIVE}


def test_a_change_needs_its_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    detector = packaged_detector()
    assert isinstance(detector, CombinedIntents)
    assert detector.thresholds == LABEL_THRESHOLDS and LABEL_THRESHOLDS["change"] > 0.0
    said = Utterance(CHANGES[0][2])
    probability = detector.read([said])[0].confidence
    monkeypatch.setitem(detector.thresholds, "change", probability + 0.01)
    assert detector.read([said])[0].intent != "change"
    assert not detector.reads_change(said)


def test_only_a_stated_keyed_fact_becomes_an_override() -> None:
    said = Provenance(session_id="s1", turn_ids=["t1"])
    fact = Candidate(kind=MemoryKind.FACT, key="work.employer", value="Initech", text="x",
                     confidence=0.85, provenance=said)
    assert as_override(fact).intent is Intent.OVERRIDE
    hedged = fact.model_copy(update={"confidence": 0.45})  # "I might work at Initech"
    episode = Candidate(kind=MemoryKind.EPISODE, text="x", provenance=said)
    remember = fact.model_copy(update={"intent": Intent.REMEMBER})
    for cand in (hedged, episode, remember):
        assert as_override(cand) == cand
