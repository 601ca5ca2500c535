"""The placement keeper: moves session shards so they stay spread as nodes come and go.

Thin wiring over ``strata.layers.placement``: every ``rebalance_every_s`` it asks each shard
which node it runs on and which nodes are alive (with CPUs), plans with ``plan_moves`` over
the nodes seen in the last two rounds (a node that just joined, or flaps, waits a round),
and moves at most one shard per round (``ShardDirectory.move``). A round where any shard
does not answer (it is restarting after a node loss) moves nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayError

from actors.directory import ShardDirectory
from actors.remote import actor_class, alive_nodes
from strata.layers.placement import Move, plan_moves, steady_nodes
from strata.settings import Settings

__all__ = ["KEEPER_NAME", "PlacementKeeper", "start_placement_keeper"]

logger = logging.getLogger(__name__)
KEEPER_NAME = "strata-placement"


def _shard_nodes() -> list[str]:
    return sorted(n["NodeID"] for n in alive_nodes() if n.get("Resources", {}).get("CPU", 0) > 0)


class PlacementKeeper:
    def __init__(self, settings: dict[str, Any], namespace: str | None) -> None:
        parsed = Settings(**settings)
        self._every_s = parsed.rebalance_every_s
        self._shards = ShardDirectory.find(parsed.session_shards, namespace)
        self._seen: deque[list[str]] = deque(maxlen=2)
        self._moves: list[dict[str, Any]] = []
        self._stop = threading.Event()
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                self.rebalance_once()
            except Exception:  # the next round tries again; nothing is lost
                logger.exception("rebalancing the session shards failed")

    def placement(self) -> dict[int, str]:
        """Shard → node id; ``GetTimeoutError``/``RayError`` if a shard does not answer."""
        self._shards.refresh()
        refs = [h.node_id.remote() for h in self._shards.handles]
        return {i: str(node) for i, node in enumerate(ray.get(refs, timeout=10))}

    def rebalance_once(self) -> Move | None:
        """One round: the move made, if any."""
        alive = _shard_nodes()
        self._seen.append(alive)
        try:
            placement = self.placement()
        except (RayError, GetTimeoutError) as exc:
            logger.info("a shard is not answering (restarting?); no rebalancing: %s", exc)
            return None
        # the steady nodes, and any alive node a shard already runs on (Ray put it there)
        eligible = set(steady_nodes(list(self._seen))) | (set(alive) & set(placement.values()))
        moves = plan_moves(placement, sorted(eligible))
        if not moves:
            return None
        move = moves[0]  # one per round: the next round re-plans from what is true then
        started = time.monotonic()
        self._shards.move(move.shard, move.target)
        took = time.monotonic() - started
        logger.info("moved shard %s from node %s to node %s in %.1fs (%d more planned)",
                    move.shard, move.source[:8], move.target[:8], took, len(moves) - 1)
        self._moves.append({"shard": move.shard, "source": move.source,
                            "target": move.target, "seconds": round(took, 2),
                            "at": time.time()})
        return move

    def moves(self) -> list[dict[str, Any]]:
        """The moves made so far (newest last)."""
        return list(self._moves)

    def shutdown(self) -> None:
        self._stop.set()


PlacementKeeperActor = actor_class(PlacementKeeper, max_restarts=-1, num_cpus=0,
                                   max_concurrency=2)


def start_placement_keeper(settings: Settings, namespace: str | None) -> Any:
    """Start (or find) the one keeper; ``None`` when rebalancing is off."""
    if settings.rebalance_every_s <= 0:
        return None
    return PlacementKeeperActor.options(
        name=KEEPER_NAME, namespace=namespace, get_if_exists=True, lifetime="detached",
    ).remote(settings.model_dump(mode="json"), namespace)
