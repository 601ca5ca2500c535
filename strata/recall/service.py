"""RecallService: route → each layer's candidates (``strata.recall.candidates``) → the
episodes' ranking (``strata.recall.granularity``) → fusion (``strata.recall.scoring``); the
assembly into a context is ``strata.recall.assembly``.

Two halves, so that each runs where its data is: ``search_layers`` scores the candidates of
some layers over one vector store (a user's shard runs it over its hot index for the
personal layers; the ingress over Milvus for the knowledge base), and ``assemble``
(``strata.recall.assembly``) fuses every layer's candidates with the working memory into
the budgeted context. ``recall`` does both in one process (tests, and a library user
with one vector store).
Every store call carries the caller's scope (knowledge uses the tenant's shared scope).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any

from strata.errors import InvalidInput, StrataError
from strata.extract.pii import redact
from strata.layers.corrections import corrections_of
from strata.layers.records import from_record
from strata.models import (
    Collection,
    Layer,
    MemoryItem,
    MemoryStatus,
    RecallRequest,
    RecallResponse,
    RecordFilter,
    Scope,
    SearchHit,
    StoredRecord,
    utcnow,
)
from strata.recall.assembly import LayerCandidates, WorkingSnapshot, assemble, memory_context
from strata.recall.candidates import CANDIDATES, EntityReach, LayerSearch
from strata.recall.granularity import TermsOf, fuse_granularities
from strata.recall.late import LateScorer
from strata.recall.recipes import DEFAULT, RecallRecipe
from strata.recall.routing import RouteClassifier, RouteDecision, route_query
from strata.recall.scoring import ScoredItem, score_hits
from strata.recall.stages import EPISODE_RANKING
from strata.stores.lexical import tokenize
from strata.stores.ports import VectorStore

__all__ = ["RecallService", "correction_items", "decide_route"]

logger = logging.getLogger(__name__)


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
                      context=memory_context(memory), speaker=_speaker(memory))


def _speaker(memory: MemoryItem) -> str | None:
    speaker = memory.metadata.get("speaker")
    return redact(speaker) if isinstance(speaker, str) and speaker.strip() else None


class RecallService:
    """Builds the recalled context for one query of one user."""

    def __init__(self, vectors: VectorStore, recipe: RecallRecipe = DEFAULT,
                 classifier: RouteClassifier | None = None, parallelism: int = 4) -> None:
        self._vectors = vectors
        self._recipe = recipe
        self._classifier = classifier
        # layers searched in threads (their store calls block); 1: inline (an in-memory index)
        self._pool = (ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix="recall")
                      if parallelism > 1 else None)

    def _layer_hits(self, layer: Layer, scope: Scope, request: RecallRequest,
                    vector: list[float], recipe: RecallRecipe,
                    late: LateScorer | None, terms_of: TermsOf | None,
                    entities: EntityReach | None = None) -> list[SearchHit]:
        """A layer's candidates, unscored: the candidates phase's sources
        (``strata.recall.candidates``), then, in the episodes layer, their ranking
        (``strata.recall.granularity``: turns fused with their exchanges, boosted, re-scored
        token by token, merged) when the recipe runs any of its stages."""
        search = CANDIDATES.run(recipe, LayerSearch(self._vectors, layer, scope, request,
                                                    vector, recipe, entities))
        if layer is not Layer.EPISODES or not EPISODE_RANKING & set(recipe.stages):
            return search.hits  # as searched
        return fuse_granularities(search.hits, search.exchanges, search.score, request.query,
                                  recipe, late, terms_of or tokenize, reached=search.reached)

    def _score_layer(self, layer: Layer, scope: Scope, request: RecallRequest,
                     vector: list[float], recipe: RecallRecipe, now: datetime,
                     late: LateScorer | None, terms_of: TermsOf | None,
                     entities: EntityReach | None = None) -> tuple[list[ScoredItem], float]:
        """A layer's candidates scored (forgotten ones dropped), and the milliseconds taken."""
        started = time.perf_counter()
        hits = [h for h in self._layer_hits(layer, scope, request, vector, recipe, late,
                                            terms_of, entities)
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
                      terms_of: TermsOf | None = None,
                      entities: EntityReach | None = None) -> LayerCandidates:
        """The scored candidates of the named layers (working memory is not searched);
        a layer whose store is down marks the result degraded instead of failing it.
        ``late``, ``terms_of`` and ``entities`` (the user's entity index, for the entities
        stage) come from an index that computed them at write time."""
        recipe = recipe or self._recipe
        now = now or utcnow()
        searched = [Layer(layer) for layer in layers if layer != Layer.WORKING]
        futures: dict[Layer, _Done | Future[tuple[list[ScoredItem], float]]]
        if self._pool is None or len(searched) < 2:
            futures = {layer: _Done(self._score_layer, layer, scope, request, vector, recipe,
                                    now, late, terms_of, entities) for layer in searched}
        else:
            futures = {layer: self._pool.submit(self._score_layer, layer, scope, request,
                                                vector, recipe, now, late, terms_of, entities)
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

    def search_knowledge(self, scope: Scope, request: RecallRequest, vector: list[float],
                         recipe: RecallRecipe | None = None) -> LayerCandidates:
        """The knowledge layer's candidates of a recall: the tenant's shared base searched in
        this service's store (in the ingress, its snapshot of the base), to be joined with
        the user's shard's personal candidates (``strata.shard.recall.answer_recall``)."""
        return self.search_layers(scope, request, vector, [Layer.KNOWLEDGE], recipe)

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
