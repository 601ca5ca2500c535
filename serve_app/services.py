"""The small services of an ingress replica that keep something between requests:
``RecallAftermath`` (recalls' reinforcements, gathered and sent per shard; the recall log),
``MetricsPublisher`` (this replica's counts to Redis) and ``UserExport`` (an export, user by
user, each read by the user's shard). ``serve_app.replica.Replica`` builds one of each."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from actors.directory import ShardDirectory
from serve_app import metrics
from serve_app.clients import EmbedderClient, resolve
from strata.entities.overlay import EntityEdits
from strata.errors import StrataError
from strata.models import MemoryItem, RecallResponse, Scope, utcnow
from strata.portability import ExportHeader, entity_edits_line, header_line, memory_lines
from strata.stores.coordination import MetricSamples, MetricsBoard
from strata.stores.redis_ports import RecallLog

__all__ = ["PUBLISH_EVERY_S", "REINFORCE_EVERY_S", "MetricsPublisher", "RecallAftermath",
           "UserExport"]

logger = logging.getLogger(__name__)
REINFORCE_EVERY_S = 0.5  # recalls' reinforcements gathered this long, then sent per shard
PUBLISH_EVERY_S = 5.0  # a replica's metric counts reach Redis this often while it serves


class RecallAftermath:
    """What follows a recall once it is answered: its long-term items reinforced through the
    users' shards, and its ids (no text) in the recall log."""

    def __init__(self, shards: ShardDirectory, log: RecallLog) -> None:
        self._shards = shards
        self._log = log
        self._returned: list[tuple[Scope, list[str]]] = []  # recalls' items, to reinforce
        self._reinforcer: asyncio.Task[None] | None = None

    async def after(self, scope: Scope, response: RecallResponse) -> None:
        """Reinforce what was returned (gathered with the other recalls of the next
        ``REINFORCE_EVERY_S``: one call per shard) and log ids, no text."""
        ids = [i.id for i in response.items if i.layer.long_term]
        if not ids:
            return
        self._returned.append((scope, ids))
        if self._reinforcer is None or self._reinforcer.done():
            self._reinforcer = asyncio.create_task(self._reinforce_soon())
        try:
            await asyncio.to_thread(self._log.add, scope, ids, response.route)
        except StrataError as exc:  # the recall was answered; its log entry is best effort
            logger.warning("recall log not written: %s", exc.detail)

    async def _reinforce_soon(self) -> None:
        """Send the gathered reinforcements, one call per shard (best effort: access counts
        only, like the shard's own batched persistence)."""
        await asyncio.sleep(REINFORCE_EVERY_S)
        returned, self._returned = self._returned, []
        by_shard: dict[int, list[tuple[Scope, list[str]]]] = {}
        for scope, ids in returned:
            by_shard.setdefault(self._shards.ring.shard_for(scope), []).append((scope, ids))
        for index, batch in by_shard.items():
            self._shards.at(index).reinforce_many.remote(batch)


class MetricsPublisher:
    """This replica's metric counts on the Redis board, where a scrape of any replica sums
    them (``serve_app.metrics``)."""

    def __init__(self, board: MetricsBoard, replica: str) -> None:
        self._board = board
        self._replica = replica
        self._publisher: asyncio.Task[None] | None = None

    def counted(self) -> None:
        """A request was counted: publish this replica's counts within PUBLISH_EVERY_S."""
        if self._publisher is None or self._publisher.done():
            self._publisher = asyncio.create_task(self._publish_soon())

    async def _publish_soon(self) -> None:
        await asyncio.sleep(PUBLISH_EVERY_S)
        try:
            await self.publish()
        except StrataError as exc:  # the next request or scrape publishes again
            logger.warning("metrics: publish failed: %s", exc.detail)

    async def publish(self) -> None:
        await asyncio.to_thread(self._board.publish, self._replica, metrics.local_samples())

    async def gather(self) -> MetricSamples:
        """Every replica's counts, summed."""
        return await asyncio.to_thread(self._board.gather)


class UserExport:
    """Users' memories as export lines (``strata.portability``), each user read by the
    user's shard (``SessionShardService.export_memories``): one user in memory at a time."""

    def __init__(self, shards: ShardDirectory, embedder: EmbedderClient) -> None:
        self._shards = shards
        self._embedder = embedder

    async def memories(self, scope: Scope, viewer: str | None = None) -> list[MemoryItem]:
        """The user's memories, every kind and status, those ``viewer`` may see."""
        shard = self._shards.for_scope(scope)
        items: list[MemoryItem] = await resolve(shard.export_memories.remote(scope, viewer))
        return items

    async def entity_edits(self, scope: Scope, viewer: str | None = None
                           ) -> dict[str, EntityEdits]:
        """The user's entity view edits an export carries (``ShardEntities.export_edits``)."""
        shard = self._shards.for_scope(scope)
        lanes: dict[str, EntityEdits] = await resolve(
            shard.export_entity_edits.remote(scope, viewer))
        return lanes

    async def lines(self, tenant: str, users: list[str],
                    viewer: str | None = None) -> AsyncIterator[str]:
        """The export of ``users``: its header line, then each user's memory lines and
        entity edits line. The
        header and the first user are read before this returns, so a failure there is the
        request's answer rather than a cut stream."""
        info = await self._embedder.info()
        header = ExportHeader(embed_model=str(info["model_id"]), exported_at=utcnow(),
                              tenant=tenant, users=users)
        first = await self.memories(Scope(tenant=tenant, user=users[0]), viewer) if users else []

        async def stream() -> AsyncIterator[str]:
            yield header_line(header)
            for n, user in enumerate(users):
                scope = Scope(tenant=tenant, user=user)
                items = first if n == 0 else await self.memories(scope, viewer)
                yield "".join(memory_lines(user, items))
                yield entity_edits_line(user, await self.entity_edits(scope, viewer))

        return stream()
