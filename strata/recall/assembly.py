"""Assembly: a recall's candidates, from every layer, fitted into the labelled context —
select (relaxing once), the current project first, fall back to the most-used facts, dedup,
fit the budget, label. Runs where the candidates meet (the ingress, or ``recall`` in one
process); the search that finds them is ``strata.recall.service``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any, Protocol

from pydantic import BaseModel, Field

from strata.extract.rules import speaker_prefix
from strata.models import (
    LONG_TERM,
    Layer,
    MemoryItem,
    RecallItem,
    RecallRequest,
    RecallResponse,
    Turn,
    context_name,
)
from strata.recall.context import ContextBuilder, correction_label, heading, line_cost
from strata.recall.excerpts import Excerpt, share_budget
from strata.recall.recipes import DEFAULT, RecallRecipe
from strata.recall.relative_dates import dated
from strata.recall.routing import RouteDecision
from strata.recall.scoring import ScoredItem, collapse_copies, dedup
from strata.recall.stages import Stage
from strata.stores.lexical import tokenize

# a sentence's index terms, cached: the same memories come back recall after recall
sentence_terms = lru_cache(maxsize=16384)(tokenize)

__all__ = ["LayerCandidates", "WorkingSnapshot", "assemble", "best_of",
           "could_pass", "in_context", "memory_context", "select_candidates"]


class WorkingSnapshot(Protocol):
    """What recall reads of a session's working memory (``strata.shard.models``'
    ``WorkingMemoryView`` is one; the shard's models build on this module, not the reverse)."""

    @property
    def window(self) -> Sequence[Turn]: ...

    @property
    def summary(self) -> str: ...

    @property
    def pinned(self) -> Sequence[Turn]: ...

    @property
    def task_state(self) -> dict[str, Any]: ...


class LayerCandidates(BaseModel):
    """The scored candidates of some layers, how long each layer took, and whether a layer's
    store was down."""

    candidates: list[ScoredItem] = Field(default_factory=list)
    timings_ms: dict[str, float] = Field(default_factory=dict)
    degraded: bool = False
    statements: list[str] = Field(default_factory=list)  # the LLM's, when it was asked

    def joined(self, other: LayerCandidates) -> LayerCandidates:
        """These candidates and another search's (other layers: the knowledge base's beside
        the shard's personal ones), timings of both, degraded if either was."""
        return LayerCandidates(candidates=[*self.candidates, *other.candidates],
                               timings_ms={**self.timings_ms, **other.timings_ms},
                               degraded=self.degraded or other.degraded,
                               statements=[*self.statements, *other.statements])


def best_of(found: LayerCandidates, *more: LayerCandidates,
            weight: float = 1.0) -> LayerCandidates:
    """``found`` with the candidates of further searches of the same layers (the LLM's
    statements, ``strata.recall.expansion``): a candidate any of them found keeps its best
    score, those of ``more`` × ``weight``, and its breakdown's ``statement`` says which
    statement (1-based) found it when one of them scored best (the expansion stage)."""
    best = {c.id: c for c in found.candidates}
    for number, other in enumerate(more, 1):
        for candidate in other.candidates:
            score = candidate.score * weight
            if candidate.id not in best or score > best[candidate.id].score:
                best[candidate.id] = candidate.model_copy(update={
                    "score": score,
                    "breakdown": replace(candidate.breakdown, statement=number)})
    return found.model_copy(update={
        "candidates": list(best.values()),
        "statements": [*found.statements, *(s for o in more for s in o.statements)],
        "degraded": found.degraded or any(o.degraded for o in more)})


