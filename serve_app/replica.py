"""``Replica``: the clients one ingress replica holds, built once when Serve starts the
replica, and the small services the routes are handed (``serve_app.routes.deps``).

    Replica
      settings        Settings (read once, at the entry point that built the app)
      shards          ShardDirectory   — every read and write of a user goes to its shard
      embedder        EmbedderClient   — the Embedder deployment, its errors as 503
      redis           RedisStore       — job records, the user registry, write queues
      rate_limiter    RateLimiter      — per key and tenant (``serve_app.ratelimit``)
      vectors         VectorStores     — the replica's vector store client (knowledge, probes)
      knowledge       KnowledgeAccess  — the tenant's knowledge base (``knowledge_access``)
      aftermath       RecallAftermath  — reinforcement batching, the recall log
      export          UserExport       — an export, user by user, through the shards
      metrics         MetricsPublisher — this replica's counts to Redis

Nothing here answers a request; the route modules hold no state of their own.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from actors.bootstrap import ensure_backend
from serve_app.clients import EmbedderClient, VectorStores
from serve_app.knowledge_access import KnowledgeAccess
from serve_app.request_context import install_log_records
from serve_app.services import MetricsPublisher, RecallAftermath, UserExport
from strata import tracing
from strata.ratelimit import RateLimiter
from strata.settings import Settings
from strata.stores.coordination import ClusterLock, MetricsBoard
from strata.stores.redis import RedisStore
from strata.stores.redis.ratelimit import RedisRateBuckets

__all__ = ["Replica"]


class Replica:
    """The clients of one ingress replica, each built once (heavy ones when first needed)."""

    def __init__(self, settings: dict[str, Any], embedder: Any, namespace: str | None) -> None:
        self.settings = Settings(**settings)
        tracing.configure(self.settings, "ingress")
        install_log_records()  # record.strata_request_id on this replica's log records
        self.namespace = namespace
        url, prefix = self.settings.redis_url, self.settings.redis_prefix
        self.embedder = EmbedderClient(embedder)
        self.redis = RedisStore(url, prefix)
        # per key and tenant, in Redis for every replica (this replica's own if Redis fails)
        self.rate_limiter = RateLimiter(self.settings, RedisRateBuckets(url, prefix))
        # deployed alone (serve deploy, a RayService), the app starts what it needs itself
        self.shards = ensure_backend(self.settings, namespace)
        self.vectors = VectorStores(self.settings, namespace, self.embedder)
        # a lock in Redis: one import per tenant in every replica and job together
        self.knowledge = KnowledgeAccess(self.settings, self.vectors, self.embedder,
                                         ClusterLock(url, prefix))
        self.aftermath = RecallAftermath(self.shards, self.redis.recalls)
        self.export = UserExport(self.shards, self.embedder)
        self.metrics = MetricsPublisher(MetricsBoard(url, prefix),
                                        f"{socket.gethostname()}:{os.getpid()}")
