"""The FastAPI ingress: authentication, validation, and routing to Strata's services.

The scope (tenant from the API key, user from the request) is fixed here and is the only
way any store is reached.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import AsyncIterator
from typing import Any, cast

import ray
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from ray import serve
from starlette.background import BackgroundTask

from actors.bootstrap import ensure_backend
from actors.boundary import strata_errors
from actors.directory import ShardDirectory
from actors.store_owner import OWNER_NAME, vector_store_for
from serve_app import guards, metrics
from serve_app.inspector import InspectorRoutes, router, tenant_users
from serve_app.options import STOP_QUICKLY
from strata.auth import Principal, authenticate, scope_for
from strata.errors import BackendUnavailable, InvalidInput, NotFound, StrataError
from strata.layers.corrections import CorrectionIn, correction_create
from strata.layers.knowledge import (
    DocumentIn,
    ImportReport,
    KnowledgeBase,
    ValidationQuestion,
    import_lock_name,
)
from strata.layers.memories import MemoryCreate, MemoryPatch
from strata.layers.proactive import FollowUpFeedback, FollowUpRequest
from strata.layers.transfer import read_scope
from strata.models import (
    Collection,
    MemoryItem,
    MemoryKind,
    MemoryStatus,
    RecallRequest,
    RecallResponse,
    Scope,
    check_agent,
    check_name,
    context_name,
    utcnow,
)
from strata.portability import (
    MEDIA_TYPE,
    ExportHeader,
    ImportCounts,
    header_line,
    memory_lines,
    parse_export,
)
from strata.recall.recipes import DEFAULT, RECIPES, RecallRecipe
from strata.recall.service import LayerCandidates, RecallService, assemble
from strata.runtime import check_ready
from strata.settings import Settings
from strata.shard.models import MemoryAnswer, TurnAck, TurnIn
from strata.stores.coordination import ClusterLock, MetricsBoard
from strata.stores.ports import QueryEmbedding
from strata.stores.redis import RedisStore
from strata.stores.snapshot import KnowledgeSnapshot

logger = logging.getLogger(__name__)
REINFORCE_EVERY_S = 0.5  # recalls' reinforcements gathered this long, then sent per shard
PUBLISH_EVERY_S = 5.0  # a replica's metric counts reach Redis this often while it serves


def _body_limit() -> int:
    """STRATA_MAX_BODY_BYTES of the ingress this replica runs (its settings reach the replica
    after the app is built, so the middleware asks for them per request)."""
    ingress = cast("IngressService", serve.get_replica_context().servable_object)
    return ingress.max_body_bytes


def _authenticate(request: Request) -> Principal:
    """The key check of every route, for the MCP endpoint (which is not a method)."""
    return cast("IngressService", serve.get_replica_context().servable_object)._principal(request)


try:  # the memory tools over streamable HTTP, at /mcp — with the [mcp] extra installed
    from serve_app.mcp_http import McpEndpoint
    mcp: Any = McpEndpoint(_authenticate)
except ImportError:  # pragma: no cover - the base install: no /mcp
    logger.info("the mcp package is not installed: no /mcp endpoint (pip install strata[mcp])")
    mcp = None
api = FastAPI(title="Strata", version="0.1.0", lifespan=mcp.lifespan if mcp else None,
              description="Layered memory for LLM agents (see README and docs/).")
guards.install(api, body_limit=_body_limit)  # size limit, strict JSON, one error shape
api.include_router(router)  # the inspector: /ui/ and the endpoints it reads
if mcp is not None:
    api.add_route("/mcp", mcp, include_in_schema=False)


@api.middleware("http")
async def _count(request: Request, call_next: Any) -> Any:
    started = time.perf_counter()
    response = await call_next(request)
    route = request.scope.get("route")
    path = getattr(route, "path", "unmatched")
    metrics.observe_request(path, request.method, response.status_code,
                            time.perf_counter() - started)
    cast("IngressService", serve.get_replica_context().servable_object).counted()
    return response


class TurnRequest(TurnIn):
    user_id: str


class TurnBatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str
    turns: list[TurnIn] = Field(min_length=1, description="in order; one session's turns")


class TurnBatchResponse(BaseModel):
    session_id: str
    acks: list[TurnAck]


class ImportRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    documents: list[DocumentIn] = Field(min_length=1, max_length=1000)
    validate_: list[ValidationQuestion] = Field(default_factory=list, alias="validate")


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=4000)
    top_k: int = Field(default=5, ge=1, le=50)


class UserRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str


class TaskStateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str
    patch: dict[str, Any]


class JsonLines(StreamingResponse):
    """An export: JSON Lines, streamed (so the OpenAPI document names the media type)."""

    media_type = MEDIA_TYPE


# the route reads the raw body whatever its Content-Type; text/plain is listed as well for
# clients and generators that know no serializer for JSON Lines
_EXPORT_BODY = {"requestBody": {"required": True, "description": "an export (JSON Lines)",
                                "content": {MEDIA_TYPE: {"schema": {"type": "string"}},
                                            "text/plain": {"schema": {"type": "string"}}}}}


def _read_user(vectors: Any, tenant: str, user: str,
               viewer: str | None = None) -> list[MemoryItem]:
    """A user's memories, those ``viewer`` may see (``Principal.viewer``; None: all)."""
    return [item for item in read_scope(vectors, Scope(tenant=tenant, user=user))
            if item.visible_to(viewer)]


