"""The clients an ingress replica reaches the rest of Strata with, each failure mapped once
(``actors.boundary``): the shards' calls (``resolve``), the Embedder deployment
(``EmbedderClient``) and the replica's vector store client (``VectorStores``)."""

from __future__ import annotations

import asyncio
from typing import Any

from actors.boundary import strata_errors
from actors.directory import ShardDirectory
from actors.remote import named_actor
from actors.shared_embedder import embedder_unavailable
from actors.store_owner import OWNER_NAME, vector_store_for
from strata.errors import BackendUnavailable
from strata.settings import Settings
from strata.stores.ports import VectorStore

__all__ = ["EmbedderClient", "VectorStores", "resolve", "shard_unavailable"]


def shard_unavailable(exc: Exception) -> BackendUnavailable:
    ShardDirectory.note_dead()  # moved to another node: look the pool up before the next call
    return BackendUnavailable(f"a session shard is restarting; retry ({exc})")


async def resolve(ref: Any) -> Any:
    """Await a shard call: its Strata errors as themselves, a dead shard as 503."""
    with strata_errors(shard_unavailable):
        return await ref


class EmbedderClient:
    """The Embedder deployment's handle, its failures as ``BackendUnavailable``; the model's
    dimension once known."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.dim: int | None = None

    async def info(self) -> dict[str, Any]:
        with strata_errors(embedder_unavailable):
            info: dict[str, Any] = await self.handle.info.remote()
        self.dim = int(info["dim"])
        return info

    async def embed(self, text: str) -> list[float]:
        with strata_errors(embedder_unavailable):
            vector: list[float] = await self.handle.embed.remote(text)
        return vector

    def encode_many(self, texts: list[str]) -> list[list[float]]:
        """Texts embedded in one call (blocking: for a thread of its own)."""
        with strata_errors(embedder_unavailable):
            vectors: list[list[float]] = self.handle.encode_many.remote(texts).result()
        return vectors


class VectorStores:
    """This replica's vector store client: built on first use (it needs the embedder's
    dimension), dropped when a probe fails (the store's owner may be new)."""

    def __init__(self, settings: Settings, namespace: str | None,
                 embedder: EmbedderClient) -> None:
        self._settings = settings
        self._namespace = namespace
        self._embedder = embedder
        self._vectors: VectorStore | None = None

    async def get(self) -> VectorStore:
        dim = self._embedder.dim
        if dim is None:
            dim = int((await self._embedder.info())["dim"])
        return await asyncio.to_thread(self._for, dim)

    def _for(self, dim: int) -> VectorStore:
        """Blocking: building the client may look the store's owner up."""
        if self._vectors is None:
            self._vectors = vector_store_for(self._settings, dim, self._namespace)
        return self._vectors

    async def owner_stats(self) -> dict[str, Any]:
        """The milvus-lite owner actor's flush statistics (``actors.store_owner``)."""
        owner = named_actor(OWNER_NAME, self._namespace)
        stats: dict[str, Any] = await owner.stats.remote()
        return stats

    def ping(self) -> None:
        """The readiness probe of the store (blocking); a failure drops the client."""
        if self._embedder.dim is None:
            raise RuntimeError("embedder not ready yet")
        try:
            self._for(self._embedder.dim).ping()
        except Exception:
            self._vectors = None
            raise
