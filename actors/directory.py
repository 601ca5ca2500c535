"""Finding Strata's named actors: the session shards, by consistent hash of the user."""

from __future__ import annotations

from typing import Any

import ray

from actors.session_shard import SessionShardActor
from strata.layers.sessions import ShardRing
from strata.models import Scope

__all__ = ["ShardDirectory", "running_settings", "shard_name"]


def shard_name(index: int) -> str:
    return f"strata-shard-{index}"


class ShardDirectory:
    """Starts (or finds) the fixed pool of shards and routes a scope to its shard."""

    def __init__(self, settings: dict[str, Any], shards: int, namespace: str | None) -> None:
        self.ring = ShardRing(shards)
        # SPREAD places the pool over the nodes; it needs a (tiny) CPU request to count
        # actors per node — zero-CPU actors all land on the caller's node
        self.handles = [
            SessionShardActor.options(  # type: ignore[attr-defined]
                name=shard_name(i), namespace=namespace, get_if_exists=True,
                lifetime="detached", scheduling_strategy="SPREAD", num_cpus=0.01,
            ).remote(i, settings, namespace)
            for i in range(shards)
        ]

    def for_scope(self, scope: Scope) -> Any:
        return self.handles[self.ring.shard_for(scope)]

    def shutdown(self) -> None:
        for handle in self.handles:
            try:
                ray.get(handle.shutdown.remote(), timeout=30)
            finally:
                ray.kill(handle, no_restart=True)


def running_settings(namespace: str | None) -> dict[str, Any]:
    """The effective settings of the Strata running in this cluster (from shard 0)."""
    try:
        shard = ray.get_actor(shard_name(0), namespace=namespace)
    except ValueError:
        raise RuntimeError("no Strata is running in this Ray cluster (start `strata serve`)"
                           ) from None
    settings: dict[str, Any] = ray.get(shard.effective_settings.remote())
    return settings
