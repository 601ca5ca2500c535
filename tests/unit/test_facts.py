"""Fact conflict rules end to end on the extractor + FactStore (in-memory store)."""

from __future__ import annotations

import pytest

from strata.conflict import Action
from strata.extract.base import Candidate, Intent
from strata.extract.rules import RuleExtractor
from strata.layers.semantic import FactStore
from strata.models import MemoryKind, MemoryStatus, Provenance, Role, Scope, Source, Turn
from strata.stores.embedders import HashEmbedder
from strata.testing.fake_vectors import FakeVectorStore

U = Scope(tenant="t", user="u")


@pytest.fixture
def facts() -> FactStore:
    store = FakeVectorStore()
    store.ensure_collections(64)
    return FactStore(store, HashEmbedder(64))


def said(facts: FactStore, text: str, session: str = "s1", role: Role = Role.USER
         ) -> list[Action]:
    turn = Turn(turn_id=f"{session}:{abs(hash(text)) % 1000}", session_id=session, user_id="u",
                role=role, content=text)
    return [facts.apply(U, c).decision.action for c in RuleExtractor().extract([turn])
            if c.kind is MemoryKind.FACT and c.key]


def test_move_supersedes_and_keeps_history(facts: FactStore) -> None:
    assert said(facts, "我住在北京") == [Action.INSERT]
    assert said(facts, "我搬到上海了", session="s2") == [Action.SUPERSEDE]
    current = facts.current(U, "location.home")
    assert current is not None and current.value == "上海"
    history = facts.history(U, current.id)
    assert [(v.value, v.status) for v in history] == [
        ("北京", MemoryStatus.SUPERSEDED), ("上海", MemoryStatus.ACTIVE)]
    assert history[0].superseded_by == current.id and history[0].valid_to is not None


def test_explicit_override(facts: FactStore) -> None:
    said(facts, "I live in Boston.")
    assert said(facts, "Forget what I said, I live in Denver.", session="s2") == [
        Action.SUPERSEDE]
    assert facts.current(U, "location.home").value == "Denver"  # type: ignore[union-attr]


def test_implicit_change_keeps_both_newer_first(facts: FactStore) -> None:
    said(facts, "I live in Boston.")
    assert said(facts, "I live in Denver.", session="s2") == [Action.KEEP_BOTH]
    versions = facts.versions(U, "location.home")
    assert [v.status for v in versions] == [MemoryStatus.ACTIVE, MemoryStatus.ACTIVE]
    assert facts.current(U, "location.home").value == "Denver"  # type: ignore[union-attr]


def test_low_confidence_needs_two_confirmations(facts: FactStore) -> None:
    assert said(facts, "我可能下个月离职", session="a") == [Action.OBSERVE]
    assert facts.current(U, "work.status") is None
    assert said(facts, "我可能下个月离职", session="b") == [Action.REINFORCE]
    assert facts.current(U, "work.status") is None
    assert said(facts, "我可能下个月离职", session="c") == [Action.PROMOTE]
    assert facts.current(U, "work.status") is not None


def test_weak_value_does_not_override_confident_one(facts: FactStore) -> None:
    said(facts, "I live in Boston.")
    assert said(facts, "Maybe I live in Denver.", session="s2") == [Action.PENDING]
    assert facts.current(U, "location.home").value == "Boston"  # type: ignore[union-attr]


def test_scope_tags_separate_partial_conflicts(facts: FactStore) -> None:
    base = Candidate(kind=MemoryKind.FACT, key="preference.language", value="Python",
                     text="I prefer Python", provenance=Provenance(session_id="s"))
    facts.apply(U, base)
    java = base.model_copy(update={"value": "Java", "text": "In project Atlas I use Java",
                                   "scope_tags": ["project:atlas"]})
    assert facts.apply(U, java).decision.action is Action.INSERT
    assert facts.current(U, "preference.language").value == "Python"  # type: ignore[union-attr]
    assert facts.current(U, "preference.language",  # type: ignore[union-attr]
                         ["project:atlas"]).value == "Java"


