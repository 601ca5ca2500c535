"""The FastAPI ingress: authentication, validation, and routing to Strata's services.

The scope (tenant from the API key, user from the request) is fixed here and is the only
way any store is reached.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from ray import serve
from ray.exceptions import RayActorError, RayTaskError

from actors.directory import ShardDirectory
from actors.store_owner import vector_store_for
from strata.auth import Principal, authenticate, scope_for
from strata.errors import BackendUnavailable, StrataError
from strata.runtime import check_ready
from strata.settings import Settings
from strata.stores.redis import RedisStore

logger = logging.getLogger(__name__)

api = FastAPI(title="Strata", version="0.1.0",
              description="Layered memory for LLM agents (see README and docs/).")


@api.exception_handler(StrataError)
async def _strata_error(_: Request, exc: StrataError) -> JSONResponse:
    return JSONResponse(status_code=exc.status_code, content=exc.to_dict())


@api.exception_handler(RequestValidationError)
async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc'] if p != 'body')}: {err['msg']}"
        for err in exc.errors())
    return JSONResponse(status_code=422, content={"error": "invalid_input", "detail": problems})


class TurnRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str
    role: str
    content: str
    created_at: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    turn_id: str | None = Field(default=None, description="client id; a retry is deduplicated")


class UserRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str


class TaskStateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str
    patch: dict[str, Any]


async def _resolve(ref: Any) -> Any:
    """Await an actor call, surfacing Strata errors and turning dead actors into 503."""
    try:
        return await ref
    except RayTaskError as exc:
        if isinstance(exc.cause, StrataError):
            raise exc.cause from None
        raise
    except RayActorError as exc:
        raise BackendUnavailable(f"a session shard is restarting; retry ({exc})") from None


class IngressService:
    """Routes HTTP to Strata's services."""

    def __init__(self, settings: dict[str, Any], embedder: Any, namespace: str | None) -> None:
        self._settings = Settings(**settings)
        self._embedder = embedder
        self._namespace = namespace
        self._redis = RedisStore(self._settings.redis_url, self._settings.redis_prefix)
        self._shards = ShardDirectory(settings, self._settings.session_shards, namespace)
        self._dim: int | None = None

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

    # -- sessions (working memory) -------------------------------------------------------
    @api.post("/v1/sessions/{session_id}/turns")
    async def append_turn(self, session_id: str, body: TurnRequest,
                          request: Request) -> dict[str, Any]:
        scope = scope_for(self._principal(request), body.user_id)
        ack = await _resolve(self._shards.for_scope(scope).append_turn.remote(
            scope, session_id, body.role, body.content, body.created_at, body.metadata,
            body.turn_id))
        result: dict[str, Any] = ack.model_dump(mode="json")
        return result

    @api.post("/v1/sessions/{session_id}/close")
    async def close_session(self, session_id: str, body: UserRequest,
                            request: Request) -> dict[str, Any]:
        scope = scope_for(self._principal(request), body.user_id)
        ack = await _resolve(self._shards.for_scope(scope).close.remote(scope, session_id))
        result: dict[str, Any] = ack.model_dump(mode="json")
        return result

    @api.get("/v1/sessions/{session_id}/working-memory")
    async def working_memory(self, session_id: str, user_id: str,
                             request: Request) -> dict[str, Any]:
        scope = scope_for(self._principal(request), user_id)
        view = await _resolve(self._shards.for_scope(scope).view.remote(scope, session_id))
        result: dict[str, Any] = view.model_dump(mode="json")
        return result

    @api.patch("/v1/sessions/{session_id}/task-state")
    async def task_state(self, session_id: str, body: TaskStateRequest,
                         request: Request) -> dict[str, Any]:
        scope = scope_for(self._principal(request), body.user_id)
        state = await _resolve(self._shards.for_scope(scope).patch_task_state.remote(
            scope, session_id, body.patch))
        return {"session_id": session_id, "task_state": state}


IngressDeployment = serve.deployment(
    name="Ingress", ray_actor_options={"num_cpus": 0}, max_ongoing_requests=256
)(serve.ingress(api)(IngressService))
