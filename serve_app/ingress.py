"""The FastAPI ingress: health and readiness now; the v1 API grows here."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from ray import serve

from actors.store_owner import vector_store_for
from strata.errors import StrataError
from strata.runtime import check_ready
from strata.settings import Settings
from strata.stores.redis import RedisStore

logger = logging.getLogger(__name__)

api = FastAPI(title="Strata", version="0.1.0",
              description="Layered memory for LLM agents (see README and docs/).")


@api.exception_handler(StrataError)
async def _strata_error(_: Request, exc: StrataError) -> JSONResponse:
    return JSONResponse(status_code=exc.status_code, content=exc.to_dict())


class IngressService:
    """Routes HTTP to Strata's services; the scope is fixed here and nowhere else."""

    def __init__(self, settings: dict[str, Any], embedder: Any, namespace: str | None) -> None:
        self._settings = Settings(**settings)
        self._embedder = embedder
        self._namespace = namespace
        self._redis = RedisStore(self._settings.redis_url, self._settings.redis_prefix)
        self._dim: int | None = None

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


IngressDeployment = serve.deployment(
    name="Ingress", ray_actor_options={"num_cpus": 0}, max_ongoing_requests=256
)(serve.ingress(api)(IngressService))
