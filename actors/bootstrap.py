"""Start-up and tear-down of Strata's actors in a Ray cluster: the one wiring module.

``ensure_backend`` is idempotent (whoever comes first creates the actors). ``strata serve``
calls it before it deploys the Serve app, and the app's ingress calls it when a replica
starts, so the Serve app deployed alone (``serve deploy serve_config.yaml``, ``serve run``, a
KubeRay RayService) gets the same service: the StoreOwner for a milvus-lite file, the
session shards, the extractors and the placement keeper (it moves shards so they stay
spread as nodes come and go). ``stop_backend`` only looks actors up: stopping a service
that never started creates nothing. Everything else finds the actors
(``ShardDirectory.find``, ``vector_store_for``) and never creates one.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

import ray
from ray.exceptions import RayError

from actors.directory import ShardDirectory
from actors.extractor import start_extractors
from actors.placement import KEEPER_NAME, start_placement_keeper
from actors.remote import named_actor
from actors.store_owner import OWNER_NAME, start_store_owner
from strata.settings import Settings
from strata.stores.embedders import make_embedder

__all__ = ["ensure_backend", "stop_backend", "vector_dim"]

logger = logging.getLogger(__name__)


def vector_dim(settings: Settings) -> int:
    """The vector size of the configured embedder; the packaged models' sizes are known, so
    the driver does not load a model just to learn it."""
    packaged = {"minilm": 384, "mpnet": 768}  # all-MiniLM-L6-v2, all-mpnet-base-v2
    if settings.embedder in packaged:
        return packaged[settings.embedder]
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


def stop_backend(settings: Settings, namespace: str | None,
                 done: Callable[[str], None] = lambda step: None) -> None:
    """Stop what ``ensure_backend`` started, each step bounded: the placement keeper first
    (it must not move a stopping shard), the extractors, the shards (snapshotting them),
    then the StoreOwner (its last flush) even if an earlier step failed. ``done(step)`` is
    told as each step ends. Only looks actors up: it never creates one."""
    try:
        with contextlib.suppress(ValueError):
            ray.kill(ray.get_actor(KEEPER_NAME, namespace=namespace), no_restart=True)
        for i in range(settings.extractors):
            with contextlib.suppress(ValueError):
                ray.kill(ray.get_actor(f"strata-extractor-{i}", namespace=namespace),
                         no_restart=True)
        with contextlib.suppress(RuntimeError):  # never started
            ShardDirectory.find(settings.session_shards, namespace).shutdown(timeout_s=10)
        done("shards")
    finally:
        try:
            owner = named_actor(OWNER_NAME, namespace)
            ray.get(owner.shutdown.remote(), timeout=20)  # the last flush
            ray.kill(owner)
        except ValueError:
            pass
        except RayError as exc:
            logger.warning("the store owner did not shut down cleanly: %s", exc)
        done("store owner")
