"""RecallService: route → query layers → score; the fusion into a context is
``strata.recall.assembly``.

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

from strata.entities import Reach, ranked
from strata.errors import InvalidInput, StrataError
from strata.extract.exchanges import EXCHANGE
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
from strata.recall.granularity import TermsOf, fuse_granularities
from strata.recall.late import LateScorer
from strata.recall.recipes import DEFAULT, RecallRecipe
from strata.recall.routing import RouteClassifier, RouteDecision, route_query
from strata.recall.scoring import ScoredItem, score_hits
from strata.recall.stages import EPISODE_RANKING, Stage
from strata.recall.timeframe import mentioned_periods
from strata.stores.lexical import tokenize
from strata.stores.ports import VectorStore, score_ids

__all__ = ["EntityReach", "RecallService", "correction_items", "decide_route"]

logger = logging.getLogger(__name__)
# the user's entity index, asked for a question (``HotIndexStore.entity_reach``)
EntityReach = Callable[[str], Reach]


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


def _keyword_match(record: StoredRecord, query: str) -> bool:
    keywords = record.payload.get("metadata", {}).get("keywords", [])
    lowered = query.lower()
    return any(k and k.lower() in lowered for k in keywords)


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
            only_turns = flt.model_copy(update={"payload_not_equals": {"metadata.type": EXCHANGE}})
            turns = self._search_collection(collection, target, request.query, vector, recipe,
                                            only_turns)
            turns += self._said_then(collection, target, request.query, vector, recipe,
                                     only_turns, {h.record.id for h in turns})
            reached_hits, reached = self._entity_turns(
                collection, target, request, vector, recipe, entities, statuses,
                {h.record.id for h in turns})
            turns += reached_hits
            if not EPISODE_RANKING & set(recipe.stages):
                return turns  # as searched
            exchanges = (self._search_collection(
                collection, target, request.query, vector, recipe,
                flt.model_copy(update={"payload_equals": {"metadata.type": EXCHANGE}}))
                if recipe.runs(Stage.EXCHANGES) else [])

            def fetch(ids: list[str]) -> list[SearchHit]:
                return score_ids(self._vectors, collection, target, vector, request.query, ids,
                                 statuses, visible_to=request.agent or "")

            return fuse_granularities(turns, exchanges, fetch, request.query, recipe, late,
                                      terms_of or tokenize, reached=reached)
        hits = self._search_collection(collection, target, request.query, vector, recipe, flt)
        if layer is Layer.PROCEDURES and recipe.runs(Stage.KEYWORDS):
            matched = {h.record.id for h in hits}
            extra = [SearchHit(record=r, score=0.0, parts={"dense": 1.0})
                     for r in self._vectors.query(collection, target, flt, 100)
                     if r.id not in matched and _keyword_match(r, request.query)]
            hits = [h.model_copy(update={"parts": {**h.parts, "dense": 1.0}})
                    if _keyword_match(h.record, request.query) else h for h in hits] + extra
        return hits

    def _said_then(self, collection: Collection, target: Scope, query: str,
                   vector: list[float], recipe: RecallRecipe, flt: RecordFilter,
                   found: set[str]) -> list[SearchHit]:
        """The best ``period_candidates`` turns said on each date the query names ("on 9
        November, 2022", "in May 2023"; ``strata.recall.timeframe``) that the search did not
        find: a turn of that day that shares no words with the question can still be its
        answer ("What dish did Nate make on 9 November?" → "I tried out some cooking")."""
        if not recipe.runs(Stage.SAID_THEN):
            return []
        out: list[SearchHit] = []
        for period in mentioned_periods(query)[:recipe.max_dates]:  # a search each: bounded
            span = period.span()
            if span is None:
                continue
            within = flt.model_copy(update={"event_from": span[0].isoformat(),
                                            "event_before": span[1].isoformat()})
            for hit in self._vectors.search_hybrid(collection, target, vector, query,
                                                   recipe.period_candidates, within):
                if hit.record.id not in found:
                    found.add(hit.record.id)
                    out.append(hit)
        return out

    def _entity_turns(self, collection: Collection, target: Scope, request: RecallRequest,
                      vector: list[float], recipe: RecallRecipe, entities: EntityReach | None,
                      statuses: list[MemoryStatus], found: set[str]
                      ) -> tuple[list[SearchHit], dict[str, float]]:
        """The entities stage: the ``entity_candidates`` turns the user's entity index
        reaches from the query (best first by RRF of cosine and specificity,
        ``strata.entities.ranked``) that the caller may see and that are not forgotten; the
        ones the search did not find join the candidates, each with both raw similarities,
        and gets ``entity_weight`` in the episode ranking (with ``entity_found_too``, the
        reached turns the search found as well get it too). A turn the
        index reaches is a candidate without a similarity to survive on: the evidence it
        adds is, by construction, far from the question for the dense model."""
        if entities is None or not recipe.runs(Stage.ENTITIES):
            return [], {}
        reach = entities(request.query)
        if not reach.memories:
            return [], {}
        # the cosines of every reached turn the caller may see (the hot index scores its
        # rows exactly); both raw similarities only for the few that join the candidates
        visible = RecordFilter(ids=sorted(reach.memories), statuses=statuses,
                               visible_to=request.agent or "")
        cosine = {h.record.id: h.score for h in self._vectors.search_dense(
            collection, target, vector, len(reach.memories), visible)
            if float(h.record.payload.get("weight", 1.0)) > 0  # forgotten: weight 0
            and (h.record.payload.get("metadata") or {}).get("type") != EXCHANGE}
        order = ranked(reach, cosine, recipe.entity_sources)[:recipe.entity_candidates]
        new = [m for m in order if m not in found]
        hits = (score_ids(self._vectors, collection, target, vector, request.query, new,
                          statuses, visible_to=request.agent or "") if new else [])
        return hits, dict.fromkeys(order if recipe.entity_found_too else new, 1.0)

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
