"""Embedder deployment: one model per replica, concurrent queries batched into one call."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from ray import serve

from serve_app.options import STOP_QUICKLY
from strata.errors import EmbedderError
from strata.recall.late import TokenEmbedder, embed_queries, pooled_and_tokens
from strata.settings import Settings
from strata.stores.embedders import make_embedder
from strata.stores.ports import QueryEmbedding


class EmbedderService:
    """Holds the configured embedder; ``embed`` calls from many requests share a batch."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self._embedder = make_embedder(Settings(**settings))

    def info(self) -> dict[str, Any]:
        return {"dim": self._embedder.dim, "model_id": self._embedder.model_id,
                "late": isinstance(self._embedder, TokenEmbedder)}

    def encode_many(self, texts: list[str]) -> list[list[float]]:
        return [list(map(float, row)) for row in self._embedder.encode(texts)]

    # the shards' calls with STRATA_SHARD_EMBEDDING=embedder (actors/shared_embedder.py):
    # arrays, not lists — a write's token vectors are ~30 KB a text
    def encode_with_tokens(self, texts: list[str], queries: bool = False
                           ) -> tuple[npt.NDArray[np.float32], list[npt.NDArray[np.float32]]]:
        """Vectors and token vectors of ``texts`` (one forward pass where the model has it;
        ``queries``: of their content words)."""
        if not isinstance(self._embedder, TokenEmbedder):
            raise EmbedderError(f"{self._embedder.model_id} has no token vectors")
        pooled, tokens = pooled_and_tokens(self._embedder, texts, queries)
        return pooled, tokens or []

    def token_vectors(self, texts: list[str]) -> list[npt.NDArray[np.float32]]:
        """Token vectors of ``texts`` (memories stored before theirs were)."""
        if not isinstance(self._embedder, TokenEmbedder):
            raise EmbedderError(f"{self._embedder.model_id} has no token vectors")
        return self._embedder.token_vectors(texts)

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.005)
    async def embed(self, texts: list[str]) -> list[list[float]]:
        return self.encode_many(texts)

    # no wait for company: under load, queries queue while a batch encodes and form the next
    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.0)
    async def embed_query(self, texts: list[str]) -> list[QueryEmbedding]:
        """A recall's query: its vector and token vectors from one forward pass."""
        return embed_queries(self._embedder, texts)


EmbedderDeployment = serve.deployment(
    name="Embedder", ray_actor_options={"num_cpus": 0}, **STOP_QUICKLY, max_ongoing_requests=64
)(EmbedderService)
