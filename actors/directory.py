"""Finding Strata's named actors: the session shards, by consistent hash of the user."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.remote import named_actor
from actors.session_shard import TRACED, SessionShardActor
from actors.traced import carrying
from strata.models import Scope
from strata.shard.ring import ShardRing

__all__ = ["ShardDirectory", "running_settings", "shard_name"]

logger = logging.getLogger(__name__)


def shard_name(index: int) -> str:
    return f"strata-shard-{index}"


def _shard(index: int, settings: dict[str, Any], namespace: str | None,
           strategy: Any) -> Any:
    # SPREAD (or a node's soft affinity) needs a (tiny) CPU request to count actors per
    # node: zero-CPU actors all land on the caller's node. Detached and restartable: a shard
    # lost with its node restarts on another one and rebuilds its sessions from snapshot +
    # WAL.
    return SessionShardActor.options(
        name=shard_name(index), namespace=namespace, get_if_exists=True,
        lifetime="detached", scheduling_strategy=strategy, num_cpus=0.01,
    ).remote(index, settings, namespace)


class ShardDirectory:
    """The fixed pool of shards, and the route from a scope to its shard.

    ``start`` creates the pool (or finds it: whoever comes first creates it); ``find`` only
    looks it up, so a component that merely talks to shards never spawns one. A shard moved
    to another node (``move``, the placement keeper's) is a new actor under the same name:
    a caller that sees a dead shard calls ``note_dead`` and every directory in the process
    looks the pool up again before its next call.
    """

    _generation = 0  # bumped by note_dead: directories behind it look the pool up again
    _generation_lock = threading.Lock()

    def __init__(self, handles: list[Any], namespace: str | None = None) -> None:
        self.ring = ShardRing(len(handles))
        self.handles = handles
        self._namespace = namespace
        self._seen = ShardDirectory._generation

    @classmethod
    def start(cls, settings: dict[str, Any], shards: int,
              namespace: str | None) -> ShardDirectory:
        return cls([_shard(i, settings, namespace, "SPREAD") for i in range(shards)], namespace)

    @classmethod
    def find(cls, shards: int, namespace: str | None) -> ShardDirectory:
        """The running pool; ``RuntimeError`` when Strata's shards are not running."""
        try:
            return cls([ray.get_actor(shard_name(i), namespace=namespace)
                        for i in range(shards)], namespace)
        except ValueError:
            raise RuntimeError(f"Strata's session shards are not running in namespace "
                               f"{namespace!r} (start `strata serve`)") from None

    @classmethod
    def note_dead(cls) -> None:
        """A call found a shard dead for good (moved, or killed): look the pool up again."""
        with cls._generation_lock:
            cls._generation += 1

    def refresh(self) -> None:
        """Look every shard up by name (a moved shard is a new actor); one not found (it is
        being moved right now) keeps its old handle until the next refresh."""
        self._seen = ShardDirectory._generation
        for i in range(len(self.handles)):
            with contextlib.suppress(ValueError):
                self.handles[i] = ray.get_actor(shard_name(i), namespace=self._namespace)

    def at(self, index: int) -> Any:
        """Shard ``index``'s handle (looked up again first after a ``note_dead``)."""
        if self._seen != ShardDirectory._generation:
            self.refresh()
        return self.handles[index]

    def for_scope(self, scope: Scope) -> Any:
        """The handle of ``scope``'s shard; its turns and recalls carry the caller's trace."""
        return carrying(self.at(self.ring.shard_for(scope)), TRACED)

    def move(self, index: int, node_id: str, timeout_s: float = 60) -> Any:
        """Move shard ``index`` to node ``node_id``: snapshot its sessions and stop it, then
        start it again there under the same name; it rebuilds its sessions from snapshot +
        WAL like a restarted shard. Turns sent meanwhile get 503 and are retried by the
        client (each is idempotent by ``turn_id``). Returns the new handle."""
        old = self.handles[index]
        settings: dict[str, Any] = ray.get(old.effective_settings.remote(), timeout=timeout_s)
        try:
            ray.get(old.shutdown.remote(), timeout=timeout_s)
        except (RayError, GetTimeoutError) as exc:  # its sessions are in Redis already
            logger.warning("shard %s did not stop cleanly before its move: %s", index, exc)
        ray.kill(old, no_restart=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:  # the name is free once the actor is dead
            try:
                ray.get_actor(shard_name(index), namespace=self._namespace)
            except ValueError:
                break
            time.sleep(0.1)
        here = NodeAffinitySchedulingStrategy(node_id, soft=True)  # its node may go too
        new = _shard(index, settings, self._namespace, here)
        self.handles[index] = new
        ray.get(new.node_id.remote(), timeout=timeout_s)  # started
        ShardDirectory.note_dead()
        return new

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
        shard = named_actor(shard_name(0), namespace)
    except ValueError:
        raise RuntimeError("no Strata is running in this Ray cluster (start `strata serve`)"
                           ) from None
    settings: dict[str, Any] = ray.get(shard.effective_settings.remote())
    return settings
