"""The shard's half of a recall: the route, and the personal layers' candidates scored in
the user's hot index (``strata.recall.service`` assembles the answer in the ingress)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from strata.errors import StrataError
from strata.layers.corrections import corrections_of
from strata.models import LONG_TERM, Layer, RecallRequest, Scope
from strata.recall.assembly import LayerCandidates, could_pass, select_candidates
from strata.recall.granularity import without_speakers
from strata.recall.late import QueryBatcher, embed_queries
from strata.recall.recipes import DEFAULT, RecallRecipe
from strata.recall.service import RecallService, correction_items, decide_route
from strata.shard.longterm import LazyLongTerm
from strata.shard.models import MemoryAnswer, WorkingMemoryView
from strata.stores.hot import HotIndexStore
from strata.stores.ports import QueryEmbedding

__all__ = ["ShardRecall"]

logger = logging.getLogger(__name__)


class ShardRecall:
    """Recalls served from the shard's users' long-term memory. Queries the shard embeds
    itself are batched with the concurrent recalls' (``QueryBatcher``)."""

    def __init__(self, longterm: LazyLongTerm) -> None:
        self._longterm = longterm
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
            topic = None
            if hot is not None:
                hot.warm(scope)
                topic = without_speakers(request.query, hot.speakers(scope))
        except StrataError as exc:  # the durable store is down: degrade, as a layer would
            logger.warning("recall: the long-term memory of %s is unavailable: %s",
                           scope.key, exc.detail)
            return MemoryAnswer(decision=decision, working=working,
                                found=LayerCandidates(degraded=True))
        waited = time.perf_counter()
        if query is None:  # both embedded in one pass
            embedded, *rest = self.embed_queries([request.query, *([topic] if topic else [])])
        elif topic:  # the caller's embedding is under way: the name-free one beside it
            pending = self._beside.submit(self.embed_queries, [topic])
            embedded, rest = query(), pending.result()
        else:
            embedded, rest = query(), []
        vector = rest[0].vector if rest else embedded.vector
        waited = (time.perf_counter() - waited) * 1000
        late = None
        if hot is not None and embedded.tokens is not None and recipe.late_share > 0:
            late = hot.late_scorer(scope, embedded.tokens)
        found = service.search_layers(scope, request, vector, personal, recipe,
                                      late=late,
                                      terms_of=hot.terms_of(scope) if hot is not None else None)
        found.timings_ms["embedding_wait"] = waited
        needs_fallback = not select_candidates(found.candidates, recipe)[0]
        if not request.debug:  # only what assemble can use travels back (debug: every one)
            found.candidates = [c for c in found.candidates if could_pass(c, recipe)]
        return MemoryAnswer(decision=decision, working=working, found=found,
                            most_used=(service.most_used(scope, request.agent or "")
                                       if needs_fallback else []),
                            embedding=embedded if Layer.KNOWLEDGE in decision.layers else None,
                            corrections=corrections)

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
