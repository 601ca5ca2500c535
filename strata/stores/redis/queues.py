"""The long-term write queues as Redis streams read through consumer groups: ack deletes
the entry, so no payload outlives its processing; a dead consumer's entries are claimed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import redis

from strata.models import Scope
from strata.stores.redis.connection import RedisConnection, dumps, redis_errors, stream_id
from strata.stores.redis_ports import QueueDepth, QueueMessage

__all__ = ["RedisWriteQueues"]


class RedisWriteQueues:
    """``WriteQueues`` over Redis streams (``q:ltm:high``, ``q:ltm:low``)."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn
        self._r = conn.client

    def ensure_group(self, queue: str, group: str) -> None:
        with redis_errors("create group"):
            try:
                self._r.xgroup_create(self._conn.key(queue), group, id="0", mkstream=True)
            except redis.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    def enqueue(self, queue: str, payload: Mapping[str, Any]) -> str:
        with redis_errors("enqueue"):
            return stream_id(self._r.xadd(self._conn.key(queue), {"data": dumps(payload)}))

    def consume(self, queue: str, group: str, consumer: str, count: int = 10,
                block_ms: int | None = None) -> list[QueueMessage]:
        with redis_errors("consume"):
            resp = self._r.xreadgroup(group, consumer, {self._conn.key(queue): ">"},
                                      count=count, block=block_ms)
        return [QueueMessage(id=rid.decode(), payload=json.loads(fields[b"data"]))
                for _stream, entries in resp or [] for rid, fields in entries if fields]

    def ack(self, queue: str, group: str, ids: list[str]) -> int:
        if not ids:
            return 0
        with redis_errors("ack"):
            pipe = self._r.pipeline(transaction=True)
            pipe.xack(self._conn.key(queue), group, *ids)
            pipe.xdel(self._conn.key(queue), *ids)
            acked, _ = pipe.execute()
        return int(acked)

    def claim_stale(self, queue: str, group: str, consumer: str, min_idle_ms: int,
                    count: int = 10) -> list[QueueMessage]:
        stream = self._conn.key(queue)
        with redis_errors("claim"):
            resp = self._r.xautoclaim(stream, group, consumer, min_idle_ms, start_id="0-0",
                                      count=count)
            entries = resp[1]
            ids = [rid for rid, fields in entries if fields]
            counts: dict[str, int] = {}
            if ids:
                for row in self._r.xpending_range(stream, group, min=ids[0], max=ids[-1],
                                                  count=len(ids) * 2):
                    counts[row["message_id"].decode()] = int(row["times_delivered"])
        return [
            QueueMessage(id=rid.decode(), payload=json.loads(fields[b"data"]),
                         deliveries=counts.get(rid.decode(), 1))
            for rid, fields in entries if fields
        ]

    def depth(self, queue: str, group: str) -> QueueDepth:
        stream = self._conn.key(queue)
        with redis_errors("queue depth"):
            length = int(self._r.xlen(stream))
            groups = self._r.xinfo_groups(stream) if length or self._r.exists(stream) else []
        for info in groups:
            name = info["name"].decode() if isinstance(info["name"], bytes) else info["name"]
            if name == group:
                # ack deletes the entry, so the stream holds exactly the pending entries plus
                # the undelivered ones; Redis's own "lag" miscounts once entries are deleted
                pending = int(info["pending"])
                return QueueDepth(length=length, pending=pending, lag=max(0, length - pending))
        return QueueDepth(length=length, pending=0, lag=length)

    def oldest_ids(self, queue: str, count: int) -> list[str]:
        with redis_errors("scan queue ids"):
            rows = self._r.xrange(self._conn.key(queue), min="-", max="+", count=count)
        return [rid.decode() for rid, _ in rows]

    def entries(self, queue: str) -> list[tuple[str, dict[str, Any]]]:
        with redis_errors("scan queue"):
            rows = self._r.xrange(self._conn.key(queue), min="-", max="+")
        return [(rid.decode(), json.loads(f[b"data"])) for rid, f in rows]

    def remove_user(self, queue: str, scope: Scope) -> int:
        doomed = [rid for rid, p in self.entries(queue)
                  if p.get("tenant") == scope.tenant and p.get("user_id") == scope.user]
        if not doomed:
            return 0
        with redis_errors("queue delete"):
            return int(self._r.xdel(self._conn.key(queue), *doomed))
