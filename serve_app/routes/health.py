"""Health, readiness and metrics of a replica (``/healthz``, ``/readyz``, ``/metrics``)."""

from __future__ import annotations

import asyncio
import logging

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from actors.remote import named_actor
from actors.store_owner import OWNER_NAME
from serve_app import metrics
from serve_app.guards import api_router
from serve_app.routes.base import IngressState
from strata.errors import StrataError
from strata.runtime import check_ready

__all__ = ["PUBLISH_EVERY_S", "HealthRoutes", "router"]

logger = logging.getLogger(__name__)
PUBLISH_EVERY_S = 5.0  # a replica's metric counts reach Redis this often while it serves

router = api_router()


class HealthRoutes(IngressState):
    """The probes and the Prometheus scrape; a probe reports what failed, never raises."""

    def _vectors_ping(self) -> None:
        if self._dim is None:
            raise RuntimeError("embedder not ready yet")
        try:
            self._vectors_for(self._dim).ping()
        except Exception:
            self._drop_vector_store()
            raise

    @router.get("/healthz")
    async def healthz(self) -> dict[str, str]:
        return {"status": "ok"}

    @router.get("/readyz")
    async def readyz(self) -> JSONResponse:
        async def embedder_check() -> None:
            info = await self._embedder_info()
            vec = await self._embed("readiness probe")
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

    @router.get("/metrics")
    async def metrics_endpoint(self, request: Request) -> Response:
        """Prometheus text; an admin key's unless ``STRATA_METRICS_AUTH=none``."""
        if self._settings.metrics_auth == "admin":
            self.principal(request).require_admin()
        try:
            await asyncio.to_thread(metrics.update_backlog, self._redis.queues)
        except StrataError as exc:
            logger.warning("metrics: queue backlog unavailable: %s", exc.detail)
        if self._settings.milvus_is_lite:
            try:
                owner = named_actor(OWNER_NAME, self._namespace)
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
