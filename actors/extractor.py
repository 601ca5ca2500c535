"""Extraction consumer actors: consume the long-term write queues and write through the
user's shard. (Not an ``strata.extract.base.Extractor``: that protocol turns turns into
candidates; this actor runs the ``ExtractionWorker`` loops that call one.)"""

from __future__ import annotations

import logging
import threading
from typing import Any

import ray
from ray.exceptions import RayActorError

from actors.directory import ShardDirectory
from actors.remote import actor_class
from strata import tracing
from strata.extract.base import Candidate
from strata.extract.enrich import make_enricher
from strata.extract.llm import make_extractor
from strata.extract.worker import GROUP, ExtractionWorker, WriteSummary
from strata.models import Scope
from strata.settings import Settings
from strata.stores.keys import QUEUE_HIGH, QUEUE_LOW
from strata.stores.redis import RedisStore

__all__ = ["ExtractionConsumer", "ExtractionConsumerActor", "start_extractors"]

logger = logging.getLogger(__name__)


class ExtractionConsumer:
    """A consumer loop over both queues; the writes happen in the user's shard."""

    def __init__(self, settings: dict[str, Any], namespace: str | None, consumer: str,
                 claim_idle_ms: int = 60_000) -> None:
        parsed = Settings(**settings)
        tracing.configure(parsed, "extractor")
        self._redis = RedisStore(parsed.redis_url, parsed.redis_prefix)
        self._shards = ShardDirectory.find(parsed.session_shards, namespace)
        self._workers = [
            ExtractionWorker(self._redis.queues, self._redis.sessions, make_extractor(parsed),
                             self._write, consumer, claim_idle_ms, queue=queue,
                             enricher=make_enricher(parsed))
            for queue in (QUEUE_HIGH, QUEUE_LOW)]
        self._warn_depth = parsed.queue_warn_depth
        self._stop = threading.Event()
        threading.Thread(target=self._loop, daemon=True).start()

    def _write(self, scope: Scope, candidates: list[Candidate]) -> WriteSummary:
        # a trace of its own: the close that queued the job answered long ago
        with tracing.span("extractor.write_longterm", scope, count=len(candidates)):
            try:
                summary: WriteSummary = ray.get(
                    self._shards.for_scope(scope).write_longterm.remote(scope, candidates))
            except RayActorError:  # moved to another node: the job is retried, then finds it
                ShardDirectory.note_dead()
                raise
        return summary

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                busy = sum(w.run_once(block_ms=None) for w in self._workers)
                if not busy:
                    self._stop.wait(0.5)
                self._check_depth()
            except Exception:  # keep consuming; pending entries are retried or claimed
                logger.exception("extractor loop error")
                self._stop.wait(2.0)

    def _check_depth(self) -> None:
        for queue in (QUEUE_HIGH, QUEUE_LOW):
            backlog = self._redis.queues.depth(queue, GROUP).backlog
            if backlog > self._warn_depth:
                logger.warning("queue %s backlog %s is over %s: add extractors",
                               queue, backlog, self._warn_depth)

    def run_once(self) -> int:
        return sum(w.run_once() for w in self._workers)

    def shutdown(self) -> None:
        self._stop.set()


ExtractionConsumerActor = actor_class(ExtractionConsumer, max_restarts=-1, num_cpus=0,
                                      max_concurrency=2)


def start_extractors(settings: Settings, count: int, namespace: str | None) -> list[Any]:
    dumped = settings.model_dump(mode="json")
    return [ExtractionConsumerActor.options(
        name=f"strata-extractor-{i}", namespace=namespace, get_if_exists=True,
        lifetime="detached").remote(dumped, namespace, f"extractor-{i}") for i in range(count)]
