"""From the long-term write queue to the stores: extraction, filters, single-writer apply.

At-least-once delivery: a job is acknowledged only after its writes; a redelivered job
writes nothing new because every memory id is a hash of (user, session, content). A worker
that dies mid-job leaves its entries pending; another worker claims them after
``claim_idle_ms``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext

from pydantic import BaseModel, Field

from strata.extract.base import Candidate, Extractor, Intent, attribute
from strata.extract.enrich import Enricher
from strata.extract.exchanges import EXCHANGE, exchange_candidates
from strata.extract.filters import WriteFilter
from strata.layers.episodic import EpisodeStore
from strata.layers.semantic import FactStore
from strata.models import KEYWORDS, MemoryKind, Scope, Turn, embedded_text
from strata.stores.embedders import PreparedEmbedder
from strata.stores.keys import QUEUE_LOW, SessionRef
from strata.stores.ports import VectorStore, WriteBatching
from strata.stores.redis_ports import JobStatus, QueueMessage, SessionLog, WriteQueues

__all__ = ["ExtractionWorker", "LongTermWriter", "WriteSummary"]

logger = logging.getLogger(__name__)
GROUP = "extractors"
MAX_DELIVERIES = 5


class WriteSummary(BaseModel):
    facts: dict[str, int] = Field(default_factory=dict)
    episodes: dict[str, int] = Field(default_factory=dict)
    dropped: int = 0
    forgotten: int = 0
    deleted: int = 0  # made from turns the user deleted after the job read them
    reactivated: int = 0  # cold memories the session's turns mentioned, active again

    def counts(self) -> dict[str, int]:
        """Flat counts for a job's record: ``facts.insert``, ``episodes.merge``, ``dropped``,
        ``forgotten``, ``deleted``, ``reactivated`` (zeros left out)."""
        flat = {f"facts.{k}": v for k, v in self.facts.items()}
        flat.update({f"episodes.{k}": v for k, v in self.episodes.items()})
        flat.update({"dropped": self.dropped, "forgotten": self.forgotten,
                     "deleted": self.deleted, "reactivated": self.reactivated})
        return {k: v for k, v in flat.items() if v}


class LongTermWriter:
    """Filters candidates and writes them for one user (call it from the user's shard)."""

    def __init__(self, facts: FactStore, episodes: EpisodeStore,
                 write_filter: WriteFilter | None = None,
                 embedder: PreparedEmbedder | None = None,
                 vectors: VectorStore | None = None) -> None:
        self.facts = facts
        self.episodes = episodes
        self._filter = write_filter or WriteFilter()
        self._embedder = embedder  # the stores' embedder: the job's texts encoded at once
        self._vectors = vectors    # the stores' vector store: the job's writes sent at once

    def write(self, scope: Scope, candidates: Sequence[Candidate]) -> WriteSummary:
        report = self._filter.apply(candidates)
        summary = WriteSummary(dropped=len(report.dropped))
        todo = [c for c in report.kept if c.intent is not Intent.FORGET and (
            (c.kind is MemoryKind.FACT and c.key) or c.kind is MemoryKind.EPISODE)]
        # forgetting is applied at turn time by the shard, not here
        with self._prepared([c.text if c.kind is MemoryKind.FACT
                             else embedded_text(c.text, c.metadata) for c in todo]), \
                self._batch(scope):
            for cand in todo:
                if cand.kind is MemoryKind.FACT:
                    action = self.facts.apply(scope, cand).decision.action.value
                    summary.facts[action] = summary.facts.get(action, 0) + 1
                else:
                    action = self.episodes.apply(scope, cand).action
                    summary.episodes[action] = summary.episodes.get(action, 0) + 1
        return summary

    def _prepared(self, texts: list[str]) -> AbstractContextManager[None]:
        if self._embedder is None or len(texts) < 2:
            return nullcontext()
        return self._embedder.prepared(texts)

    def _batch(self, scope: Scope) -> AbstractContextManager[None]:
        if isinstance(self._vectors, WriteBatching):
            return self._vectors.write_batch(scope)
        return nullcontext()


def enriched(enricher: Enricher, candidates: list[Candidate]) -> list[Candidate]:
    """The turn-level episodes with their keywords (``strata.extract.enrich``); exchanges,
    facts and forgets as they are."""
    out = []
    for cand in candidates:
        if (cand.kind is MemoryKind.EPISODE and cand.episode_type != EXCHANGE
                and cand.intent is not Intent.FORGET and KEYWORDS not in cand.metadata):
            words = enricher.keywords(cand.text)
            if words:
                cand = cand.model_copy(update={"metadata": {**cand.metadata, KEYWORDS: words}})
        out.append(cand)
    return out


def turns_in_range(log: SessionLog, ref: SessionRef, wal_from: str,
                   wal_to: str) -> list[Turn]:
    """The session's turns with WAL ids in (wal_from, wal_to]."""
    out = []
    for wal_id, record in log.read(ref, after_id=wal_from):
        if _after(wal_id, wal_to):
            break
        if record.get("op") == "turn":
            out.append(Turn.model_validate(record["turn"]))
    return out


def _after(a: str, b: str) -> bool:
    ma, sa = (int(x) for x in a.split("-"))
    mb, sb = (int(x) for x in b.split("-"))
    return (ma, sa) > (mb, sb)


class ExtractionWorker:
    """One consumer of a long-term write queue (``q:ltm:low`` by default), group
    ``extractors``; it reads each job's turns from the session ``log``."""

    def __init__(self, queues: WriteQueues, log: SessionLog, extractor: Extractor,
                 write: Callable[[Scope, list[Candidate]], WriteSummary], consumer: str,
                 claim_idle_ms: int = 60_000, queue: str = QUEUE_LOW,
                 enricher: Enricher | None = None) -> None:
        self._queue = queue
        self._enricher = enricher
        self._queues = queues
        self._log = log
        self._extractor = extractor
        self._write = write
        self._consumer = consumer
        self._claim_idle_ms = claim_idle_ms
        queues.ensure_group(queue, GROUP)

    def run_once(self, count: int = 10, block_ms: int | None = None) -> int:
        """Process stale entries of dead consumers first, then new ones; returns how many."""
        messages = self._queues.claim_stale(self._queue, GROUP, self._consumer,
                                            self._claim_idle_ms, count)
        if not messages:
            messages = self._queues.consume(self._queue, GROUP, self._consumer, count,
                                            block_ms)
        for message in messages:
            self._handle(message)
        return len(messages)

    def _handle(self, message: QueueMessage) -> None:
        if message.deliveries > MAX_DELIVERIES:
            logger.error("dropping extraction job %s after %s deliveries", message.id,
                         message.deliveries)
            self._queues.ack(self._queue, GROUP, [message.id])
            self._queues.update_job(message.id, JobStatus.FAILED,
                                    attempts=message.deliveries - 1)
            return
        self._queues.update_job(message.id, JobStatus.RUNNING, attempts=message.deliveries)
        job = message.payload
        scope = Scope(tenant=job["tenant"], user=job["user_id"])
        turns = turns_in_range(self._log, SessionRef(scope, job["session_id"]),
                               job["wal_from"], job["wal_to"])
        try:
            candidates = attribute([*self._extractor.extract(turns),
                                    *exchange_candidates(turns)], turns)
            if self._enricher is not None:
                candidates = enriched(self._enricher, candidates)
            summary = self._write(scope, candidates)
        except Exception as exc:  # left pending: another delivery retries it
            logger.exception("extraction job %s failed", message.id)
            # the error's type only: its message may quote the turns
            self._queues.update_job(message.id, JobStatus.QUEUED, error=type(exc).__name__)
            return
        logger.info("job %s: %s", message.id, summary.model_dump())
        self._queues.ack(self._queue, GROUP, [message.id])
        self._queues.update_job(message.id, JobStatus.DONE, written=summary.counts())
