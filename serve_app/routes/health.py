"""Health, readiness and metrics of a replica (``/healthz``, ``/readyz``, ``/metrics``)."""

from __future__ import annotations

import asyncio
import logging

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from serve_app import metrics
from serve_app.guards import api_router
from serve_app.routes.deps import (
    Embedding,
    Metrics,
    Redis,
    ReplicaSettings,
    Vectors,
    principal_of,
)
from strata.errors import StrataError
from strata.runtime import check_ready

__all__ = ["router"]

logger = logging.getLogger(__name__)

router = api_router()


# The probes and the Prometheus scrape; a probe reports what failed, never raises.
@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(embedder: Embedding, vectors: Vectors, redis: Redis) -> JSONResponse:
    async def embedder_check() -> None:
        info = await embedder.info()
        vec = await embedder.embed("readiness probe")
        if len(vec) != info["dim"]:
            raise RuntimeError("embedder returned a vector of the wrong size")

    try:
        await asyncio.wait_for(embedder_check(), timeout=30)
        embed_status = "ok"
    except Exception as exc:  # a probe reports, never raises
        embed_status = f"{type(exc).__name__}: {exc}"
    status = await asyncio.to_thread(check_ready, {"milvus": vectors.ping, "redis": redis.ping})
    status["embedder"] = embed_status
    ready = all(v == "ok" for v in status.values())
    return JSONResponse(status_code=200 if ready else 503,
                        content={"ready": ready, "checks": status})


@router.get("/metrics")
async def metrics_endpoint(request: Request, settings: ReplicaSettings, redis: Redis,
                           vectors: Vectors, publisher: Metrics) -> Response:
    """Prometheus text; an admin key's unless ``STRATA_METRICS_AUTH=none``."""
    if settings.metrics_auth == "admin":
        principal_of(request, settings).require_admin()
    try:
        await asyncio.to_thread(metrics.update_backlog, redis.queues)
    except StrataError as exc:
        logger.warning("metrics: queue backlog unavailable: %s", exc.detail)
    if settings.milvus_is_lite:
        try:
            metrics.update_flush(await vectors.owner_stats())
        except Exception as exc:  # metrics never fail the scrape
            logger.warning("metrics: flush stats unavailable: %s", exc)
    try:  # every replica's counts, this one's up to now
        await publisher.publish()
        summed = await publisher.gather()
    except StrataError as exc:
        logger.warning("metrics: other replicas' counts unavailable: %s", exc.detail)
        summed = None
    return Response(content=metrics.render(summed), media_type="text/plain; version=0.0.4")
