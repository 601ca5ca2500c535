"""RecallService: route → query layers → fuse → dedup → fit the budget.

Plain class, in two halves so that each runs where its data is: ``search_layers`` scores
the candidates of some layers over one vector store (a user's shard runs it over its hot
index for the personal layers; the ingress over Milvus for the knowledge base), and
``assemble`` fuses every layer's candidates with the working memory into the budgeted
context. ``recall`` does both in one process (the previous path, and tests). Every store
call carries the caller's scope (knowledge uses the tenant's shared scope).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any, Protocol

from pydantic import BaseModel, Field

from strata.errors import InvalidInput, StrataError
from strata.extract.exchanges import EXCHANGE
from strata.extract.pii import redact
from strata.layers.corrections import corrections_of
from strata.layers.records import from_record
from strata.models import (
    LONG_TERM,
    Collection,
    Layer,
    MemoryItem,
    MemoryStatus,
    RecallItem,
    RecallRequest,
    RecallResponse,
    RecordFilter,
    Scope,
    SearchHit,
    StoredRecord,
    Turn,
    context_name,
    utcnow,
)
from strata.recall.context import ContextBuilder, correction_label, label
from strata.recall.granularity import TermsOf, fuse_granularities
from strata.recall.late import LateScorer
from strata.recall.recipes import DEFAULT, RecallRecipe
from strata.recall.routing import RouteClassifier, RouteDecision, route_query
from strata.recall.scoring import ScoredItem, collapse_copies, dedup, score_hits
from strata.stores.lexical import tokenize
from strata.stores.ports import VectorStore, score_ids

__all__ = ["LONG_TERM", "LayerCandidates", "RecallService", "WorkingSnapshot", "assemble",
           "could_pass", "decide_route", "select_candidates", "working_only"]

logger = logging.getLogger(__name__)


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


def _item(layer: Layer, record: StoredRecord) -> ScoredItem:
    if layer is Layer.KNOWLEDGE:
        p = record.payload
        return ScoredItem(id=record.id, layer=layer, kind=f"kb:{p.get('doc_id', '?')}",
                          text=record.text, confidence=record.confidence, source="knowledge",
                          created_at=datetime.fromtimestamp(record.updated_at, timezone.utc))
    memory = from_record(record)
    return ScoredItem(id=memory.id, layer=layer, kind=memory.kind.value,
                      # the label's date, and what recency counts from: when it happened or
                      # was said (yesterday's event outranks a similar one from 200 days ago;
                      # an update or a recall does not make a memory new)
                      text=redact(memory.text), created_at=memory.event_time or memory.created_at,
                      confidence=memory.confidence, source=memory.source.value,
                      provenance=memory.provenance, access_count=memory.access_count,
                      context=memory_context(memory))


def _keyword_match(record: StoredRecord, query: str) -> bool:
    keywords = record.payload.get("metadata", {}).get("keywords", [])
    lowered = query.lower()
    return any(k and k.lower() in lowered for k in keywords)


class RecallService:
    """Builds the recalled context for one query of one user."""

    def __init__(self, vectors: VectorStore, recipe: RecallRecipe = DEFAULT,
                 classifier: RouteClassifier | None = None, parallelism: int = 4,
                 late: LateScorer | None = None) -> None:
        self._vectors = vectors
        self._recipe = recipe
        self._classifier = classifier
        self._late = late  # token-level scoring of episode candidates (strata.recall.late)
        # layers searched in threads (their store calls block); 1: inline (an in-memory index)
        self._pool = (ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix="recall")
                      if parallelism > 1 else None)

    def _layer_hits(self, layer: Layer, scope: Scope, request: RecallRequest,
                    vector: list[float], recipe: RecallRecipe,
                    late: LateScorer | None, terms_of: TermsOf | None) -> list[SearchHit]:
        """A layer's candidates, unscored: what the agent may see of its collection; episodes
        fused with their exchanges, procedures joined by those their keywords match."""
        collection = layer.collection
        knowledge = layer is Layer.KNOWLEDGE
        target = Scope.shared(scope.tenant) if knowledge else scope
        statuses = ([MemoryStatus.ACTIVE, MemoryStatus.COLD] if request.include_cold
                    else [MemoryStatus.ACTIVE])
        # the personal layers: only what the calling agent may see (knowledge is everyone's)
        flt = RecordFilter(statuses=statuses,
                           visible_to=None if knowledge else request.agent or "")
        if layer is Layer.EPISODES:
            turns = self._search_collection(
                collection, target, request.query, vector, recipe,
                flt.model_copy(update={"payload_not_equals": {"metadata.type": EXCHANGE}}))
            if recipe.exchange_weight <= 0:
                return turns
            exchanges = self._search_collection(
                collection, target, request.query, vector, recipe,
                flt.model_copy(update={"payload_equals": {"metadata.type": EXCHANGE}}))

            def fetch(ids: list[str]) -> list[SearchHit]:
                return score_ids(self._vectors, collection, target, vector, request.query, ids,
                                 statuses, visible_to=request.agent or "")

            return fuse_granularities(turns, exchanges, fetch, request.query, recipe, late,
                                      terms_of or tokenize)
        hits = self._search_collection(collection, target, request.query, vector, recipe, flt)
        if layer is Layer.PROCEDURES and recipe.search == "hybrid":
            matched = {h.record.id for h in hits}
            extra = [SearchHit(record=r, score=0.0, parts={"dense": 1.0})
                     for r in self._vectors.query(collection, target, flt, 100)
                     if r.id not in matched and _keyword_match(r, request.query)]
            hits = [h.model_copy(update={"parts": {**h.parts, "dense": 1.0}})
                    if _keyword_match(h.record, request.query) else h for h in hits] + extra
        return hits

    def _search_collection(self, collection: Collection, target: Scope, query: str,
                           vector: list[float], recipe: RecallRecipe,
                           flt: RecordFilter) -> list[SearchHit]:
        """One search of one collection the recipe's way; raw similarities in ``parts``."""
        k = recipe.candidates_per_layer
        if recipe.search == "dense":
            hits = self._vectors.search_dense(collection, target, vector, k, flt)
            return [h.model_copy(update={"parts": {"dense": h.score}}) for h in hits]
        if recipe.search == "lexical":
            hits = self._vectors.search_lexical(collection, target, query, k, flt)
            return [h.model_copy(update={"parts": {"lexical": h.score}}) for h in hits]
        return self._vectors.search_hybrid(collection, target, vector, query, k, flt)

    def _score_layer(self, layer: Layer, scope: Scope, request: RecallRequest,
                     vector: list[float], recipe: RecallRecipe, now: datetime,
                     late: LateScorer | None,
                     terms_of: TermsOf | None) -> tuple[list[ScoredItem], float]:
        """A layer's candidates scored (forgotten ones dropped), and the milliseconds taken."""
        started = time.perf_counter()
        hits = [h for h in self._layer_hits(layer, scope, request, vector, recipe, late, terms_of)
                if float(h.record.payload.get("weight", 1.0)) > 0]  # forgotten: weight 0
        kind = layer.kind or layer  # what type_priority weighs: a memory's kind, or "knowledge"
        scored = score_hits(layer, kind, hits, [_item(layer, h.record) for h in hits],
                            recipe, now)
        return scored, (time.perf_counter() - started) * 1000

    def decide(self, request: RecallRequest, has_session: bool,
               recipe: RecallRecipe | None = None) -> RouteDecision:
        return decide_route(request, has_session, self._classifier, recipe)

    def search_layers(self, scope: Scope, request: RecallRequest, vector: list[float],
                      layers: Sequence[str], recipe: RecallRecipe | None = None,
                      now: datetime | None = None, late: LateScorer | None = None,
                      terms_of: TermsOf | None = None) -> LayerCandidates:
        """The scored candidates of the named layers (working memory is not searched);
        a layer whose store is down marks the result degraded instead of failing it.
        ``late`` and ``terms_of`` come from an index that computed them at write time."""
        recipe = recipe or self._recipe
        now = now or utcnow()
        late = late if late is not None else self._late
        searched = [Layer(layer) for layer in layers if layer != Layer.WORKING]
        futures: dict[Layer, _Done | Future[tuple[list[ScoredItem], float]]]
        if self._pool is None or len(searched) < 2:
            futures = {layer: _Done(self._score_layer, layer, scope, request, vector, recipe,
                                    now, late, terms_of) for layer in searched}
        else:
            futures = {layer: self._pool.submit(self._score_layer, layer, scope, request,
                                                vector, recipe, now, late, terms_of)
                       for layer in searched}
        found = LayerCandidates()
        for layer, future in futures.items():
            try:
                scored, found.timings_ms[layer] = future.result()
                found.candidates.extend(scored)
            except StrataError as exc:  # a store that is down degrades the answer
                logger.warning("recall layer %s failed: %s", layer, exc.detail)
                found.degraded = True
        return found

    def recall(self, scope: Scope, request: RecallRequest, vector: list[float],
               working: WorkingSnapshot | None = None,
               recipe: RecallRecipe | None = None) -> RecallResponse:
        """The whole recall in this process: route, search every routed layer, assemble."""
        recipe = recipe or self._recipe
        decision = self.decide(request, working is not None, recipe)
        found = self.search_layers(scope, request, vector, decision.layers, recipe)
        corrections = (correction_items(corrections_of(self._vectors, scope))
                       if Layer.KNOWLEDGE in decision.layers else {})
        return assemble(request, decision, working, found, recipe,
                        lambda: self.most_used(scope, request.agent or ""), corrections)

    def most_used(self, scope: Scope, viewer: str = "") -> list[ScoredItem]:
        """The last resort: the user's most-used active facts (that ``viewer`` may see)."""
        rows = self._vectors.query(Collection.FACTS, scope, RecordFilter(
            statuses=[MemoryStatus.ACTIVE], visible_to=viewer), 200)
        items = [_item(Layer.FACTS, r) for r in rows if float(r.payload.get("weight", 1.0)) > 0]
        items.sort(key=lambda i: (i.access_count, i.created_at or utcnow()), reverse=True)
        return [i.model_copy(update={"score": 0.0}) for i in items[:3] if i.access_count > 0]


