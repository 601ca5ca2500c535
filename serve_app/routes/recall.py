"""``POST /v1/recall`` and the shards' hot-index statistics (``/v1/admin/hot-index``).

Hop by hop (docs/architecture.md): the user's shard answers with its working memory and
scored personal candidates; the knowledge base, when routed, is searched in this replica
from its snapshot (``KnowledgeAccess.candidates``); ``answer_recall`` assembles the context
(the recipe is ``choose_recipe``'s); what follows the answer (reinforcement, the recall
log) is ``RecallAftermath``'s.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fastapi.responses import Response
from pydantic import BaseModel
from starlette.background import BackgroundTask

from actors.directory import ShardDirectory
from serve_app import metrics
from serve_app.clients import EmbedderClient, resolve
from serve_app.guards import api_router
from serve_app.knowledge_access import KnowledgeAccess
from serve_app.routes.deps import Aftermath, Caller, Embedding, Knowledge, ReplicaSettings, Shards
from strata import tracing
from strata.auth import scope_for
from strata.models import RecallRequest, RecallResponse, Scope
from strata.recall.assembly import LayerCandidates
from strata.recall.recipes import RecallRecipe, choose_recipe
from strata.settings import Settings
from strata.shard.models import MemoryAnswer
from strata.shard.recall import answer_recall, needs_knowledge
from strata.stores.ports import QueryEmbedding

__all__ = ["router"]

router = api_router()


class HotIndexStats(BaseModel):
    shards: list[dict[str, Any]]


@router.post("/v1/recall", response_model=RecallResponse)
async def recall(body: RecallRequest, principal: Caller, settings: ReplicaSettings,
                 shards: Shards, embedder: Embedding, knowledge: Knowledge,
                 aftermath: Aftermath) -> Response:
    scope = scope_for(principal, body.user_id)
    if principal.agent_for(body.agent) != body.agent:  # recall sees what the agent may
        body = body.model_copy(update={"agent": principal.agent})
    # the request's recipe, else its key's, else its tenant's (scenario profiles)
    name, recipe = choose_recipe(body.recipe, principal.recipe,
                                 settings.tenant_recipes.get(principal.tenant))
    if name and name != body.recipe:
        body = body.model_copy(update={"recipe": name})
    viewer = principal.viewer(body.agent)  # the session's turns follow the session's rule
    with tracing.span("ingress.recall", scope, session_id=body.session_id,
                      recipe=name or "default") as span:
        response = await _recall_hot(scope, body, recipe, viewer, settings, shards, embedder,
                                     knowledge)
        span.set(count=len(response.items), degraded=response.degraded,
                 layers=[layer.value for layer in response.layers])
    metrics.observe_recall(response.timings_ms, response.degraded)
    # serialised once by pydantic (FastAPI would re-encode a returned model); the
    # reinforcement and the recall log go out after the response is sent
    return Response(content=response.model_dump_json(), media_type="application/json",
                    background=BackgroundTask(aftermath.after, scope, response))


async def _recall_hot(scope: Scope, body: RecallRequest, recipe: RecallRecipe,
                      viewer: str | None, settings: Settings, shards: ShardDirectory,
                      embedder: EmbedderClient, knowledge: KnowledgeAccess) -> RecallResponse:
    """The fast path: one call to the user's shard, which answers with the working
    memory and its scored personal candidates from its hot index. The query is embedded
    in the shard (``STRATA_QUERY_EMBEDDING=shard``, the default) or by the Embedder
    deployment concurrently with the shard call (``embedder``); the knowledge base,
    when routed, is searched in this process from its snapshot."""
    started = time.perf_counter()
    embedding: Any = None
    if settings.query_embedding == "embedder":
        embedding = await embedder.handle.embed_query.remote(body.query)._to_object_ref()
    answer: MemoryAnswer = await resolve(shards.for_scope(scope).serve_recall.remote(
        scope, body, [embedding] if embedding is not None else [], recipe, viewer))
    answer.found.timings_ms["shard_call"] = (time.perf_counter() - started) * 1000
    kb: LayerCandidates | None = None
    if needs_knowledge(answer):
        query: QueryEmbedding = (answer.embedding if answer.embedding is not None
                                 else await (embedding if embedding is not None else
                                             embedder.handle.embed_query.remote(body.query)))
        with tracing.span("ingress.knowledge_search", scope):
            kb = await knowledge.candidates(scope, body, query, recipe)
    response = answer_recall(body, answer, recipe, kb)
    response.timings_ms["total"] = round((time.perf_counter() - started) * 1000, 2)
    return response


@router.get("/v1/admin/hot-index", response_model=HotIndexStats)
async def hot_index(principal: Caller, shards: Shards) -> HotIndexStats:
    """(admin) Every shard's hot index: users, memories, bytes, loads, evictions."""
    principal.require_admin()
    stats = await asyncio.gather(*(resolve(shards.at(i).hot_stats.remote())
                                   for i in range(len(shards.handles))))
    return HotIndexStats(shards=list(stats))
