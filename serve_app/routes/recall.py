"""``POST /v1/recall`` and what follows a recall (reinforcement, the recall log), and the
shards' hot-index statistics (``/v1/admin/hot-index``).

Hop by hop (docs/architecture.md): the user's shard answers with its working memory and
scored personal candidates; the knowledge base, when routed, is searched here from its
snapshot; ``assemble`` builds the context.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from fastapi.responses import Response
from pydantic import BaseModel
from starlette.background import BackgroundTask

from serve_app import metrics
from serve_app.guards import api_router
from serve_app.routes.base import IngressState, resolve
from serve_app.routes.deps import Caller
from strata import tracing
from strata.auth import scope_for
from strata.errors import InvalidInput, StrataError
from strata.models import Layer, RecallRequest, RecallResponse, Scope
from strata.recall.assembly import LayerCandidates, assemble
from strata.recall.recipes import DEFAULT, RECIPES, RecallRecipe
from strata.recall.service import RecallService
from strata.shard.models import MemoryAnswer
from strata.stores.ports import QueryEmbedding
from strata.stores.snapshot import KnowledgeSnapshot

__all__ = ["REINFORCE_EVERY_S", "RecallRoutes", "router"]

logger = logging.getLogger(__name__)
REINFORCE_EVERY_S = 0.5  # recalls' reinforcements gathered this long, then sent per shard

router = api_router()


class HotIndexStats(BaseModel):
    shards: list[dict[str, Any]]


class RecallRoutes(IngressState):
    """The recall and its aftermath."""

    @router.post("/v1/recall", response_model=RecallResponse)
    async def recall(self, body: RecallRequest, principal: Caller) -> Response:
        scope = scope_for(principal, body.user_id)
        if principal.agent_for(body.agent) != body.agent:  # recall sees what the agent may
            body = body.model_copy(update={"agent": principal.agent})
        if body.recipe is not None and body.recipe not in RECIPES:
            raise InvalidInput(f"unknown recipe {body.recipe!r}; one of {sorted(RECIPES)}")
        # the request's recipe, else its key's, else its tenant's (scenario profiles)
        name = (body.recipe or principal.recipe
                or self._settings.tenant_recipes.get(principal.tenant))
        recipe = RECIPES[name] if name else DEFAULT
        if name and name != body.recipe:
            body = body.model_copy(update={"recipe": name})
        viewer = principal.viewer(body.agent)  # the session's turns follow the session's rule
        with tracing.span("ingress.recall", scope, session_id=body.session_id,
                          recipe=name or "default") as span:
            response = await self._recall_hot(scope, body, recipe, viewer)
            span.set(count=len(response.items), degraded=response.degraded,
                     layers=[layer.value for layer in response.layers])
        metrics.observe_recall(response.timings_ms, response.degraded)
        # serialised once by pydantic (FastAPI would re-encode a returned model); the
        # reinforcement and the recall log go out after the response is sent
        return Response(content=response.model_dump_json(), media_type="application/json",
                        background=BackgroundTask(self._after_recall, scope, response))

    async def _recall_hot(self, scope: Scope, body: RecallRequest, recipe: RecallRecipe,
                          viewer: str | None) -> RecallResponse:
        """The fast path: one call to the user's shard, which answers with the working
        memory and its scored personal candidates from its hot index. The query is embedded
        in the shard (``STRATA_QUERY_EMBEDDING=shard``, the default) or by the Embedder
        deployment concurrently with the shard call (``embedder``); the knowledge base,
        when routed, is searched in this process from its snapshot."""
        started = time.perf_counter()
        embedding: Any = None
        if self._settings.query_embedding == "embedder":
            embedding = await self._embedder.embed_query.remote(body.query)._to_object_ref()
        answer: MemoryAnswer = await resolve(self._shards.for_scope(scope).serve_recall.remote(
            scope, body, [embedding] if embedding is not None else [], recipe, viewer))
        found = answer.found
        found.timings_ms["shard_call"] = (time.perf_counter() - started) * 1000
        if Layer.KNOWLEDGE in answer.decision.layers:
            query: QueryEmbedding = (answer.embedding if answer.embedding is not None
                                     else await (embedding if embedding is not None else
                                                 self._embedder.embed_query.remote(body.query)))
            with tracing.span("ingress.knowledge_search", scope):
                kb = await self._knowledge_candidates(body, query, recipe, scope)
            found = LayerCandidates(candidates=[*found.candidates, *kb.candidates],
                                    timings_ms={**found.timings_ms, **kb.timings_ms},
                                    degraded=found.degraded or kb.degraded)
        response = assemble(body, answer.decision, answer.working, found, recipe,
                            lambda: answer.most_used, answer.corrections)
        response.timings_ms["total"] = round((time.perf_counter() - started) * 1000, 2)
        return response

    async def _knowledge_candidates(self, body: RecallRequest, query: QueryEmbedding,
                                    recipe: RecallRecipe, scope: Scope) -> LayerCandidates:
        if self._kb_recall is None:
            vectors = await self._vector_store()
            assert self._dim is not None  # known once the store is
            self._kb_snapshot = KnowledgeSnapshot(
                vectors, self._dim, refresh_s=self._settings.knowledge_refresh_s)
            self._kb_recall = RecallService(self._kb_snapshot)
        return await asyncio.to_thread(self._kb_recall.search_layers, scope, body,
                                       query.vector, [Layer.KNOWLEDGE], recipe)

    @router.get("/v1/admin/hot-index", response_model=HotIndexStats)
    async def hot_index(self, principal: Caller) -> HotIndexStats:
        """(admin) Every shard's hot index: users, memories, bytes, loads, evictions."""
        principal.require_admin()
        stats = await asyncio.gather(*(resolve(self._shards.at(i).hot_stats.remote())
                                       for i in range(len(self._shards.handles))))
        return HotIndexStats(shards=list(stats))

    async def _after_recall(self, scope: Scope, response: RecallResponse) -> None:
        """Reinforce what was returned (through the user's shard, gathered with the other
        recalls of the next ``REINFORCE_EVERY_S``: one call per shard) and log ids, no text."""
        ids = [i.id for i in response.items if i.layer.long_term]
        if not ids:
            return
        self._returned.append((scope, ids))
        if self._reinforcer is None or self._reinforcer.done():
            self._reinforcer = asyncio.create_task(self._reinforce_soon())
        try:
            await asyncio.to_thread(self._redis.recalls.add, scope, ids, response.route)
        except StrataError as exc:  # the recall was answered; its log entry is best effort
            logger.warning("recall log not written: %s", exc.detail)

    async def _reinforce_soon(self) -> None:
        """Send the gathered reinforcements, one call per shard (best effort: access counts
        only, like the shard's own batched persistence)."""
        await asyncio.sleep(REINFORCE_EVERY_S)
        returned, self._returned = self._returned, []
        by_shard: dict[int, list[tuple[Scope, list[str]]]] = {}
        for scope, ids in returned:
            by_shard.setdefault(self._shards.ring.shard_for(scope), []).append((scope, ids))
        for index, batch in by_shard.items():
            self._shards.at(index).reinforce_many.remote(batch)