def decide_route(request: RecallRequest, has_session: bool,
                 classifier: RouteClassifier | None = None,
                 recipe: RecallRecipe | None = None) -> RouteDecision:
    """Which layers the query needs (``strata.recall.routing``), within the recipe's
    layers when it is a scenario profile that names them and the request does not."""
    try:
        decision = route_query(request.query, list(request.layers or []) or None, has_session,
                               classifier)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    if recipe is not None and recipe.layers is not None and not request.layers:
        allowed = [layer for layer in decision.layers if layer in recipe.layers]
        if not allowed:  # the route wanted none of them: the profile's own, searched anyway
            allowed = [layer for layer in recipe.layers if layer != Layer.WORKING or has_session]
        decision = decision.model_copy(update={
            "layers": allowed,
            "reason": f"{decision.reason}; profile {recipe.name}: {', '.join(recipe.layers)}"})
    return decision


class _Done:
    """A layer searched inline, with the interface of a future."""

    def __init__(self, fn: Callable[..., tuple[list[ScoredItem], float]], *args: Any) -> None:
        self._fn, self._args = fn, args

    def result(self) -> tuple[list[ScoredItem], float]:
        return self._fn(*self._args)


def correction_items(records: Mapping[str, StoredRecord]) -> dict[str, ScoredItem]:
    """The user's corrections (``strata.layers.corrections``) as items, by chunk id."""
    return {chunk: _item(Layer.FACTS, r).model_copy(update={"text": redact(str(
        r.payload.get("value") or r.text))}) for chunk, r in records.items()}


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
    ranked = in_context(ranked, request.context, request.context_only)
    shown = {i.id for i in ranked if i.layer == Layer.KNOWLEDGE}  # their corrections go under them
    under = {c.id for chunk, c in corrections.items() if chunk in shown}
    ranked = [i for i in ranked if i.id not in under or i.layer != Layer.FACTS]
    fallback = False
    searched = [layer for layer in decision.layers if layer != Layer.WORKING]
    if not ranked and any(layer in LONG_TERM for layer in searched) and not found.degraded:
        ranked, fallback = most_used(), True
    builder = ContextBuilder(request.budget_tokens)
    if working is not None and Layer.WORKING in decision.layers:
        builder.add_working(working.window, working.summary, working.pinned,
                            working.task_state)
    added = 0  # the best top_k items that fit the budget (a long one is skipped)
    covered: set[tuple[str | None, str]] = set()  # source turns already in the context
    for item in dedup(collapse_copies(ranked), recipe.dedup_jaccard):
        if added == request.top_k:
            break
        sources = {(item.provenance.session_id, t) for t in item.provenance.turn_ids}
        if sources and sources <= covered:
            continue  # says again what a better item from the same turns said
        knowledge = item.layer == Layer.KNOWLEDGE
        block = "knowledge" if knowledge else "long_term"
        correction = corrections.get(item.id) if knowledge else None
        line = label(item) if correction is None else (
            f"{label(item)}\n{correction_label(correction)}")
        if builder.add(block, line, item):
            added += 1
            covered |= sources
            if correction is not None:
                builder.included.append(correction)
    items = [RecallItem(id=i.id, layer=i.layer, text=i.text, score=round(i.score, 4),
                        created_at=i.created_at, confidence=i.confidence, source=i.source,
                        provenance=i.provenance, context=i.context) for i in builder.included]
    debug = None
    if request.debug:
        debug = {"route_reason": decision.reason, "relaxed": relaxed, "fallback": fallback,
                 "threshold": recipe.threshold, "recipe": recipe.name,
                 "context_tokens": builder.tokens(),
                 "context": request.context, "agent": request.agent,
                 "candidates": [c.model_dump(mode="json", include={
                     "id", "layer", "kind", "text", "score", "parts", "context"})
                     for c in sorted(candidates, key=lambda c: c.score, reverse=True)]}
    return RecallResponse(context=builder.render(), items=items, route=decision.route.value,
                          layers=decision.layers, degraded=found.degraded,
                          timings_ms={k: round(v, 2) for k, v in found.timings_ms.items()},
                          debug=debug)


