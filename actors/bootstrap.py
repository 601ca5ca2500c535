"""Start-up of Strata's actors in a Ray cluster, idempotent: whoever comes first creates them.

``strata serve`` calls ``ensure_backend`` before it deploys the Serve app, and the app's
ingress calls it when a replica starts, so the Serve app deployed alone (``serve deploy
serve_config.yaml``, ``serve run``, a KubeRay RayService) gets the same service: the
StoreOwner for a milvus-lite file, the session shards, the extractors and the placement
keeper (it moves shards so they stay spread as nodes come and go).
"""

from __future__ import annotations

import logging
from typing import Any

import ray

from actors.directory import ShardDirectory
from actors.extractor import start_extractors
from actors.placement import start_placement_keeper
from actors.store_owner import start_store_owner
from strata.settings import Settings
from strata.stores.embedders import make_embedder

__all__ = ["ensure_backend", "vector_dim"]

logger = logging.getLogger(__name__)


def vector_dim(settings: Settings) -> int:
    if settings.embedder == "minilm":
        return 384  # all-MiniLM-L6-v2; avoids loading the model just to learn its size
    return make_embedder(settings).dim


def ensure_backend(settings: Settings, namespace: str | None) -> ShardDirectory:
    """Create (or find) the StoreOwner, the shard pool, the extractors and the placement
    keeper; the shards."""
    if not settings.redis_url:
        # only `strata serve` starts an embedded Redis (it lives in that process)
        raise RuntimeError(
            "STRATA_REDIS_URL is not set: the Serve app deployed on its own needs a Redis "
            "server (redis://host:6379/0); `strata serve` starts an embedded one")
    if settings.milvus_is_lite:
        owner = start_store_owner(settings, vector_dim(settings), namespace=namespace)
        ray.get(owner.ping.remote())
    dumped: dict[str, Any] = settings.model_dump(mode="json")
    shards = ShardDirectory.start(dumped, settings.session_shards, namespace)
    start_extractors(settings, settings.extractors, namespace)
    start_placement_keeper(settings, namespace)
    return shards
