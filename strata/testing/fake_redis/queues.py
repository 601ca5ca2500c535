"""The long-term write queues of ``FakeRedis``: streams read through consumer groups,
as Redis keeps them — a consumed entry stays pending until acked, ack deletes it, an entry
idle past ``min_idle_ms`` is claimed with its delivery count."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from strata.errors import QueueStoreError
from strata.models import Scope
from strata.stores import keys
from strata.stores.redis_ports import JOB_TTL_S, JobRecord, JobStatus, QueueDepth, QueueMessage
from strata.testing.fake_redis.keyspace import Group, Keyspace, Pending, Stream, dumps, parse_id

__all__ = ["FakeWriteQueues"]


class FakeWriteQueues:
    """``WriteQueues`` over streams with consumer groups: a consumed entry stays pending
    (with its consumer, delivery time and count) until acked; ack deletes it."""

    def __init__(self, ks: Keyspace) -> None:
        self._ks = ks

    def _stream(self, queue: str, action: str) -> Stream:
        stream = self._ks.get(queue, Stream)
        if stream is None:
            raise QueueStoreError(f"redis {action} failed: NOGROUP no queue {queue!r}")
        return stream

    def ensure_group(self, queue: str, group: str) -> None:
        with self._ks.lock:
            self._ks.ensure(queue, Stream).groups.setdefault(group, Group())

    def enqueue(self, queue: str, payload: Mapping[str, Any]) -> str:
        with self._ks.lock:  # the entry and its status record at once, as the script does
            job_id = self._ks.xadd(queue, {"data": dumps(payload)})
            self._put_job(JobRecord.queued(job_id, queue, payload, self._ks.clock()))
            return job_id

    def _put_job(self, record: JobRecord) -> None:
        name = keys.job(record.id)
        self._ks.put(name, record.model_dump_json())
        self._ks.expire(name, JOB_TTL_S)

    def job(self, job_id: str) -> JobRecord | None:
        with self._ks.lock:
            raw = self._ks.get(keys.job(job_id), str)
        return None if raw is None else JobRecord.model_validate_json(raw)

    def update_job(self, job_id: str, status: JobStatus, *, attempts: int | None = None,
                   written: Mapping[str, int] | None = None, error: str | None = None
                   ) -> None:
        with self._ks.lock:
            found = self.job(job_id)
            if found is not None:
                self._put_job(found.progressed(status, self._ks.clock(), attempts, written,
                                               error))

    def consume(self, queue: str, group: str, consumer: str, count: int = 10,
                block_ms: int | None = None) -> list[QueueMessage]:
        with self._ks.lock:
            taken = self._deliver(queue, group, consumer, count)
            if block_ms is None:
                return taken
            # block_ms 0 waits for an entry as long as it takes, as XREADGROUP BLOCK 0 does
            deadline = time.monotonic() + block_ms / 1000 if block_ms else None
            while not taken:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._ks.changed.wait(left)
                taken = self._deliver(queue, group, consumer, count)
        return taken

    def _deliver(self, queue: str, group: str, consumer: str, count: int
                 ) -> list[QueueMessage]:
        stream = self._stream(queue, "consume")
        state = stream.group(group, "consume")
        rows = stream.after(state.last_delivered)[:count]
        for rid, _ in rows:
            state.pending[rid] = Pending(consumer, self._ks.clock())
            state.last_delivered = parse_id(rid)
        return [QueueMessage(id=rid, payload=json.loads(f["data"])) for rid, f in rows]

    def ack(self, queue: str, group: str, ids: list[str]) -> int:
        if not ids:
            return 0
        with self._ks.lock:
            stream = self._stream(queue, "ack")
            state = stream.group(group, "ack")
            acked = sum(state.pending.pop(rid, None) is not None for rid in ids)
            for rid in ids:
                stream.entries.pop(rid, None)
        return acked

    def claim_stale(self, queue: str, group: str, consumer: str, min_idle_ms: int,
                    count: int = 10) -> list[QueueMessage]:
        with self._ks.lock:
            stream = self._stream(queue, "claim")
            state = stream.group(group, "claim")
            now, claimed = self._ks.clock(), list[QueueMessage]()
            for rid in sorted(state.pending, key=parse_id):
                entry = state.pending[rid]
                if len(claimed) == count or (now - entry.delivered_at) * 1000 < min_idle_ms:
                    continue
                if rid not in stream.entries:  # deleted while pending: Redis 7 drops it
                    del state.pending[rid]
                    continue
                state.pending[rid] = Pending(consumer, now, entry.deliveries + 1)
                claimed.append(QueueMessage(id=rid, deliveries=entry.deliveries + 1,
                                            payload=json.loads(stream.entries[rid]["data"])))
        return claimed

    def depth(self, queue: str, group: str) -> QueueDepth:
        with self._ks.lock:
            stream = self._ks.get(queue, Stream)
            length = len(stream.entries) if stream else 0
            state = stream.groups.get(group) if stream else None
            pending = len(state.pending) if state else 0
        # as the Redis adapter counts: acked entries are deleted, so the stream holds
        # exactly the pending entries plus the undelivered ones
        return QueueDepth(length=length, pending=pending, lag=max(0, length - pending))

    def oldest_ids(self, queue: str, count: int) -> list[str]:
        return [rid for rid, _ in self.entries(queue)[:count]]

    def entries(self, queue: str) -> list[tuple[str, dict[str, Any]]]:
        with self._ks.lock:
            stream = self._ks.get(queue, Stream)
            rows = list(stream.entries.items()) if stream else []
        return [(rid, json.loads(f["data"])) for rid, f in rows]

    def remove_user(self, queue: str, scope: Scope) -> int:
        with self._ks.lock:
            doomed = [rid for rid, p in self.entries(queue)
                      if p.get("tenant") == scope.tenant and p.get("user_id") == scope.user]
            for rid in doomed:
                self._stream(queue, "queue delete").entries.pop(rid)
        return len(doomed)