def working_only(request: RecallRequest, working: WorkingSnapshot | None) -> RecallResponse:
    """The answer when the long-term stores cannot be searched at all: the session's working
    memory alone (if there is one), marked degraded, rather than an error."""
    builder = ContextBuilder(request.budget_tokens)
    if working is not None:
        builder.add_working(working.window, working.summary, working.pinned,
                            working.task_state)
    return RecallResponse(context=builder.render(), items=[], route="degraded",
                          layers=[Layer.WORKING] if working is not None else [], degraded=True)


CONTEXT_BOOST = 1.25  # the current context's memories rank as if they scored this much more


def memory_context(memory: MemoryItem) -> str | None:
    """The project / business line a memory belongs to: its context, else the project its
    sentence named (a ``project:`` scope tag)."""
    if memory.context:
        return memory.context
    tag = next((t for t in memory.scope_tags if t.startswith("project:")), None)
    return context_name(tag.split(":", 1)[1]) if tag and tag[8:].strip() else None


def in_context(ranked: list[ScoredItem], context: str | None,
               only: bool = False) -> list[ScoredItem]:
    """Scored for the current project / business line: its memories score
    ``CONTEXT_BOOST`` times more, those of no context keep their score, and another
    context's are capped below the lowest of those, so they never outrank the current one's
    (``only``: left out). The new scores order the context and decide which of two
    near-duplicates stays (Java in project X over Python in general)."""
    if context is None:
        return ranked

    def other(item: ScoredItem) -> bool:
        return item.context is not None and item.context != context

    mine = [i.model_copy(update={"score": i.score * CONTEXT_BOOST}) if i.context == context
            else i for i in ranked if not other(i)]
    floor = min((i.score for i in mine), default=None)
    rest = [] if only else [i if floor is None else i.model_copy(update={
        "score": min(i.score, floor * 0.99)}) for i in ranked if other(i)]
    return sorted([*mine, *rest], key=lambda i: i.score, reverse=True)


