"""The recall rules: the relaxed pass's similarity floor,
knowledge copies collapsed, routing of questions without a personal cue word, and working
memory redacted when rendered into a context. (Token counts: tests/unit/test_tokens.py.)"""

from __future__ import annotations

from strata.layers.knowledge import collapse_hits
from strata.models import Role, SearchHit, StoredRecord, Turn
from strata.recall.assembly import select_candidates
from strata.recall.context import ContextBuilder
from strata.recall.recipes import DEFAULT
from strata.recall.routing import Route, route_query
from strata.recall.scoring import ScoreBreakdown, ScoredItem, collapse_copies
from strata.tokens import count_tokens


def _candidate(relevance: float, score: float = 0.5, text: str = "a chunk",
               kind: str = "kb:demo/a", layer: str = "knowledge") -> ScoredItem:
    return ScoredItem(id=f"{kind}-{relevance}", layer=layer, kind=kind, text=text, score=score,
                      breakdown=ScoreBreakdown(relevance=relevance))


def test_relaxed_pass_keeps_the_similarity_floor() -> None:
    # nothing passes min_similarity 0.2: the relaxed pass runs, but 0.12 is below the floor
    ranked, relaxed = select_candidates([_candidate(0.12), _candidate(0.06)], DEFAULT)
    assert relaxed and ranked == []
    # a weak but real match (between the floor and min_similarity) is still recalled relaxed
    ranked, relaxed = select_candidates([_candidate(0.17), _candidate(0.12)], DEFAULT)
    assert relaxed and [c.parts["relevance"] for c in ranked] == [0.17]
    assert DEFAULT.relaxed_floor > DEFAULT.min_similarity * 0.5


def test_the_user_s_own_memories_keep_the_plain_relaxation() -> None:
    # "I'm allergic to peanuts" against "what should I cook for dinner?": 0.13 with MiniLM
    allergy = _candidate(0.13, text="I'm allergic to peanuts.", kind="fact", layer="facts")
    ranked, relaxed = select_candidates([allergy, _candidate(0.13)], DEFAULT)
    assert relaxed and [c.layer for c in ranked] == ["facts"]


def test_the_floor_never_raises_the_strict_threshold() -> None:
    lenient = DEFAULT.model_copy(update={"min_similarity": 0.1})
    ranked, relaxed = select_candidates([_candidate(0.11)], lenient)
    assert not relaxed and len(ranked) == 1


def test_knowledge_copies_collapse_to_the_best_scored_naming_every_document() -> None:
    text = "Exports run every night at 02:00 UTC."
    items = [_candidate(0.5, 0.6, text, "kb:ops/exports"),
             _candidate(0.5, 0.7, "  exports run every night at 02:00 UTC. ", "kb:handbook/copy"),
             _candidate(0.5, 0.9, text, "fact", layer="facts"),  # other layers pass through
             _candidate(0.5, 0.4, "Another chunk.", "kb:ops/other")]
    out = collapse_copies(items)
    assert [(i.layer, i.kind, i.score) for i in out] == [
        ("facts", "fact", 0.9), ("knowledge", "kb:handbook/copy+ops/exports", 0.7),
        ("knowledge", "kb:ops/other", 0.4)]


def _hit(doc_id: str, text: str, score: float) -> SearchHit:
    return SearchHit(record=StoredRecord(id=f"{doc_id}#0", text=text, vector=[0.0],
                                         payload={"doc_id": doc_id}), score=score)


def test_knowledge_search_hits_collapse_with_their_documents() -> None:
    hits = collapse_hits([_hit("a", "Same text.", 0.2), _hit("b", "same  TEXT.", 0.3),
                          _hit("c", "Other text.", 0.25)])
    assert [(h.record.payload["doc_id"], h.record.payload["doc_ids"]) for h in hits] == [
        ("b", ["b", "a"]), ("c", ["c"])]


def test_a_question_without_a_personal_cue_word_searches_memory() -> None:
    for query in ("What are we doing with the kitchen?", "what is the plan for the garden",
                  "我们的厨房装修怎么样了", "How does the move look?"):
        decision = route_query(query)
        assert {"facts", "episodes"} <= set(decision.layers), (query, decision)
    # documentation-only questions stay cheap: knowledge and procedures only
    for query in ("How do I configure the retry policy?", "如何配置导出功能",
                  "Which error code means the API key expired?"):
        decision = route_query(query)
        assert decision.route is Route.KNOWLEDGE, (query, decision)


def test_working_memory_is_redacted_when_rendered() -> None:
    secrets = ["sk-live-8fK2mQ9xL4vB7nR1tY6wZ3aQ", "4111 1111 1111 1111", "Tr0ub4dor&3"]
    window = [Turn(turn_id=f"s:{i}", session_id="s", user_id="u", role=Role.USER,
                   content=f"note {i}: {label} {secret}")
              for i, (label, secret) in enumerate(zip(["my key is", "card", "the password is"],
                                                      secrets, strict=True))]
    pinned = [Turn(turn_id="s:0p", session_id="s", user_id="u", role=Role.USER,
                   content=f"remember: the password is {secrets[2]}")]
    builder = ContextBuilder(1000)
    builder.add_working(window, f"the card is {secrets[1]}", pinned,
                        {"goal": f"deploy with key {secrets[0]}"})
    rendered = builder.render() + " ".join(i.text for i in builder.included)
    assert builder.render().count("[REDACTED:") >= 6
    assert not any(secret in rendered for secret in secrets)
    assert [i.id for i in builder.included] == ["s:0", "s:1", "s:2"]
    assert window[0].content.endswith(secrets[0])  # the session's own turn is untouched


def test_the_builder_keeps_its_budget_in_estimated_tokens() -> None:
    builder = ContextBuilder(60)
    lines = [f"[fact 30 Nov 2026] line {i} about the kitchen renovation schedule"
             for i in range(20)]
    added = [builder.add("long_term", line) for line in lines]
    assert any(added) and not all(added)
    assert count_tokens(builder.render()) <= 60
    assert count_tokens(builder.render()) <= builder.tokens() <= 60
