"""SessionShard actors: the Ray wrapper of ``strata.shard.service.SessionShardService``."""

from __future__ import annotations

import gc
import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import ray

from actors.remote import actor_class
from actors.shared_embedder import shared_embedder
from actors.store_owner import vector_store_for
from actors.traced import continues_trace, traced_methods
from strata import gc_pauses, tracing
from strata.entities.overlay_redis import RedisEntityEditStore
from strata.errors import StrataError
from strata.layers.memories import LongTermMemory
from strata.layers.summarize import make_summarizer
from strata.models import RecallRequest, Scope
from strata.recall.late import TokenEmbedder
from strata.recall.recipes import DEFAULT, RecallRecipe
from strata.settings import Settings
from strata.shard.models import MemoryAnswer
from strata.shard.service import SessionShardService
from strata.stores import lexical
from strata.stores.embedders import JointEmbedder, WriteEmbedder, make_embedder
from strata.stores.hot import HotIndexStore
from strata.stores.hot_snapshot import HotSnapshots, RedisMarks
from strata.stores.ports import Embedder
from strata.stores.redis import RedisStore

__all__ = ["TRACED", "SessionShard", "SessionShardActor"]

logger = logging.getLogger(__name__)
SWEEP_EVERY_S = 30.0
SEAL_ON_STOP_S = 2.0  # a stopping shard writes hot snapshots for at most this long