RELAXED = 0.5  # the relaxed pass halves both thresholds (the similarity one down to a floor)


def could_pass(candidate: ScoredItem, recipe: RecallRecipe, factor: float = RELAXED) -> bool:
    """Whether the candidate passes the thresholds (relaxed by ``factor``; for a knowledge
    chunk the similarity threshold never below ``recipe.relaxed_floor``): one that does not
    at the relaxed level can never reach a context. The user's own memories keep the plain
    relaxation: MiniLM scores "I'm allergic to peanuts" against "what should I cook for
    dinner?" 0.13, as low as documentation against "anything?", and that is the memory the
    relaxed pass exists for."""
    floor = recipe.relaxed_floor if candidate.layer == Layer.KNOWLEDGE else 0.0
    min_similarity = max(recipe.min_similarity * factor, min(recipe.min_similarity, floor))
    return (candidate.score >= recipe.threshold * factor
            and candidate.parts.get("relevance", 0.0) >= min_similarity)


def select_candidates(candidates: list[ScoredItem], recipe: RecallRecipe
            ) -> tuple[list[ScoredItem], bool]:
    """Relevant enough (similarity) and above the score threshold; if nothing passes,
    relax both once (halved), keeping the similarity floor: a query that matches nothing
    ("anything?") recalls nothing rather than the least unrelated chunks."""
    ranked = sorted(candidates, key=lambda c: c.score, reverse=True)

    def passing(factor: float) -> list[ScoredItem]:
        return [c for c in ranked if could_pass(c, recipe, factor)]

    passed = passing(1.0)
    if passed or not ranked:
        return passed, False
    return passing(RELAXED), True
