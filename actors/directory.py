"""Finding Strata's named actors: the session shards, by consistent hash of the user."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayError

from actors.session_shard import SessionShardActor
from strata.layers.sessions import ShardRing
from strata.models import Scope

__all__ = ["ShardDirectory", "running_settings", "shard_name"]

logger = logging.getLogger(__name__)


def shard_name(index: int) -> str:
    return f"strata-shard-{index}"


class ShardDirectory:
    """The fixed pool of shards, and the route from a scope to its shard.

    ``start`` creates the pool (or finds it: whoever comes first creates it); ``find`` only
    looks it up, so a component that merely talks to shards never spawns one.
    """

    def __init__(self, handles: list[Any]) -> None:
        self.ring = ShardRing(len(handles))
        self.handles = handles

    @classmethod
    def start(cls, settings: dict[str, Any], shards: int,
              namespace: str | None) -> ShardDirectory:
        # SPREAD places the pool over the nodes; it needs a (tiny) CPU request to count
        # actors per node — zero-CPU actors all land on the caller's node. Detached and
        # restartable: a shard lost with its node restarts on another one and rebuilds its
        # sessions from snapshot + WAL.
        return cls([
            SessionShardActor.options(  # type: ignore[attr-defined]
                name=shard_name(i), namespace=namespace, get_if_exists=True,
                lifetime="detached", scheduling_strategy="SPREAD", num_cpus=0.01,
            ).remote(i, settings, namespace)
            for i in range(shards)
        ])

    @classmethod
    def find(cls, shards: int, namespace: str | None) -> ShardDirectory:
        """The running pool; ``RuntimeError`` when Strata's shards are not running."""
        try:
            return cls([ray.get_actor(shard_name(i), namespace=namespace)
                        for i in range(shards)])
        except ValueError:
            raise RuntimeError(f"Strata's session shards are not running in namespace "
                               f"{namespace!r} (start `strata serve`)") from None

    def for_scope(self, scope: Scope) -> Any:
        return self.handles[self.ring.shard_for(scope)]

    def shutdown(self, timeout_s: float = 30) -> None:
        """Snapshot and stop every shard, all at once; one that cannot answer in time (its
        node is gone) is killed anyway: its sessions are in Redis (snapshot + WAL) already."""
        pending = [handle.shutdown.remote() for handle in self.handles]
        for i, ref in enumerate(pending):
            try:
                ray.get(ref, timeout=timeout_s)
            except (RayError, GetTimeoutError) as exc:
                logger.warning("shard %s did not shut down cleanly: %s", i, exc)
        for handle in self.handles:
            with contextlib.suppress(RayError):
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
