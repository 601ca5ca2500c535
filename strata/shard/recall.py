"""The shard's half of a recall: the route, and the personal layers' candidates scored in
the user's hot index; and the other half, where the shard's answer meets the knowledge
base's candidates (``needs_knowledge``, ``answer_recall``: the ingress calls them around the
shard call, the knowledge searched by ``RecallService.search_knowledge``)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from strata import tracing
from strata.errors import StrataError
from strata.layers.corrections import corrections_of
from strata.models import LONG_TERM, Layer, RecallRequest, RecallResponse, Scope
from strata.recall.assembly import (
    LayerCandidates,
    assemble,
    best_of,
    could_pass,
    select_candidates,
)
from strata.recall.expansion import QueryExpander
from strata.recall.late import LateScorer, QueryBatcher, embed_queries
from strata.recall.recipes import DEFAULT, RecallRecipe
from strata.recall.service import RecallService, correction_items, decide_route
from strata.recall.speakers import without_speakers
from strata.recall.stages import Stage
from strata.shard.longterm import LazyLongTerm
from strata.shard.models import MemoryAnswer, WorkingMemoryView
from strata.stores.hot import HotIndexStore
from strata.stores.ports import QueryEmbedding

__all__ = ["ShardRecall", "answer_recall", "needs_knowledge"]

logger = logging.getLogger(__name__)


class ShardRecall:
    """Recalls served from the shard's users' long-term memory. Queries the shard embeds
    itself are batched with the concurrent recalls' (``QueryBatcher``). With an
    ``expander`` (recall's optional LLM path, ``strata.recall.expansion``), the statements it
    writes for a question are searched too, the model asked while the question is."""

    def __init__(self, longterm: LazyLongTerm, expander: QueryExpander | None = None) -> None:
        self._longterm = longterm
        self._expander = expander
        self._asking = (ThreadPoolExecutor(max_workers=8, thread_name_prefix="query-expansion")
                        if expander is not None else None)
        self._service: RecallService | None = None
        self._queries: QueryBatcher | None = None
        self._lock = threading.Lock()
        # embeds a name-free query while the caller's embedding of the query is awaited
        self._beside = ThreadPoolExecutor(max_workers=8, thread_name_prefix="topic-query")

    def recall_memory(self, scope: Scope, request: RecallRequest,
                      working: WorkingMemoryView | None,
                      query: Callable[[], QueryEmbedding] | None = None,
                      recipe: RecallRecipe = DEFAULT) -> MemoryAnswer:
        """The personal layers' candidates for one query, next to the session's ``working``
        memory. ``query`` gives the query's embedding (computed concurrently by the caller;
        it is asked for only once the user's index is loaded and the route is known);
        without it the shard embeds the query with its own model, and the answer carries
        the embedding."""
        decision = decide_route(request, working is not None, recipe=recipe)
        try:
            longterm = self._longterm.get()
            if self._service is None:
                self._service = RecallService(longterm.vectors, parallelism=1)
            service = self._service
            personal = [layer for layer in decision.layers if layer in LONG_TERM]
            corrections = (correction_items(corrections_of(longterm.vectors, scope))
                           if Layer.KNOWLEDGE in decision.layers else {})
            if not personal:
                return MemoryAnswer(decision=decision, working=working,
                                    found=LayerCandidates(), corrections=corrections)
            vectors = longterm.vectors
            hot = vectors if isinstance(vectors, HotIndexStore) else None
            # the dense search of the personal layers: the query without the names of the
            # people speaking in the user's conversations (granularity.without_speakers)
            topic, speakers = None, frozenset[str]()
            if hot is not None:
                with tracing.span("hot_index.warm", scope):  # a cold user: loaded from Milvus
                    hot.warm(scope)
                speakers = hot.speakers(scope)
                topic = without_speakers(request.query, speakers)
        except StrataError as exc:  # the durable store is down: degrade, as a layer would
            logger.warning("recall: the long-term memory of %s is unavailable: %s",
                           scope.key, exc.detail)
            return MemoryAnswer(decision=decision, working=working,
                                found=LayerCandidates(degraded=True))
        statements = (self._asking.submit(self._expander.expand, request.query, speakers)
                      if self._asking is not None and self._expander is not None
                      and recipe.runs(Stage.EXPANSION) else None)
        waited = time.perf_counter()
        with tracing.span("shard.query_embedding", scope):
            if query is None:  # both embedded in one pass
                embedded, *rest = self.embed_queries(
                    [request.query, *([topic] if topic else [])])
            elif topic:  # the caller's embedding is under way: the name-free one beside it
                pending = self._beside.submit(self.embed_queries, [topic])
                embedded, rest = query(), pending.result()
            else:
                embedded, rest = query(), []
        vector = rest[0].vector if rest else embedded.vector
        waited = (time.perf_counter() - waited) * 1000
        with tracing.span("hot_index.search", scope,
                          layers=[layer.value for layer in personal]) as span:
            found = service.search_layers(
                scope, request, vector, personal, recipe,
                late=_late_scorer(hot, scope, embedded, recipe),
                terms_of=hot.terms_of(scope) if hot is not None else None,
                entities=(hot.entity_reach(scope) if hot is not None
                          and recipe.runs(Stage.ENTITIES) else None))
            span.set(count=len(found.candidates))
        if statements is not None:  # the expansion stage (asked only when the recipe runs it)
            started = time.perf_counter()
            written = statements.result()
            found = best_of(found, *self._search_statements(
                scope, request, written, speakers, personal, recipe, service, hot),
                weight=recipe.expansion_weight)
            found.timings_ms["expansion"] = (time.perf_counter() - started) * 1000
        found.timings_ms["embedding_wait"] = waited
        needs_fallback = not select_candidates(found.candidates, recipe)[0]
        if not request.debug:  # only what assemble can use travels back (debug: every one)
            found.candidates = [c for c in found.candidates if could_pass(c, recipe)]
        return MemoryAnswer(decision=decision, working=working, found=found,
                            most_used=(service.most_used(scope, request.agent or "")
                                       if needs_fallback else []),
                            embedding=embedded if Layer.KNOWLEDGE in decision.layers else None,
                            corrections=corrections)

    def _search_statements(self, scope: Scope, request: RecallRequest, statements: list[str],
                           speakers: frozenset[str], personal: list[Layer],
                           recipe: RecallRecipe, service: RecallService,
                           hot: HotIndexStore | None) -> list[LayerCandidates]:
        """Each statement searched as the question is (its dense query without the
        speakers' names), every one of them embedded in one batch."""
        if not statements:
            return []
        topics = [without_speakers(s, speakers) if hot is not None else None
                  for s in statements]
        embedded = iter(self.embed_queries(
            [t for s, topic in zip(statements, topics, strict=True)
             for t in (s, *([topic] if topic else []))]))
        found = []
        for statement, topic in zip(statements, topics, strict=True):
            whole = next(embedded)
            vector = next(embedded).vector if topic else whole.vector
            searched = service.search_layers(
                scope, request.model_copy(update={"query": statement}), vector, personal,
                recipe, late=_late_scorer(hot, scope, whole, recipe),
                terms_of=hot.terms_of(scope) if hot is not None else None)
            searched.statements = [statement]
            found.append(searched)
        return found

    def embed_queries(self, texts: list[str]) -> list[QueryEmbedding]:
        """The queries' embeddings by the shard's embedder (its own model, or the shared
        Embedder deployment's with ``STRATA_SHARD_EMBEDDING=embedder``), in one batch with
        concurrent recalls' queries."""
        started = time.perf_counter()
        if self._queries is None:
            embedder = self._longterm.get().embedder
            with self._lock:
                if self._queries is None:
                    self._queries = QueryBatcher(lambda texts: embed_queries(embedder, texts))
        embedded = self._queries.embed_all(texts)
        logger.debug("%d queries embedded in the shard in %.1f ms", len(texts),
                     (time.perf_counter() - started) * 1000)
        return embedded

    def batching(self) -> dict[str, int]:
        """How many query batches the shard embedded, and how many queries they held."""
        queries = self._queries
        if queries is None:
            return {}
        return {"query_batches": queries.batches, "queries_embedded": queries.queries}


def _late_scorer(hot: HotIndexStore | None, scope: Scope, embedded: QueryEmbedding,
                 recipe: RecallRecipe) -> LateScorer | None:
    """Late interaction over the query's token vectors, where the index keeps the texts'."""
    if hot is None or embedded.tokens is None or not recipe.runs(Stage.LATE_INTERACTION):
        return None
    return hot.late_scorer(scope, embedded.tokens)


def needs_knowledge(answer: MemoryAnswer) -> bool:
    """Whether the recall the shard answered searches the knowledge base too (its route)."""
    return Layer.KNOWLEDGE in answer.decision.layers


def answer_recall(request: RecallRequest, answer: MemoryAnswer, recipe: RecallRecipe,
                  knowledge: LayerCandidates | None = None) -> RecallResponse:
    """The recall's answer: the shard's personal candidates and, when routed, the knowledge
    base's (``RecallService.search_knowledge``), assembled with the session's working
    memory into the budgeted context."""
    found = answer.found if knowledge is None else answer.found.joined(knowledge)
    return assemble(request, answer.decision, answer.working, found, recipe,
                    lambda: answer.most_used, answer.corrections)
