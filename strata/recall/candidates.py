"""The candidates phase of recall: where a layer's candidates come from, one stage a source.

``CANDIDATES`` is the phase (``strata.recall.pipeline``): the recipe's stages run in order
over one layer's ``LayerSearch``, each source adding the hits it finds that the earlier ones
did not. The layer's search (``search``) comes first; the episodes layer adds the turns
said on a date the query names (``said_then``), the turns the user's entity index reaches
(``entities``) and the exchanges matched as a second granularity (``exchanges``, fused with
their turns by the episodes' ranking); the procedures layer adds those whose keywords the
query contains (``keywords``). A source that does not apply to the layer adds nothing.
Every store call carries the caller's scope and what the calling agent may see.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from strata.entities import Reach, ranked
from strata.extract.exchanges import EXCHANGE
from strata.models import (
    Collection,
    Layer,
    MemoryStatus,
    RecallRequest,
    RecordFilter,
    Scope,
    SearchHit,
    StoredRecord,
)
from strata.recall.pipeline import Phase
from strata.recall.recipes import RecallRecipe
from strata.recall.stages import Stage
from strata.recall.timeframe import mentioned_periods
from strata.stores.ports import VectorStore, score_ids

__all__ = ["CANDIDATES", "EntityReach", "LayerSearch"]

# the user's entity index, asked for a question (``HotIndexStore.entity_reach``)
EntityReach = Callable[[str], Reach]


@dataclass
class LayerSearch:
    """One layer's search: what the candidate stages read, and the hits they found."""

    vectors: VectorStore
    layer: Layer
    scope: Scope  # the caller's; knowledge is searched in the tenant's shared scope
    request: RecallRequest
    vector: list[float]
    recipe: RecallRecipe
    entities: EntityReach | None = None
    hits: list[SearchHit] = field(default_factory=list)  # episodes: turns, not exchanges
    exchanges: list[SearchHit] = field(default_factory=list)
    reached: dict[str, float] = field(default_factory=dict)  # the entities stage's turns

    @property
    def collection(self) -> Collection:
        return self.layer.collection

    @property
    def target(self) -> Scope:
        return Scope.shared(self.scope.tenant) if self.layer is Layer.KNOWLEDGE else self.scope

    @property
    def statuses(self) -> list[MemoryStatus]:
        return ([MemoryStatus.ACTIVE, MemoryStatus.COLD] if self.request.include_cold
                else [MemoryStatus.ACTIVE])

    @property
    def viewer(self) -> str:
        return self.request.agent or ""

    @property
    def visible(self) -> RecordFilter:
        """What the agent may see of the collection (the knowledge base is everyone's)."""
        return RecordFilter(statuses=self.statuses,
                            visible_to=None if self.layer is Layer.KNOWLEDGE else self.viewer)

    @property
    def filter(self) -> RecordFilter:
        """What the layer's sources search: what the agent may see; in the episodes layer,
        turns only (exchanges are a stage of their own)."""
        if self.layer is Layer.EPISODES:
            return self.visible.model_copy(
                update={"payload_not_equals": {"metadata.type": EXCHANGE}})
        return self.visible

    def found(self) -> set[str]:
        return {h.record.id for h in self.hits}

    def score(self, ids: list[str]) -> list[SearchHit]:
        """The named rows of the layer with both raw similarities to the query."""
        return score_ids(self.vectors, self.collection, self.target, self.vector,
                         self.request.query, ids, self.statuses, visible_to=self.viewer)


def search_collection(vectors: VectorStore, collection: Collection, target: Scope,
                      query: str, vector: list[float], recipe: RecallRecipe,
                      flt: RecordFilter) -> list[SearchHit]:
    """One search of one collection the recipe's way; raw similarities in ``parts``."""
    k = recipe.candidates_per_layer
    if recipe.search == "dense":
        hits = vectors.search_dense(collection, target, vector, k, flt)
        return [h.model_copy(update={"parts": {"dense": h.score}}) for h in hits]
    if recipe.search == "lexical":
        hits = vectors.search_lexical(collection, target, query, k, flt)
        return [h.model_copy(update={"parts": {"lexical": h.score}}) for h in hits]
    return vectors.search_hybrid(collection, target, vector, query, k, flt)