def _agent_param(agent: str | None) -> str | None:
    """An ``agent`` query parameter, checked."""
    try:
        return check_agent(agent)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


def _shard_unavailable(exc: Exception) -> BackendUnavailable:
    ShardDirectory.note_dead()  # moved to another node: look the pool up before the next call
    return BackendUnavailable(f"a session shard is restarting; retry ({exc})")


async def _resolve(ref: Any) -> Any:
    """Await an actor call, surfacing Strata errors and turning dead actors into 503."""
    with strata_errors(_shard_unavailable):
        return await ref


class IngressService(InspectorRoutes):
    """Routes HTTP to Strata's services."""

    def __init__(self, settings: dict[str, Any], embedder: Any, recall: Any,
                 namespace: str | None) -> None:
        self._settings = Settings(**settings)
        self.max_body_bytes = self._settings.max_body_bytes
        self._embedder = embedder
        self._recall = recall
        self._namespace = namespace
        self._redis = RedisStore(self._settings.redis_url, self._settings.redis_prefix)
        # deployed alone (serve deploy, a RayService), the app starts what it needs itself
        self._shards = ensure_backend(self._settings, namespace)
        self._dim: int | None = None
        self._kb: KnowledgeBase | None = None
        self._kb_recall: RecallService | None = None
        self._kb_snapshot: KnowledgeSnapshot | None = None
        self._import_locks: dict[str, asyncio.Lock] = {}  # this replica's imports
        # … and every other replica's and job's: the lock is in Redis
        self._cluster_lock = ClusterLock(self._settings.redis_url, self._settings.redis_prefix)
        self._metrics_board = MetricsBoard(self._settings.redis_url, self._settings.redis_prefix)
        self._replica = f"{socket.gethostname()}:{os.getpid()}"
        self._publisher: asyncio.Task[None] | None = None
        self._returned: list[tuple[Scope, list[str]]] = []  # recalls' items, to reinforce
        self._reinforcer: asyncio.Task[None] | None = None

    def _principal(self, request: Request) -> Principal:
        return authenticate(request.headers.get("authorization"), self._settings.api_keys)

    # -- health --------------------------------------------------------------------------
    async def _embedder_info(self) -> dict[str, Any]:
        info: dict[str, Any] = await self._embedder.info.remote()
        self._dim = int(info["dim"])
        return info

    def _vectors_ping(self) -> None:
        if self._dim is None:
            raise RuntimeError("embedder not ready yet")
        vector_store_for(self._settings, self._dim, self._namespace).ping()

    @api.get("/healthz")
    async def healthz(self) -> dict[str, str]:
        return {"status": "ok"}

    @api.get("/readyz")
    async def readyz(self) -> JSONResponse:
        async def embedder_check() -> None:
            info = await self._embedder_info()
            vec = await self._embedder.embed.remote("readiness probe")
            if len(vec) != info["dim"]:
                raise RuntimeError("embedder returned a vector of the wrong size")

        try:
            await asyncio.wait_for(embedder_check(), timeout=30)
            embed_status = "ok"
        except Exception as exc:  # a probe reports, never raises
            embed_status = f"{type(exc).__name__}: {exc}"
        status = await asyncio.to_thread(
            check_ready, {"milvus": self._vectors_ping, "redis": self._redis.ping})
        status["embedder"] = embed_status
        ready = all(v == "ok" for v in status.values())
        return JSONResponse(status_code=200 if ready else 503,
                            content={"ready": ready, "checks": status})

    @api.get("/metrics")
    async def metrics_endpoint(self) -> Response:
        try:
            await asyncio.to_thread(metrics.update_backlog, self._redis.queues)
        except StrataError as exc:
            logger.warning("metrics: queue backlog unavailable: %s", exc.detail)
        if self._settings.milvus_is_lite:
            try:
                owner = ray.get_actor(OWNER_NAME, namespace=self._namespace)
                metrics.update_flush(await owner.stats.remote())
            except Exception as exc:  # metrics never fail the scrape
                logger.warning("metrics: flush stats unavailable: %s", exc)
        try:  # every replica's counts, this one's up to now
            await asyncio.to_thread(self._metrics_board.publish, self._replica,
                                    metrics.local_samples())
            summed = await asyncio.to_thread(self._metrics_board.gather)
        except StrataError as exc:
            logger.warning("metrics: other replicas' counts unavailable: %s", exc.detail)
            summed = None
        return Response(content=metrics.render(summed), media_type="text/plain; version=0.0.4")

    def counted(self) -> None:
        """A request was counted: publish this replica's counts within PUBLISH_EVERY_S."""
        if self._publisher is None or self._publisher.done():
            self._publisher = asyncio.create_task(self._publish_soon())

    async def _publish_soon(self) -> None:
        await asyncio.sleep(PUBLISH_EVERY_S)
        try:
            await asyncio.to_thread(self._metrics_board.publish, self._replica,
                                    metrics.local_samples())
        except StrataError as exc:  # the next request or scrape publishes again
            logger.warning("metrics: publish failed: %s", exc.detail)

    # -- sessions (working memory) -------------------------------------------------------
    @api.post("/v1/sessions/{session_id}/turns")
    async def append_turn(self, session_id: str, body: TurnRequest,
                          request: Request) -> dict[str, Any]:
        principal = self._principal(request)
        scope = scope_for(principal, body.user_id)
        ack = await _resolve(self._shards.for_scope(scope).append_turn.remote(
            scope, session_id, body.role, body.content, body.created_at, body.metadata,
            body.turn_id, body.context, principal.agent_for(body.agent),
            principal.viewer(body.agent)))
        result: dict[str, Any] = ack.model_dump(mode="json")
        return result

    @api.post("/v1/sessions/{session_id}/turns/batch")
    async def append_turns(self, session_id: str, body: TurnBatchRequest,
                           request: Request) -> TurnBatchResponse:
        """Many turns of one session in order, acknowledged once all are durable."""
        principal = self._principal(request)
        scope = scope_for(principal, body.user_id)
        named = {t.agent for t in body.turns if t.agent}
        if len(named) > 1:
            raise InvalidInput(f"a batch is one agent's turns; it names {sorted(named)}")
        agent = principal.agent_for(next(iter(named), None))
        turns = [t.model_copy(update={"agent": agent}) for t in body.turns]
        acks = await _resolve(self._shards.for_scope(scope).append_turns.remote(
            scope, session_id, turns, principal.viewer(agent)))
        return TurnBatchResponse(session_id=session_id, acks=acks)

    @api.post("/v1/sessions/{session_id}/close")
    async def close_session(self, session_id: str, body: UserRequest,
                            request: Request) -> dict[str, Any]:
        scope = scope_for(self._principal(request), body.user_id)
        ack = await _resolve(self._shards.for_scope(scope).close.remote(scope, session_id))
        result: dict[str, Any] = ack.model_dump(mode="json")
        return result

    @api.get("/v1/sessions/{session_id}/working-memory")
    async def working_memory(self, session_id: str, user_id: str, request: Request,
                             agent: str | None = None) -> dict[str, Any]:
        """The session's working memory; a session of an agent is that agent's (or an
        admin's) to read."""
        principal = self._principal(request)
        scope = scope_for(principal, user_id)
        view = await _resolve(self._shards.for_scope(scope).view.remote(
            scope, session_id, principal.viewer(_agent_param(agent))))
        result: dict[str, Any] = view.model_dump(mode="json")
        return result

    @api.patch("/v1/sessions/{session_id}/task-state")
    async def task_state(self, session_id: str, body: TaskStateRequest,
                         request: Request) -> dict[str, Any]:
        scope = scope_for(self._principal(request), body.user_id)
        state = await _resolve(self._shards.for_scope(scope).patch_task_state.remote(
            scope, session_id, body.patch))
        return {"session_id": session_id, "task_state": state}


    # -- recall --------------------------------------------------------------------------------
    @api.post("/v1/recall", response_model=RecallResponse)
    async def recall(self, body: RecallRequest, request: Request) -> Response:
        principal = self._principal(request)
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
        if recipe.serve_from == "store":
            response = await self._recall_through_store(scope, body)
        else:
            response = await self._recall_hot(scope, body, recipe)
        metrics.observe_recall(response.timings_ms, response.degraded)
        # serialised once by pydantic (FastAPI would re-encode a returned dict); the
        # reinforcement and the recall log go out after the response is sent
        return Response(content=response.model_dump_json(), media_type="application/json",
                        background=BackgroundTask(self._after_recall, scope, response))

    async def _recall_hot(self, scope: Scope, body: RecallRequest,
                          recipe: RecallRecipe) -> RecallResponse:
        """The fast path: one call to the user's shard, which answers with the working
        memory and its scored personal candidates from its hot index. The query is embedded
        in the shard (``STRATA_QUERY_EMBEDDING=shard``, the default) or by the Embedder
        deployment concurrently with the shard call (``embedder``); the knowledge base,
        when routed, is searched in this process from its snapshot."""
        started = time.perf_counter()
        embedding: Any = None
        if self._settings.query_embedding == "embedder":
            embedding = await self._embedder.embed_query.remote(body.query)._to_object_ref()
        answer: MemoryAnswer = await _resolve(self._shards.for_scope(scope).serve_recall.remote(
            scope, body, [embedding] if embedding is not None else [], recipe))
        found = answer.found
        found.timings_ms["shard_call"] = (time.perf_counter() - started) * 1000
        if "knowledge" in answer.decision.layers:
            query: QueryEmbedding = (answer.embedding if answer.embedding is not None
                                     else await (embedding if embedding is not None else
                                                 self._embedder.embed_query.remote(body.query)))
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
            info = await self._embedder_info()
            self._kb_snapshot = KnowledgeSnapshot(
                vector_store_for(self._settings, int(info["dim"]), self._namespace),
                int(info["dim"]), refresh_s=self._settings.knowledge_refresh_s)
            self._kb_recall = RecallService(self._kb_snapshot)
        return await asyncio.to_thread(self._kb_recall.search_layers, scope, body,
                                       query.vector, ["knowledge"], recipe)

    async def _recall_through_store(self, scope: Scope, body: RecallRequest) -> RecallResponse:
        """The previous path (recipe "store"): the Recall deployment searches Milvus."""
        shard = self._shards.for_scope(scope)
        working = None
        if body.session_id:
            try:
                working = await _resolve(shard.view.remote(scope, body.session_id, body.agent))
            except NotFound:
                working = None
        try:
            response: RecallResponse = await self._recall.recall.remote(
                scope, body, working, body.recipe)
        except Exception as exc:  # a store that is down: working memory only, not a 500
            if isinstance(exc, StrataError) and not isinstance(exc, BackendUnavailable):
                raise
            logger.warning("recall degraded: %s", exc)
            response = await self._recall_working_only(scope, body, working)
        return response

    async def _recall_working_only(self, scope: Scope, body: RecallRequest,
                                   working: Any) -> RecallResponse:
        from strata.recall.context import ContextBuilder

        builder = ContextBuilder(body.budget_tokens)
        if working is not None:
            builder.add_working(working.window, working.summary, working.pinned,
                                working.task_state)
        return RecallResponse(context=builder.render(), items=[], route="degraded",
                              layers=["working"] if working is not None else [], degraded=True)

    async def hot_index_stats(self) -> list[dict[str, Any]]:
        """Every shard's hot index: users, memories, bytes, loads, evictions."""
        stats: list[dict[str, Any]] = await asyncio.gather(
            *(_resolve(self._shards.at(i).hot_stats.remote())
              for i in range(len(self._shards.handles))))
        return stats

    @api.get("/v1/admin/hot-index")
    async def hot_index(self, request: Request) -> dict[str, Any]:
        self._principal(request).require_admin()
        return {"shards": await self.hot_index_stats()}

    async def _after_recall(self, scope: Scope, response: RecallResponse) -> None:
        """Reinforce what was returned (through the user's shard, gathered with the other
        recalls of the next ``REINFORCE_EVERY_S``: one call per shard) and log ids, no text."""
        ids = [i.id for i in response.items if i.layer in ("facts", "episodes", "procedures")]
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

    # -- memories ------------------------------------------------------------------------------
    async def _changeable(self, request: Request, user_id: str, memory_id: str,
                          agent: str | None) -> tuple[Scope, str | None]:
        """The scope of a change to a memory the key may change, and whose view it acts in:
        an agent key may not touch what only an admin writes (procedures, source admin), in
        any version of a fact, nor what its agent does not see."""
        principal = self._principal(request)
        scope = scope_for(principal, user_id)
        viewer = principal.viewer(agent)
        if principal.role != "admin" or viewer is not None:
            for item in await _resolve(self._shards.for_scope(scope).memory_history.remote(
                    scope, memory_id, viewer)):
                principal.require_may_write(item.kind, item.source)
        return scope, viewer

    @api.post("/v1/users/{user_id}/memories")
    async def create_memory(self, user_id: str, body: MemoryCreate,
                            request: Request) -> dict[str, Any]:
        principal = self._principal(request)
        principal.require_may_write(body.kind, body.source)
        scope = scope_for(principal, user_id)
        body = body.model_copy(update={"agent": principal.agent_for(body.agent)})
        result: dict[str, Any] = await _resolve(
            self._shards.for_scope(scope).create_memory.remote(scope, body))
        return result

    @api.post("/v1/users/{user_id}/knowledge/corrections")
    async def correct_knowledge(self, user_id: str, body: CorrectionIn,
                                request: Request) -> dict[str, Any]:
        """The user's correction of a knowledge chunk, kept as that user's memory and shown
        under the chunk in that user's later recalls (the knowledge base is not changed)."""
        scope = scope_for(self._principal(request), user_id)
        info = await self._embedder_info()
        vectors = vector_store_for(self._settings, int(info["dim"]), self._namespace)
        found = await asyncio.to_thread(vectors.get, Collection.KNOWLEDGE,
                                        Scope.shared(scope.tenant), [body.chunk_id])
        if not found or found[0].status != "active":
            raise NotFound(f"no current knowledge chunk {body.chunk_id!r} in this tenant's "
                           "knowledge base (ids come from a recall's knowledge items)")
        result: dict[str, Any] = await _resolve(self._shards.for_scope(scope).create_memory
                                                .remote(scope, correction_create(found[0],
                                                                                 body.text)))
        return result

    @api.post("/v1/users/{user_id}/follow-ups")
    async def follow_ups(self, user_id: str, body: FollowUpRequest,
                         request: Request) -> dict[str, Any]:
        """Proactive recall: at most ``limit`` of the user's open threads to bring up now
        (``strata.layers.proactive``), rationed per topic and per session."""
        principal = self._principal(request)
        scope = scope_for(principal, user_id)
        chosen = await _resolve(self._shards.for_scope(scope).follow_ups.remote(
            scope, body.session_id, body.limit, principal.viewer()))
        return {"follow_ups": [f.model_dump(mode="json") for f in chosen]}

    @api.post("/v1/users/{user_id}/follow-ups/{topic}/feedback")
    async def follow_up_feedback(self, user_id: str, topic: str, body: FollowUpFeedback,
                                 request: Request) -> dict[str, Any]:
        """The agent's report on a proposed follow-up: ``used`` or ``dismissed``."""
        scope = scope_for(self._principal(request), user_id)
        try:
            check_name("topic", topic)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
        result: dict[str, Any] = await _resolve(self._shards.for_scope(scope)
                                                .follow_up_feedback.remote(scope, topic,
                                                                           body.outcome))
        return result

    @api.get("/v1/users/{user_id}/memories")
    async def list_memories(self, user_id: str, request: Request, kind: MemoryKind | None = None,
                            status: str | None = None, q: str | None = None,
                            limit: int = 100, agent: str | None = None,
                            context: str | None = None) -> dict[str, Any]:
        """The user's memories that the calling agent may see (an admin key naming no agent:
        all of them), newest first; ``context``: only that project's / business line's."""
        if not 1 <= limit <= 1000:
            raise InvalidInput("limit must be between 1 and 1000")
        if status is not None and status not in {s.value for s in MemoryStatus}:
            raise InvalidInput(f"unknown status {status!r}; one of "
                               f"{sorted(s.value for s in MemoryStatus)}")
        principal = self._principal(request)
        scope = scope_for(principal, user_id)
        try:
            context = context_name(context)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
        items = await _resolve(self._shards.for_scope(scope).list_memories.remote(
            scope, kind, status, q, limit, principal.viewer(_agent_param(agent)), context))
        return {"memories": [i.model_dump(mode="json") for i in items]}

    @api.get("/v1/users/{user_id}/memories/{memory_id}/history")
    async def memory_history(self, user_id: str, memory_id: str, request: Request,
                             agent: str | None = None) -> dict[str, Any]:
        principal = self._principal(request)
        scope = scope_for(principal, user_id)
        items = await _resolve(self._shards.for_scope(scope).memory_history.remote(
            scope, memory_id, principal.viewer(_agent_param(agent))))
        return {"versions": [i.model_dump(mode="json") for i in items]}

    @api.patch("/v1/users/{user_id}/memories/{memory_id}")
    async def update_memory(self, user_id: str, memory_id: str, body: MemoryPatch,
                            request: Request, agent: str | None = None) -> dict[str, Any]:
        """Edit a memory the calling agent sees; its context, and — for its own agent or an
        admin — its visibility."""
        scope, viewer = await self._changeable(request, user_id, memory_id, _agent_param(agent))
        item = await _resolve(self._shards.for_scope(scope).update_memory.remote(
            scope, memory_id, body, viewer))
        return {"memory": item.model_dump(mode="json")}

    @api.delete("/v1/users/{user_id}/memories/{memory_id}")
    async def delete_memory(self, user_id: str, memory_id: str, request: Request,
                            agent: str | None = None) -> dict[str, Any]:
        scope, viewer = await self._changeable(request, user_id, memory_id, _agent_param(agent))
        result: dict[str, Any] = await _resolve(
            self._shards.for_scope(scope).delete_memory.remote(scope, memory_id, viewer))
        return {"deleted": memory_id, **result}

    @api.delete("/v1/users/{user_id}")
    async def delete_user(self, user_id: str, request: Request) -> dict[str, Any]:
        principal = self._principal(request)
        principal.require_admin()  # it erases procedures and source-admin memories too
        scope = scope_for(principal, user_id)
        result: dict[str, Any] = await _resolve(
            self._shards.for_scope(scope).delete_user.remote(scope))
        return {"deleted_user": user_id, **result}

    # -- export and import (strata.portability) ------------------------------------------------
    async def _export(self, tenant: str, users: list[str],
                      viewer: str | None = None) -> JsonLines:
        """The users' memories as JSON Lines, read from the durable store once each shard has
        written its pending reinforcements (access counts)."""
        info = await self._embedder_info()
        vectors = vector_store_for(self._settings, int(info["dim"]), self._namespace)
        shards = {self._shards.ring.shard_for(Scope(tenant=tenant, user=u)) for u in users}
        await asyncio.gather(*(_resolve(self._shards.at(i).persist_hot.remote())
                               for i in sorted(shards)))
        header = ExportHeader(embed_model=str(info["model_id"]), exported_at=utcnow(),
                              tenant=tenant, users=users)
        first = (await asyncio.to_thread(_read_user, vectors, tenant, users[0], viewer)
                 if users else [])

        async def lines() -> AsyncIterator[str]:
            yield header_line(header)
            for n, user in enumerate(users):  # one user in memory at a time
                items = first if n == 0 else await asyncio.to_thread(
                    _read_user, vectors, tenant, user, viewer)
                yield "".join(memory_lines(user, items))

        return JsonLines(lines())

    @api.get("/v1/users/{user_id}/export", response_class=JsonLines)
    async def export_user(self, user_id: str, request: Request) -> JsonLines:
        """The user's memories (every kind and status) as JSON Lines — those the calling
        agent may see."""
        principal = self._principal(request)
        scope = scope_for(principal, user_id)
        return await self._export(scope.tenant, [scope.user], principal.viewer())

    @api.get("/v1/export", response_class=JsonLines)
    async def export_tenant(self, request: Request) -> JsonLines:
        """(admin) Every user of the key's tenant that has long-term memory."""
        principal = self._principal(request)
        principal.require_admin()
        registry = await asyncio.to_thread(self._redis.users.all)
        return await self._export(principal.tenant, tenant_users(registry, principal.tenant))

    @api.post("/v1/users/{user_id}/import", openapi_extra=_EXPORT_BODY)
    async def import_user(self, user_id: str, request: Request) -> dict[str, Any]:
        """An export's lines (one user's) into this user, ids kept; checked whole first."""
        principal = self._principal(request)
        scope = scope_for(principal, user_id)
        parsed = parse_export(await request.body(), parse=guards.parse_json)
        parsed.require_may_write(principal)
        items = parsed.one_user()
        counts: ImportCounts = await _resolve(self._shards.for_scope(scope).import_memories
                                              .remote(scope, items, principal.role == "admin"))
        return {"user_id": user_id, "lines": len(items), **counts.model_dump(),
                "embed_model_of_file": parsed.header.embed_model}

    # -- knowledge base ------------------------------------------------------------------------
    async def _knowledge(self) -> KnowledgeBase:
        if self._kb is None:
            info = await self._embedder_info()
            vectors = vector_store_for(self._settings, int(info["dim"]), self._namespace)
            self._kb = KnowledgeBase(vectors, str(info["model_id"]))
        return self._kb

    async def import_knowledge(self, tenant: str, documents: list[DocumentIn],
                               validate: list[ValidationQuestion]) -> ImportReport:
        kb = await self._knowledge()
        lock = self._import_locks.setdefault(tenant, asyncio.Lock())
        async with lock:  # one import per tenant at a time, here and in the whole cluster
            held = await asyncio.to_thread(self._cluster_lock.acquire, import_lock_name(tenant))
            try:
                return await self._import_held(kb, tenant, documents, validate)
            finally:
                await asyncio.to_thread(held.release)

    async def _import_held(self, kb: KnowledgeBase, tenant: str, documents: list[DocumentIn],
                           validate: list[ValidationQuestion]) -> ImportReport:
        """Plan, embed (batched on the Embedder deployment), write, validate, flip."""
        plan = await asyncio.to_thread(kb.plan, tenant, documents)
        vectors: list[list[float]] = []
        texts = [c.text for c in plan.add]
        for start in range(0, len(texts), 256):
            vectors.extend(await self._embedder.encode_many.remote(texts[start:start + 256]))
        questions = [q.question for q in validate]
        query_vectors = await self._embedder.encode_many.remote(questions) if questions else []
        report = await asyncio.to_thread(kb.commit, plan, vectors,
                                         lambda _: query_vectors, validate)
        if self._kb_snapshot is not None:
            self._kb_snapshot.invalidate(Scope.shared(tenant))
        return report

    @api.post("/v1/knowledge/documents")
    async def post_documents(self, body: ImportRequest, request: Request) -> JSONResponse:
        principal = self._principal(request)
        principal.require_admin()
        report = await self.import_knowledge(principal.tenant, body.documents, body.validate_)
        return JSONResponse(status_code=200 if report.ok else 422,
                            content=report.model_dump(mode="json") | (
                                {} if report.ok else {"error": "validation_failed",
                                                      "detail": report.reason}))

    @api.get("/v1/knowledge/documents/{doc_id:path}")
    async def get_document(self, doc_id: str, request: Request) -> dict[str, Any]:
        principal = self._principal(request)
        kb = await self._knowledge()
        rows = await asyncio.to_thread(kb.document, principal.tenant, doc_id)
        return {"doc_id": doc_id, "chunks": [{
            "id": r.id, "position": r.payload["position"], "version": r.payload["version"],
            "status": r.status, "text": r.text, "embed_model": r.embed_model,
            "content_hash": r.payload["content_hash"]} for r in rows]}

    @api.post("/v1/knowledge/search")
    async def search_knowledge(self, body: SearchRequest, request: Request) -> dict[str, Any]:
        principal = self._principal(request)
        kb = await self._knowledge()
        vector = await self._embedder.embed.remote(body.query)
        hits = await asyncio.to_thread(kb.search, principal.tenant, body.query, vector,
                                       body.top_k)
        return {"results": [{"id": h.record.id, "doc_id": h.record.payload.get("doc_id"),
                             "doc_ids": h.record.payload.get("doc_ids"),
                             "version": h.record.payload.get("version"), "text": h.record.text,
                             "score": round(h.score, 5)} for h in hits]}


IngressDeployment = serve.deployment(
    name="Ingress", ray_actor_options={"num_cpus": 0}, **STOP_QUICKLY, max_ongoing_requests=256
)(serve.ingress(api)(IngressService))
