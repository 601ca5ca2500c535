"""What every route of the ingress shares: the replica's clients, built once, and the one
way a call into an actor or a deployment is awaited (``actors.boundary``).

``IngressState`` is the base of every route group (``serve_app.routes.*``) and of the
ingress deployment itself; nothing here answers a request.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import Request

from actors.bootstrap import ensure_backend
from actors.boundary import strata_errors
from actors.directory import ShardDirectory
from actors.shared_embedder import embedder_unavailable
from actors.store_owner import vector_store_for
from serve_app.request_context import install_log_records
from strata import tracing
from strata.auth import Principal, authenticate
from strata.errors import BackendUnavailable
from strata.layers.knowledge import KnowledgeBase
from strata.models import Scope
from strata.ratelimit import RateLimiter
from strata.recall.service import RecallService
from strata.settings import Settings
from strata.stores.coordination import ClusterLock, MetricsBoard
from strata.stores.ports import VectorStore
from strata.stores.redis import RedisStore
from strata.stores.redis.ratelimit import RedisRateBuckets
from strata.stores.snapshot import KnowledgeSnapshot

__all__ = ["IngressState", "resolve", "shard_unavailable"]

logger = logging.getLogger(__name__)


def shard_unavailable(exc: Exception) -> BackendUnavailable:
    ShardDirectory.note_dead()  # moved to another node: look the pool up before the next call
    return BackendUnavailable(f"a session shard is restarting; retry ({exc})")


async def resolve(ref: Any) -> Any:
    """Await a shard call: its Strata errors as themselves, a dead shard as 503."""
    with strata_errors(shard_unavailable):
        return await ref


class IngressState:
    """The clients one ingress replica holds, each built once (heavy ones when first
    needed), and the shared ways to reach the shards, the embedder and the stores."""

    def __init__(self, settings: dict[str, Any], embedder: Any, namespace: str | None) -> None:
        self._settings = Settings(**settings)
        tracing.configure(self._settings, "ingress")
        install_log_records()  # record.strata_request_id on this replica's log records
        self.max_body_bytes = self._settings.max_body_bytes
        self._embedder = embedder
        self._namespace = namespace
        self._redis = RedisStore(self._settings.redis_url, self._settings.redis_prefix)
        # per key and tenant, in Redis for every replica (this replica's own if Redis fails)
        self.rate_limiter = RateLimiter(self._settings, RedisRateBuckets(
            self._settings.redis_url, self._settings.redis_prefix))
        # deployed alone (serve deploy, a RayService), the app starts what it needs itself
        self._shards = ensure_backend(self._settings, namespace)
        self._dim: int | None = None
        self._vectors: VectorStore | None = None
        self._kb: KnowledgeBase | None = None
        # a lock in Redis: one import per tenant in every replica and job together
        self._cluster_lock = ClusterLock(self._settings.redis_url, self._settings.redis_prefix)
        # imports block on the embedder for long: their own threads, not the shared ones
        self._import_threads = ThreadPoolExecutor(2, thread_name_prefix="knowledge-import")
        self._metrics_board = MetricsBoard(self._settings.redis_url, self._settings.redis_prefix)
        self._replica = f"{socket.gethostname()}:{os.getpid()}"
        self._publisher: asyncio.Task[None] | None = None  # this replica's metric counts
        self._kb_snapshot: KnowledgeSnapshot | None = None  # the knowledge layer of recalls
        self._kb_recall: RecallService | None = None
        self._returned: list[tuple[Scope, list[str]]] = []  # recalls' items, to reinforce
        self._reinforcer: asyncio.Task[None] | None = None

    def principal(self, request: Request) -> Principal:
        """The caller of a request, by its API key (``Unauthorized`` without a known one)."""
        return authenticate(request.headers.get("authorization"), self._settings.api_keys)

    async def _embedder_info(self) -> dict[str, Any]:
        with strata_errors(embedder_unavailable):
            info: dict[str, Any] = await self._embedder.info.remote()
        self._dim = int(info["dim"])
        return info

    async def _embed(self, text: str) -> list[float]:
        with strata_errors(embedder_unavailable):
            vector: list[float] = await self._embedder.embed.remote(text)
        return vector

    async def _vector_store(self) -> VectorStore:
        """This replica's vector store client (``_vectors_for``)."""
        dim = self._dim if self._dim is not None else int((await self._embedder_info())["dim"])
        return await asyncio.to_thread(self._vectors_for, dim)

    def _vectors_for(self, dim: int) -> VectorStore:
        """The client, built on first use (it needs the embedder's dimension) and kept until
        ``_drop_vector_store`` (blocking: it may look the store's owner up)."""
        if self._vectors is None:
            self._vectors = vector_store_for(self._settings, dim, self._namespace)
        return self._vectors

    def _drop_vector_store(self) -> None:
        """Build the client afresh next time (it failed a probe: its owner may be new)."""
        self._vectors = None

    async def _knowledge(self) -> KnowledgeBase:
        if self._kb is None:
            info = await self._embedder_info()
            self._kb = KnowledgeBase(await self._vector_store(), str(info["model_id"]))
        return self._kb