def _search(s: LayerSearch) -> None:
    """The layer's own search (hybrid, dense or lexical: the recipe's ``search``)."""
    s.hits += search_collection(s.vectors, s.collection, s.target, s.request.query, s.vector,
                                s.recipe, s.filter)


def _said_then(s: LayerSearch) -> None:
    """Episodes: the best ``period_candidates`` turns said on each date the query names ("on
    9 November, 2022", "in May 2023"; ``strata.recall.timeframe``) that the search did not
    find: a turn of that day that shares no words with the question can still be its answer
    ("What dish did Nate make on 9 November?" → "I tried out some cooking")."""
    if s.layer is not Layer.EPISODES:
        return
    found = s.found()
    flt = s.filter
    for period in mentioned_periods(s.request.query)[:s.recipe.max_dates]:  # bounded
        span = period.span()
        if span is None:
            continue
        within = flt.model_copy(update={"event_from": span[0].isoformat(),
                                        "event_before": span[1].isoformat()})
        for hit in s.vectors.search_hybrid(s.collection, s.target, s.vector, s.request.query,
                                           s.recipe.period_candidates, within):
            if hit.record.id not in found:
                found.add(hit.record.id)
                s.hits.append(hit)


def _entities(s: LayerSearch) -> None:
    """Episodes: the ``entity_candidates`` turns the user's entity index reaches from the
    query (best first by RRF of cosine and specificity, ``strata.entities.ranked``) that the
    caller may see and that are not forgotten; the ones the search did not find join the
    candidates, each with both raw similarities, and gets ``entity_weight`` in the episode
    ranking (with ``entity_found_too``, the reached turns the search found as well get it
    too). A turn the index reaches is a candidate without a similarity to survive on: the
    evidence it adds is, by construction, far from the question for the dense model."""
    if s.layer is not Layer.EPISODES or s.entities is None:
        return
    reach = s.entities(s.request.query)
    if not reach.memories:
        return
    # the cosines of every reached turn the caller may see (the hot index scores its rows
    # exactly); both raw similarities only for the few that join the candidates
    visible = RecordFilter(ids=sorted(reach.memories), statuses=s.statuses,
                           visible_to=s.viewer)
    cosine = {h.record.id: h.score for h in s.vectors.search_dense(
        s.collection, s.target, s.vector, len(reach.memories), visible)
        if float(h.record.payload.get("weight", 1.0)) > 0  # forgotten: weight 0
        and (h.record.payload.get("metadata") or {}).get("type") != EXCHANGE}
    order = ranked(reach, cosine, s.recipe.entity_sources)[:s.recipe.entity_candidates]
    found = s.found()
    new = [m for m in order if m not in found]
    s.hits += s.score(new) if new else []
    s.reached = dict.fromkeys(order if s.recipe.entity_found_too else new, 1.0)


def _exchanges(s: LayerSearch) -> None:
    """Episodes: the exchanges (two neighbouring turns, ``strata.extract.exchanges``)
    matched as a second granularity; the episodes' ranking fuses them with their turns."""
    if s.layer is not Layer.EPISODES:
        return
    flt = s.visible.model_copy(update={"payload_equals": {"metadata.type": EXCHANGE}})
    s.exchanges += search_collection(s.vectors, s.collection, s.target, s.request.query,
                                     s.vector, s.recipe, flt)


def _keyword_match(record: StoredRecord, query: str) -> bool:
    keywords = record.payload.get("metadata", {}).get("keywords", [])
    lowered = query.lower()
    return any(k and k.lower() in lowered for k in keywords)


def _keywords(s: LayerSearch) -> None:
    """Procedures: one whose keywords the query contains counts as a full dense match, found
    by the search or not."""
    if s.layer is not Layer.PROCEDURES:
        return
    matched = s.found()
    extra = [SearchHit(record=r, score=0.0, parts={"dense": 1.0})
             for r in s.vectors.query(s.collection, s.target, s.filter, 100)
             if r.id not in matched and _keyword_match(r, s.request.query)]
    s.hits = [h.model_copy(update={"parts": {**h.parts, "dense": 1.0}})
              if _keyword_match(h.record, s.request.query) else h for h in s.hits] + extra


CANDIDATES: Phase[LayerSearch] = Phase("candidates", {
    Stage.SEARCH: _search, Stage.SAID_THEN: _said_then, Stage.ENTITIES: _entities,
    Stage.EXCHANGES: _exchanges, Stage.KEYWORDS: _keywords})
