"""Facts of a multi-party conversation belong to the person who said them: who said it is
kept, shown in the context, and what one person says neither supersedes nor forgets what
another said."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import httpx
import pytest

from strata.conflict import Action
from strata.extract.llm import LLMExtractor
from strata.extract.rules import RuleExtractor
from strata.layers.memories import LongTermMemory
from strata.models import MemoryKind, MemoryStatus, RecallRequest, Role, Scope, Turn
from strata.recall.recipes import RECIPES
from strata.recall.service import RecallService
from strata.stores.embedders import HashEmbedder
from strata.testing.fake_vectors import FakeVectorStore

EMB = HashEmbedder(64)
U = Scope(tenant="t", user="u")
WHEN = datetime(2023, 5, 8, tzinfo=timezone.utc)


def turn(n: int, text: str, speaker: str | None, session: str = "s1") -> Turn:
    return Turn(turn_id=f"{session}:{n}", session_id=session, user_id="u", role=Role.USER,
                content=text, created_at=WHEN,
                metadata={"speaker": speaker} if speaker else {})


@pytest.fixture
def memory() -> LongTermMemory:
    vectors = FakeVectorStore()
    vectors.ensure_collections(64)
    return LongTermMemory(vectors, EMB)


def said(memory: LongTermMemory, n: int, text: str, speaker: str | None,
         session: str = "s1") -> list[Action]:
    return [memory.facts.apply(U, c).decision.action
            for c in RuleExtractor().extract([turn(n, text, speaker, session)])
            if c.kind is MemoryKind.FACT and c.key]


def test_a_fact_knows_who_said_it_and_drops_the_name_prefix() -> None:
    facts = [c for c in RuleExtractor().extract([turn(1, "Melanie: I live in Ohio.", "Melanie")])
             if c.kind is MemoryKind.FACT]
    assert [(c.key, c.text, c.speaker) for c in facts] == [
        ("location.home", "I live in Ohio.", "Melanie")]
    assert "speaker:melanie" in facts[0].scope_tags
    alone = RuleExtractor().extract([turn(1, "I live in Ohio.", None)])
    assert all(c.speaker is None and not c.scope_tags for c in alone)


def test_two_people_s_homes_do_not_supersede_each_other(memory: LongTermMemory) -> None:
    said(memory, 1, "Caroline: I live in Boston.", "Caroline")
    said(memory, 2, "Melanie: I live in Ohio.", "Melanie")
    versions = memory.facts.versions(U, "location.home")
    assert sorted((v.value, v.status, v.metadata.get("speaker")) for v in versions) == [
        ("Boston", MemoryStatus.ACTIVE, "Caroline"), ("Ohio", MemoryStatus.ACTIVE, "Melanie")]
    # a change Caroline states supersedes her own home only
    assert said(memory, 1, "Caroline: I moved to Denver.", "Caroline", session="s2") == [
        Action.SUPERSEDE]
    current = {v.value: v.status for v in memory.facts.versions(U, "location.home")}
    assert current == {"Boston": MemoryStatus.SUPERSEDED, "Ohio": MemoryStatus.ACTIVE,
                       "Denver": MemoryStatus.ACTIVE}
    assert memory.facts.current(U, "location.home", ["speaker:melanie"]).value == "Ohio"  # type: ignore[union-attr]


def test_the_context_says_who_said_a_fact(memory: LongTermMemory) -> None:
    said(memory, 1, "Caroline: I live in Boston.", "Caroline")
    said(memory, 2, "Melanie: I live in Ohio.", "Melanie")
    req = RecallRequest(user_id="u", query="where does Melanie live in Ohio", top_k=5,
                        layers=["facts"])  # type: ignore[list-item]
    resp = RecallService(memory.vectors).recall(U, req, EMB.encode([req.query])[0].tolist(),
                                                recipe=RECIPES["hybrid"])
    ohio = next(i for i in resp.items if "Ohio" in i.text)
    assert ohio.speaker == "Melanie" and ohio.text == "I live in Ohio."
    assert "Melanie: I live in Ohio." in resp.context
    assert "Melanie: Melanie:" not in resp.context


def test_forgetting_what_one_person_said_leaves_the_other_s(memory: LongTermMemory) -> None:
    said(memory, 1, "Caroline: I live in Boston.", "Caroline")
    said(memory, 2, "Melanie: I live in Boston.", "Melanie")
    forget = next(c for c in RuleExtractor().extract(
        [turn(3, "Please forget that I live in Boston.", "Melanie")]) if c.intent == "forget")
    assert forget.speaker == "Melanie"
    gone = memory.forget_matching(U, forget.text, speaker=forget.speaker)
    left = {v.metadata.get("speaker"): v.weight for v in memory.facts.versions(U, "location.home")}
    assert len(gone) == 1 and left == {"Caroline": 1.0, "Melanie": 0.0}


def test_the_llm_extractor_attributes_a_fact_to_its_speaker() -> None:
    turns = [turn(1, "I'm allergic to peanuts", "Ann"), turn(2, "Me too, shellfish", "Bob")]
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content)["messages"][1]["content"])
        content = json.dumps({"memories": [
            {"kind": "fact", "text": "allergic to peanuts", "key": "constraint.allergy:peanuts",
             "value": "allergic", "confidence": 0.9, "turn_ids": ["s1:1"]},
            {"kind": "fact", "text": "both have allergies", "key": "note:allergies",
             "value": "allergies", "confidence": 0.9, "turn_ids": ["s1:1", "s1:2"]}]})
        return httpx.Response(200, json={"choices": [{"message": {"content": content}}]})

    out = LLMExtractor("http://llm/v1", "", "m",
                       transport=httpx.MockTransport(handler)).extract(turns)
    assert "[s1:1 user · Ann] I'm allergic to peanuts" in seen[0]
    assert [(c.key, c.speaker, c.scope_tags) for c in out] == [
        ("constraint.allergy:peanuts", "Ann", ["speaker:ann"]),
        ("note:allergies", None, [])]  # two people's words: nobody's alone
