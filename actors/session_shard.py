"""SessionShard actors: the Ray wrapper of ``strata.layers.sessions.SessionShardService``."""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

import ray

from actors.store_owner import vector_store_for
from strata.layers.memories import LongTermMemory
from strata.layers.sessions import SessionShardService
from strata.layers.summarize import make_summarizer
from strata.settings import Settings
from strata.stores.embedders import make_embedder
from strata.stores.redis import RedisStore

__all__ = ["SessionShard", "SessionShardActor"]

logger = logging.getLogger(__name__)
SWEEP_EVERY_S = 30.0


class SessionShard(SessionShardService):
    """Builds the shard's collaborators from settings and sweeps idle sessions in the background."""

    def __init__(self, shard_id: int, settings: dict[str, Any], namespace: str | None = None,
                 sweep_every_s: float = SWEEP_EVERY_S) -> None:
        parsed = Settings(**settings)

        def longterm() -> LongTermMemory:  # built on first use: loads the embedding model
            embedder = make_embedder(parsed)
            return LongTermMemory(vector_store_for(parsed, embedder.dim, namespace), embedder)

        super().__init__(shard_id, parsed, RedisStore(parsed.redis_url, parsed.redis_prefix),
                         make_summarizer(parsed), longterm=longterm)
        self._stop = threading.Event()
        threading.Thread(target=self._sweeper, args=(sweep_every_s,), daemon=True).start()

    def _sweeper(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            try:
                self.sweep()
            except Exception:  # a failed sweep is retried on the next tick
                logger.exception("session sweep failed on shard %s", self.shard_id)

    def effective_settings(self) -> dict[str, Any]:
        """The settings the running service uses (jobs read the Redis URL from here)."""
        return self._settings.model_dump(mode="json")

    def pid(self) -> int:
        return os.getpid()

    def node_id(self) -> str:
        return str(ray.get_runtime_context().get_node_id())

    def shutdown(self) -> None:
        self._stop.set()
        super().shutdown()


# Restartable; calls are not retried (a retried turn could be applied twice — clients
# retry with the same turn_id instead, which the shard deduplicates).
SessionShardActor = ray.remote(max_restarts=-1, max_task_retries=0, num_cpus=0,
                               max_concurrency=1)(SessionShard)