def test_redelivery_is_a_duplicate_not_a_confirmation(facts: FactStore) -> None:
    weak = Candidate(kind=MemoryKind.FACT, key="k", value="v", text="maybe v",
                     confidence=0.4, provenance=Provenance(session_id="s", turn_ids=["s:1"]))
    assert facts.apply(U, weak).decision.action is Action.OBSERVE
    for _ in range(3):
        assert facts.apply(U, weak).decision.action is Action.DUPLICATE
    assert facts.versions(U, "k")[0].status is MemoryStatus.OBSERVATION


def test_assistant_guesses_never_become_facts(facts: FactStore) -> None:
    assert said(facts, "You might be from the south, I guess you live in Texas.",
                role=Role.ASSISTANT) == []
    inferred = Candidate(kind=MemoryKind.FACT, key="identity.origin", value="south",
                         text="from the south", source=Source.INFERRED, confidence=0.9,
                         provenance=Provenance(session_id="s"))
    assert facts.apply(U, inferred).decision.action is Action.OBSERVE


def test_remember_intent_note() -> None:
    turn = Turn(turn_id="1", session_id="s", user_id="u", role=Role.USER,
                content="记住：周五之前要交季度报告")
    found = RuleExtractor().extract([turn])
    assert any(c.intent is Intent.REMEMBER and c.key and "季度报告" in (c.value or "")
               for c in found)


def test_two_group_rule_and_never_crashing_extractor() -> None:
    turn = Turn(turn_id="1", session_id="s", user_id="u", role=Role.USER,
                content="Remember that my favourite colour is teal.")
    found = {c.key: c.value for c in RuleExtractor().extract([turn]) if c.key}
    assert found["favorite.colour"] == "teal"


def _fact(key: str, value: str, session: str, **extra: object) -> Candidate:
    return Candidate(kind=MemoryKind.FACT, key=key, value=value, text=f"{key} {value}",
                     provenance=Provenance(session_id=session), **extra)  # type: ignore[arg-type]


def test_an_inferred_fact_asked_to_be_remembered_never_overrides_a_stated_one(
        facts: FactStore) -> None:
    facts.apply(U, _fact("diet", "vegetarian", "a", confidence=0.95, intent=Intent.REMEMBER))
    guess = _fact("diet", "pescatarian", "b", confidence=0.4, source=Source.INFERRED,
                  intent=Intent.REMEMBER)
    assert facts.apply(U, guess).decision.action is Action.PENDING
    for n, session in enumerate("cdef"):  # repeated guesses never win over the user's word
        again = guess.model_copy(update={"provenance": Provenance(session_id=session)})
        assert facts.apply(U, again).decision.action is Action.PENDING, n
    assert facts.current(U, "diet").value == "vegetarian"  # type: ignore[union-attr]
    alone = _fact("hobby", "climbing", "g", confidence=0.3, source=Source.INFERRED,
                  intent=Intent.REMEMBER)
    assert facts.apply(U, alone).decision.action is Action.OBSERVE
    assert facts.current(U, "hobby") is None


def test_a_plain_statement_confirms_an_observation_at_once(facts: FactStore) -> None:
    assert said(facts, "I might move to Berlin.", session="a") == [Action.OBSERVE]
    assert said(facts, "I moved to Berlin.", session="b") == [Action.INSERT]
    versions = facts.versions(U, "location.home")
    assert [(v.value, v.status) for v in versions] == [
        ("Berlin", MemoryStatus.SUPERSEDED), ("Berlin", MemoryStatus.ACTIVE)]
    assert versions[0].superseded_by == versions[1].id
    assert versions[1].metadata["mentions"] == 2


def test_a_cold_value_said_again_is_current_again(facts: FactStore) -> None:
    said(facts, "I live in Boston.", session="a")
    item = facts.current(U, "location.home")
    assert item is not None
    facts._save(U, [item.model_copy(update={"status": MemoryStatus.COLD})])
    assert facts.current(U, "location.home") is None
    assert said(facts, "I live in Boston.", session="b") == [Action.REINFORCE]
    again = facts.current(U, "location.home")
    assert again is not None and again.id == item.id and again.last_access_at is not None
    assert len(facts.versions(U, "location.home")) == 1
