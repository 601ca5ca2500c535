"""Recall deployment: embeds the query (batched by the Embedder deployment) and runs the
RecallService in a thread (its store calls block)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ray import serve

from actors.store_owner import vector_store_for
from serve_app.options import STOP_QUICKLY
from strata.models import RecallRequest, RecallResponse, Scope
from strata.recall.recipes import RECIPES
from strata.recall.service import RecallService
from strata.settings import Settings

__all__ = ["RecallDeployment", "RecallEndpoint"]


class RecallEndpoint:
    """Holds one RecallService over the configured vector store."""

    def __init__(self, settings: dict[str, Any], embedder: Any, namespace: str | None) -> None:
        self._settings = Settings(**settings)
        self._embedder = embedder
        self._namespace = namespace
        self._service: RecallService | None = None

    async def _get_service(self) -> RecallService:
        if self._service is None:
            info = await self._embedder.info.remote()
            vectors = vector_store_for(self._settings, int(info["dim"]), self._namespace)
            self._service = RecallService(vectors,
                                          late=self._token_maxima if info.get("late") else None)
        return self._service

    def _token_maxima(self, query: str, texts: Sequence[str]) -> list[list[float]]:
        """Late interaction by the Embedder deployment; called from the recall thread, so it
        blocks on the response."""
        result: list[list[float]] = self._embedder.token_maxima.remote(query,
                                                                       list(texts)).result()
        return result

    async def recall(self, scope: Scope, request: RecallRequest, working: Any,
                     recipe: str | None = None) -> RecallResponse:
        service = await self._get_service()
        vector = await self._embedder.embed.remote(request.query)
        chosen = RECIPES[recipe] if recipe else None
        return await asyncio.to_thread(service.recall, scope, request, vector, working, chosen)


RecallDeployment = serve.deployment(
    name="Recall", ray_actor_options={"num_cpus": 0}, **STOP_QUICKLY, max_ongoing_requests=64
)(RecallEndpoint)