class SessionShard(SessionShardService):
    """Builds the shard's collaborators from settings and sweeps idle sessions in the background."""

    def __init__(self, shard_id: int, settings: dict[str, Any], namespace: str | None = None,
                 sweep_every_s: float = SWEEP_EVERY_S) -> None:
        parsed = Settings(**settings)
        tracing.configure(parsed, "shard")
        gc_pauses.watch()  # the collector's pauses, in the hot index's statistics

        def longterm() -> LongTermMemory:  # built on first use: loads the embedding model
            # or, with STRATA_SHARD_EMBEDDING=embedder, none: the Embedder deployment's
            embedder: Embedder = (shared_embedder() if parsed.shard_embedding == "embedder"
                                  else make_embedder(parsed))
            if isinstance(embedder, JointEmbedder):  # vectors and token vectors in one pass
                embedder = WriteEmbedder(embedder)
            tokens = embedder if isinstance(embedder, TokenEmbedder) else None
            snapshots = (HotSnapshots(parsed.resolved_hot_snapshot_dir,
                                      RedisMarks(redis.connection),
                                      f"{embedder.model_id}/{embedder.dim}",
                                      max_bytes=parsed.hot_snapshot_max_bytes)
                         if parsed.hot_snapshots else None)
            hot = HotIndexStore(vector_store_for(parsed, embedder.dim, namespace),
                                embedder.dim, tokens=lambda: tokens,
                                max_bytes=parsed.hot_index_max_bytes,
                                ttl_s=parsed.hot_index_ttl_s, snapshots=snapshots,
                                snapshot_idle_s=parsed.hot_snapshot_idle_s)
            return LongTermMemory(hot, embedder)

        redis = RedisStore(parsed.redis_url, parsed.redis_prefix,
                           wait_replicas=parsed.redis_wait_replicas,
                           wait_timeout_ms=parsed.redis_wait_timeout_ms)
        super().__init__(shard_id, parsed, redis, make_summarizer(parsed), longterm=longterm,
                         entity_edits=RedisEntityEditStore(redis.connection))
        self._stop = threading.Event()
        threading.Thread(target=self._every, args=(sweep_every_s, self._sweep_all),
                         daemon=True).start()
        threading.Thread(target=self._every, args=(parsed.hot_persist_every_s,
                                                   self.persist_hot), daemon=True).start()
        # a forget's grace period ends within a quarter of it (at least 1 s, at most a sweep)
        threading.Thread(target=self._every, args=(
            min(sweep_every_s, max(1.0, parsed.forget_grace_s / 4)), self.finalise_forgets),
            daemon=True).start()
        threading.Thread(target=self._warm, daemon=True).start()

    def _warm(self) -> None:
        """Load now, in the background, what the first turns would otherwise wait for:
        jieba's dictionary and, when the model is the shard's own, the long-term memory
        (its embedding model: ~15 s on 2 cores, which the first turn with an explicit
        "remember" would otherwise wait for), and one query through it. A failure only means
        the first use loads it."""
        try:
            lexical.warm()
            if self._settings.shard_embedding == "own":
                self.memories.longterm  # noqa: B018 — built on first access
                # a query's first pass through the model runs slower (torch picks its
                # kernels): the first user's recall would wait ~1 s for it
                self.recall.embed_queries(["warm up the query path"])
        except Exception as exc:  # retried on first use
            logger.warning("shard %s: warm-up failed, loaded on first use instead: %s",
                           self.shard_id, exc)
        if self._settings.gc_freeze:  # what the warm-up loaded is never scanned again
            gc.freeze()

    def _sweep_all(self) -> None:
        self.sweep()
        hot = self.memories.hot_index()
        if hot is not None:
            hot.sweep()

    def _every(self, every_s: float, task: Callable[[], object]) -> None:
        while not self._stop.wait(every_s):
            try:
                task()
            except Exception:  # retried on the next tick; nothing is lost
                logger.exception("%s failed on shard %s", task.__name__, self.shard_id)

    # the hops of a turn and of a recall continue the caller's trace (``actors.traced``)
    append_turn = continues_trace(SessionShardService.append_turn)
    append_turns = continues_trace(SessionShardService.append_turns)
    close = continues_trace(SessionShardService.close)
    write_longterm = continues_trace(SessionShardService.write_longterm)
    export_memories = continues_trace(SessionShardService.export_memories)  # a user's export

    @continues_trace
    def serve_recall(self, scope: Scope, request: RecallRequest, embedding: list[Any],
                     recipe: RecallRecipe = DEFAULT, viewer: str | None = "") -> MemoryAnswer:
        """``recall_memory`` with the query's embedding as a Ray object the caller is still
        computing (``[ref]``: nested, so Ray hands it over unresolved), or ``[]``: the
        shard embeds the query itself."""
        if not embedding:
            return self.recall_memory(scope, request, None, recipe, viewer)
        return self.recall_memory(scope, request, lambda: ray.get(embedding[0]), recipe,
                                  viewer)

    def effective_settings(self) -> dict[str, Any]:
        """The settings the running service uses (jobs read the Redis URL from here)."""
        return self._settings.model_dump(mode="json")

    def pid(self) -> int:
        return os.getpid()

    def has_longterm(self) -> bool:
        """Whether the long-term memory is built (the warm-up builds it at start)."""
        return self.memories.hot_index() is not None

    def holds_model(self) -> bool:
        """Whether this process has imported the local model's code (sentence-transformers):
        never with ``STRATA_SHARD_EMBEDDING=embedder``."""
        return "sentence_transformers" in sys.modules

    def node_id(self) -> str:
        return str(ray.get_runtime_context().get_node_id())

    def shutdown(self) -> None:
        self._stop.set()
        try:
            self.persist_hot()
        except StrataError as exc:  # access counts only; every memory is already durable
            logger.warning("shard %s: pending reinforcement not written: %s", self.shard_id,
                           exc.detail)
        hot = self.memories.hot_index()
        if hot is not None:  # the restart's first touches read these instead of Milvus
            hot.seal_all(budget_s=SEAL_ON_STOP_S)
        super().shutdown()


# Restartable; calls are not retried (a retried turn could be applied twice — clients
# retry with the same turn_id instead, which the shard deduplicates). Threaded: a recall
# waits for its query embedding without holding up the shard; state is under locks.
TRACED = traced_methods(SessionShard)  # what a directory's handle adds a carrier to
SessionShardActor = actor_class(SessionShard, max_restarts=-1, max_task_retries=0, num_cpus=0,
                                max_concurrency=8)