def assemble(request: RecallRequest, decision: RouteDecision, working: WorkingSnapshot | None,
             found: LayerCandidates, recipe: RecallRecipe,
             most_used: Callable[[], list[ScoredItem]],
             corrections: Mapping[str, ScoredItem] | None = None) -> RecallResponse:
    """Fuse the candidates of every layer into the budgeted context: select (relaxing once),
    fall back to the most-used facts, dedup, fit the budget, label. A knowledge chunk this
    user corrected goes in with the correction under it, or not at all."""
    candidates = found.candidates
    corrections = corrections or {}
    ranked, relaxed = select_candidates(candidates, recipe)
    if recipe.runs(Stage.PROJECT):
        ranked = in_context(ranked, request.context, request.context_only, recipe)
    shown = {i.id for i in ranked if i.layer == Layer.KNOWLEDGE}  # their corrections go under them
    under = {c.id for chunk, c in corrections.items() if chunk in shown}
    ranked = [i for i in ranked if i.id not in under or i.layer != Layer.FACTS]
    fallback = False
    searched = [layer for layer in decision.layers if layer != Layer.WORKING]
    if not ranked and any(layer in LONG_TERM for layer in searched) and not found.degraded:
        ranked, fallback = most_used(), True
    builder = ContextBuilder(request.budget_tokens, recipe)
    if working is not None and Layer.WORKING in decision.layers:
        builder.add_working(working.window, working.summary, working.pinned,
                            working.task_state)
    # the best top_k items that fit the budget, the longest cut to their sentences that
    # matter (excerpts); an item that cannot fit even cut, or that says again what a better
    # item from the same turns said, is passed over
    chosen: list[tuple[ScoredItem, str, Excerpt, ScoredItem | None]] = []
    terms = set(tokenize(request.query))
    for item in dedup(collapse_copies(ranked), recipe.dedup_jaccard)[
            :recipe.pool_per_item * request.top_k]:
        knowledge = item.layer == Layer.KNOWLEDGE
        correction = corrections.get(item.id) if knowledge else None
        text = item.text if correction is None else (
            f"{item.text}\n{correction_label(correction)}")
        if item.layer == Layer.EPISODES and item.created_at is not None:
            text = dated(text, item.created_at)  # "last week" as said then, read now
        text = said_by(item, text)
        turns = item.provenance.turn_ids
        chosen.append((item, "knowledge" if knowledge else "long_term", Excerpt(
            heading(item), text, terms, sentence_terms, cuttable=correction is None,
            turns=len(turns) > 1,
            sources=frozenset((item.provenance.session_id, t) for t in turns)), correction))
    lines = share_budget([e for _, _, e, _ in chosen],
                         builder.room({block for _, block, _, _ in chosen[:request.top_k]}),
                         line_cost,
                         request.top_k)
    for (item, block, _, correction), line in zip(chosen, lines, strict=True):
        if line is not None and builder.add(block, line, item) and correction is not None:
            builder.included.append(correction)
    items = [RecallItem(id=i.id, layer=i.layer, text=i.text, score=round(i.score, 4),
                        created_at=i.created_at, confidence=i.confidence, source=i.source,
                        provenance=i.provenance, context=i.context, speaker=i.speaker)
             for i in builder.included]
    debug = None
    if request.debug:
        debug = {"route_reason": decision.reason, "relaxed": relaxed, "fallback": fallback,
                 "threshold": recipe.threshold, "recipe": recipe.name,
                 "context_tokens": builder.tokens(),
                 "context": request.context, "agent": request.agent,
                 "statements": found.statements,
                 "stages": [s.value for s in recipe.stages],
                 "candidates": [{**c.model_dump(mode="json", include={
                     "id", "layer", "kind", "text", "score", "context"}),
                     "parts": c.parts, "stages": c.breakdown.by_stage(recipe)}
                     for c in sorted(candidates, key=lambda c: c.score, reverse=True)]}
    return RecallResponse(context=builder.render(), items=items, route=decision.route.value,
                          layers=decision.layers, degraded=found.degraded,
                          timings_ms={k: round(v, 2) for k, v in found.timings_ms.items()},
                          debug=debug)


def said_by(item: ScoredItem, text: str) -> str:
    """``text`` as the line shows it: in a multi-party conversation, with who said it in
    front ("Melanie: I love camping trips") unless it already starts so. A merged pair of
    turns is left as it is (its turns may be two people's)."""
    speaker = item.speaker
    if not speaker or len(item.provenance.turn_ids) > 1 or speaker_prefix(text, speaker):
        return text
    return f"{speaker}: {text}"


def memory_context(memory: MemoryItem) -> str | None:
    """The project / business line a memory belongs to: its context, else the project its
    sentence named (a ``project:`` scope tag)."""
    if memory.context:
        return memory.context
    tag = next((t for t in memory.scope_tags if t.startswith("project:")), None)
    return context_name(tag.split(":", 1)[1]) if tag and tag[8:].strip() else None


def in_context(ranked: list[ScoredItem], context: str | None, only: bool = False,
               recipe: RecallRecipe = DEFAULT) -> list[ScoredItem]:
    """Scored for the current project / business line: its memories score
    ``recipe.context_boost`` times more, those of no context keep their score, and another
    context's are capped below the lowest of those (× ``recipe.other_context_cap``), so they
    never outrank the current one's (``only``: left out). The new scores order the context
    and decide which of two near-duplicates stays (Java in project X over Python in
    general)."""
    if context is None:
        return ranked

    def other(item: ScoredItem) -> bool:
        return item.context is not None and item.context != context

    mine = [i.model_copy(update={"score": i.score * recipe.context_boost}) if i.context == context
            else i for i in ranked if not other(i)]
    floor = min((i.score for i in mine), default=None)
    rest = [] if only else [i if floor is None else i.model_copy(update={
        "score": min(i.score, floor * recipe.other_context_cap)}) for i in ranked if other(i)]
    return sorted([*mine, *rest], key=lambda i: i.score, reverse=True)


def could_pass(candidate: ScoredItem, recipe: RecallRecipe, factor: float | None = None) -> bool:
    """Whether the candidate passes the thresholds (relaxed by ``factor``, by default the
    recipe's ``relaxed_factor``; for a knowledge
    chunk the similarity threshold never below ``recipe.relaxed_floor``): one that does not
    at the relaxed level can never reach a context. The user's own memories keep the plain
    relaxation: MiniLM scores "I'm allergic to peanuts" against "what should I cook for
    dinner?" 0.13, as low as documentation against "anything?", and that is the memory the
    relaxed pass exists for."""
    factor = recipe.relaxed_factor if factor is None else factor
    floor = recipe.relaxed_floor if candidate.layer == Layer.KNOWLEDGE else 0.0
    min_similarity = max(recipe.min_similarity * factor, min(recipe.min_similarity, floor))
    return (candidate.score >= recipe.threshold * factor
            and candidate.breakdown.relevance >= min_similarity)


def select_candidates(candidates: list[ScoredItem], recipe: RecallRecipe
            ) -> tuple[list[ScoredItem], bool]:
    """Relevant enough (similarity) and above the score threshold; if nothing passes,
    relax both once (× ``relaxed_factor``), keeping the similarity floor: a query that
    matches nothing ("anything?") recalls nothing rather than the least unrelated chunks."""
    ranked = sorted(candidates, key=lambda c: c.score, reverse=True)

    def passing(factor: float) -> list[ScoredItem]:
        return [c for c in ranked if could_pass(c, recipe, factor)]

    passed = passing(1.0)
    if passed or not ranked:
        return passed, False
    return passing(recipe.relaxed_factor), True
