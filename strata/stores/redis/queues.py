"""The long-term write queues as Redis streams read through consumer groups: ack deletes
the entry, so no payload outlives its processing; a dead consumer's entries are claimed.
Each entry's status record (``job:{id}``) is written with it, in one script, so a job is
``queued`` from the moment its id exists."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import redis

from strata.models import Scope
from strata.stores import keys
from strata.stores.redis.connection import RedisConnection, dumps, redis_errors, stream_id
from strata.stores.redis_ports import JOB_TTL_S, JobRecord, JobStatus, QueueDepth, QueueMessage

__all__ = ["RedisWriteQueues"]


class RedisWriteQueues:
    """``WriteQueues`` over Redis streams (``q:ltm:high``, ``q:ltm:low``)."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn
        self._r = conn.client
        self._enqueue = self._r.register_script(_ENQUEUE)

    def ensure_group(self, queue: str, group: str) -> None:
        with redis_errors("create group"):
            try:
                self._r.xgroup_create(self._conn.key(queue), group, id="0", mkstream=True)
            except redis.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    def enqueue(self, queue: str, payload: Mapping[str, Any]) -> str:
        record = JobRecord.queued("", queue, payload, time.time())
        with redis_errors("enqueue"):
            return stream_id(self._enqueue(
                keys=[self._conn.key(queue), self._conn.key(keys.job(""))],
                args=[dumps(payload), record.model_dump_json(), JOB_TTL_S]))

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

    def job(self, job_id: str) -> JobRecord | None:
        with redis_errors("read job"):
            raw = self._r.get(self._conn.key(keys.job(job_id)))
        return None if raw is None else JobRecord.model_validate_json(raw)

    def update_job(self, job_id: str, status: JobStatus, *, attempts: int | None = None,
                   written: Mapping[str, int] | None = None, error: str | None = None
                   ) -> None:
        found = self.job(job_id)  # one consumer holds a job at a time: no lost update
        if found is None:
            return
        record = found.progressed(status, time.time(), attempts, written, error)
        with redis_errors("update job"):
            self._r.set(self._conn.key(keys.job(job_id)), record.model_dump_json(),
                        ex=JOB_TTL_S)

    def remove_user(self, queue: str, scope: Scope) -> int:
        doomed = [rid for rid, p in self.entries(queue)
                  if p.get("tenant") == scope.tenant and p.get("user_id") == scope.user]
        if not doomed:
            return 0
        with redis_errors("queue delete"):
            return int(self._r.xdel(self._conn.key(queue), *doomed))


_ENQUEUE = """
local id = redis.call('XADD', KEYS[1], '*', 'data', ARGV[1])
local record = cjson.decode(ARGV[2])
record['id'] = id
redis.call('SET', KEYS[2] .. id, cjson.encode(record), 'EX', tonumber(ARGV[3]))
return id
"""
