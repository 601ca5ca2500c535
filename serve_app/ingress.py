"""The FastAPI ingress: the HTTP face of Strata's services.

The routes are plain functions grouped by what they serve, one module each under
``serve_app.routes``, holding no state: each takes what it needs as a FastAPI dependency
(``serve_app.routes.deps``) — the caller and the scope (the tenant from the API key, the
user from the request: the only way any store is reached) and the one small service it
uses, out of the replica's ``Replica`` container (``serve_app.replica``). ``Ingress`` is the
Serve deployment over ``api`` (``@serve.ingress``): its constructor builds the container
once per replica, and it answers the app handle's ``import_knowledge`` (the demo knowledge
``strata serve`` loads). ``guards`` stands before every route (size limit, strict JSON, one
error shape), and ``ratelimit`` before it (the key's and the tenant's request rate: 429
before the body is read).

    routes/health.py       /healthz  /readyz  /metrics
    routes/sessions.py     /v1/sessions/{session_id}/turns, /turns/batch, /close,
                           /working-memory, /task-state; /v1/jobs/{job_id}
    routes/recall.py       /v1/recall  /v1/admin/hot-index
    routes/memories.py     /v1/users/{user_id}/memories[/{memory_id}[/history]],
                           /knowledge/corrections, /follow-ups[/{topic}/feedback],
                           /forgets[/{forget_id}/undo], /erasure, DELETE /v1/users/{user_id}
    routes/portability.py  /v1/users/{user_id}/export, /v1/export, /v1/users/{user_id}/import
    routes/knowledge.py    /v1/knowledge/documents (POST), /documents/{doc_id}, /search
    inspector.py           /ui/, /v1/whoami, /v1/users, /v1/knowledge/documents (GET), /v1/queues
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

from fastapi import FastAPI, Request
from ray import serve

from serve_app import guards, metrics
from serve_app.inspector import router as inspector_router
from serve_app.options import STOP_QUICKLY
from serve_app.ratelimit import RateLimitGuard
from serve_app.replica import Replica
from serve_app.request_context import RequestContext
from serve_app.routes import (
    entities,
    health,
    knowledge,
    memories,
    portability,
    recall,
    sessions,
)
from serve_app.routes.deps import caller, replica
from strata.auth import Principal
from strata.layers.knowledge import DocumentIn, ImportReport, ValidationQuestion
from strata.ratelimit import RateLimiter

__all__ = ["Ingress", "IngressDeployment", "api"]

logger = logging.getLogger(__name__)


def _body_limit() -> int:
    """STRATA_MAX_BODY_BYTES of the ingress this replica runs (its settings reach the replica
    after the app is built, so the middleware asks for them per request)."""
    return replica().settings.max_body_bytes


def _rate_limiter() -> RateLimiter:
    """The rate limits of the ingress this replica runs (asked per request, as above)."""
    return replica().rate_limiter


def _authenticate(request: Request) -> Principal:
    """The key check of every route, for the MCP endpoint (which is not a route)."""
    return caller(request, replica())


try:  # the memory tools over streamable HTTP, at /mcp — with the [mcp] extra installed
    from serve_app.mcp_http import McpEndpoint
    mcp: Any = McpEndpoint(_authenticate)
except ImportError:  # pragma: no cover - the base install: no /mcp
    logger.info("the mcp package is not installed: no /mcp endpoint (pip install strata[mcp])")
    mcp = None
api = FastAPI(title="Strata", version="0.1.0", lifespan=mcp.lifespan if mcp else None,
              description="Layered memory for LLM agents (see README and docs/).")
guards.install(api, body_limit=_body_limit)  # size limit, strict JSON, one error shape
api.add_middleware(RateLimitGuard, limiter=_rate_limiter)  # before the body limit: 429 first
api.include_router(inspector_router)  # the inspector: /ui/ and the endpoints it reads
for group in (health, sessions, recall, memories, entities, portability, knowledge):
    api.include_router(group.router)
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
    replica().metrics.counted()
    return response


api.add_middleware(RequestContext)  # outermost: the request id and span of every answer


class Ingress:
    """The ingress deployment of one replica: builds the replica's clients once
    (``Replica``); the routes of ``api`` reach them through their dependencies."""

    def __init__(self, settings: dict[str, Any], embedder: Any, namespace: str | None) -> None:
        self.replica = Replica(settings, embedder, namespace)
        if self.replica.settings.gc_freeze:  # the libraries' objects: never scanned again
            gc.freeze()

    async def import_knowledge(self, tenant: str, documents: list[DocumentIn],
                               validate: list[ValidationQuestion]) -> ImportReport:
        """A knowledge import in this replica, through the app handle (``strata serve``'s
        demo knowledge): what ``POST /v1/knowledge/documents`` runs."""
        return await self.replica.knowledge.import_documents(tenant, documents, validate)


IngressDeployment = serve.deployment(
    name="Ingress", ray_actor_options={"num_cpus": 0}, **STOP_QUICKLY, max_ongoing_requests=256
)(serve.ingress(api)(Ingress))
