"""The Redis adapter: the primitives Strata's durability and queues are built on.

Keys (all under a configurable prefix)::

    wal:{session}     stream   every turn, appended before the turn is acknowledged
    turns:{session}   set      every turn id the session ever had, written in the transaction
                               of the turn's WAL entry (idempotent retries); lives as long as
                               the WAL
    wm:{session}      hash     working-memory snapshot {data, wal_id}
    q:ltm:high|low    stream   long-term write queues, read through a consumer group
    idem:{id}         string   idempotency key, SET NX with a TTL
    audit:{scope}     stream   content-free audit events (ids, counts, actions)
    archived          zset     closed sessions' keys by the time they were archived (the
                               decay sweep purges those past retention; the TTL is a backstop)
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import redis
from pydantic import BaseModel

from strata.errors import InvalidInput, QueueStoreError

__all__ = ["QUEUE_HIGH", "QUEUE_LOW", "QueueDepth", "QueueMessage", "RedisStore"]

logger = logging.getLogger(__name__)

QUEUE_HIGH = "q:ltm:high"
QUEUE_LOW = "q:ltm:low"
_AUDIT_FIELDS = {"action", "memory_id", "session_id", "kind", "count", "actor", "at", "reason"}


class QueueMessage(BaseModel):
    """One entry read from a queue: its stream id, how often delivered, and its payload."""

    id: str
    payload: dict[str, Any]
    deliveries: int = 1


class QueueDepth(BaseModel):
    """How far behind a queue's consumer group is."""

    length: int
    pending: int
    lag: int

    @property
    def backlog(self) -> int:
        """Entries not yet acknowledged: never delivered plus delivered-but-unacked."""
        return self.lag + self.pending


@contextmanager
def _redis_errors(action: str) -> Iterator[None]:
    try:
        yield
    except redis.RedisError as exc:
        raise QueueStoreError(f"redis {action} failed: {exc}") from exc


def _dumps(value: Any) -> str:
    # ensure_ascii=False keeps text as text, so a forgetting scan sees what is stored.
    return json.dumps(value, ensure_ascii=False)


def _decode(fields: Mapping[bytes, bytes]) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in fields.items()}


class RedisStore:
    """Typed access to Strata's Redis keys."""

    def __init__(self, url: str, prefix: str = "strata:") -> None:
        self._prefix = prefix
        # Any: redis-py's return types are unions of bytes/str/None decided at run time by
        # decode_responses; this adapter decodes explicitly instead.
        self._r: Any = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5,
                                       retry_on_timeout=True, health_check_interval=30)

    def _k(self, key: str) -> str:
        return f"{self._prefix}{key}"

    def ping(self) -> None:
        with _redis_errors("ping"):
            self._r.ping()

    def close(self) -> None:
        self._r.close()

    # -- working-memory WAL ------------------------------------------------------------
    def wal_append(self, session_key: str, record: Mapping[str, Any]) -> str:
        """Append one record to the session's WAL; returns the stream id once Redis has it."""
        with _redis_errors("wal append"):
            entry = self._r.xadd(self._k(f"wal:{session_key}"), {"data": _dumps(record)})
        return str(entry.decode() if isinstance(entry, bytes) else entry)

    def wal_append_many(self, session_key: str, records: list[Mapping[str, Any]],
                        turn_ids: Sequence[str] = ()) -> list[str]:
        """Append records in order, all or none (one MULTI/EXEC round trip); their ids.
        ``turn_ids`` join the session's turn-id set in the same transaction."""
        stream = self._k(f"wal:{session_key}")
        with _redis_errors("wal append"):
            pipe = self._r.pipeline(transaction=True)
            for record in records:
                pipe.xadd(stream, {"data": _dumps(record)})
            if turn_ids:
                # no expiry: a live session's WAL has none; archiving sets both
                pipe.sadd(self._k(f"turns:{session_key}"), *turn_ids)
            entries = pipe.execute()
        return [str(e.decode() if isinstance(e, bytes) else e) for e in entries[:len(records)]]

    def known_turn_ids(self, session_key: str, turn_ids: Sequence[str]) -> set[str]:
        """Which of ``turn_ids`` the session ever had (one SMISMEMBER, not a WAL read)."""
        if not turn_ids:
            return set()
        with _redis_errors("turn ids"):
            found = self._r.smismember(self._k(f"turns:{session_key}"), list(turn_ids))
        return {t for t, hit in zip(turn_ids, found, strict=True) if hit}

    def has_turn_id_set(self, session_key: str) -> bool:
        """Whether the session has a turn-id set (sessions older than it have none)."""
        with _redis_errors("turn ids"):
            return bool(self._r.exists(self._k(f"turns:{session_key}")))

    def add_turn_ids(self, session_key: str, turn_ids: Sequence[str]) -> None:
        """Fill a session's turn-id set (from its WAL, for a session written before it)."""
        if turn_ids:
            with _redis_errors("turn ids"):
                self._r.sadd(self._k(f"turns:{session_key}"), *turn_ids)

    def wal_tail(self, session_key: str, count: int) -> list[tuple[str, dict[str, Any]]]:
        """The last ``count`` WAL records, oldest first."""
        with _redis_errors("wal read"):
            rows = self._r.xrevrange(self._k(f"wal:{session_key}"), max="+", min="-",
                                     count=count)
        return [(rid.decode(), json.loads(f[b"data"])) for rid, f in reversed(rows)]

    def wal_read(self, session_key: str, after_id: str = "0") -> list[tuple[str, dict[str, Any]]]:
        """WAL records strictly after ``after_id``, in order."""
        start = f"({after_id}" if after_id != "0" else "-"
        with _redis_errors("wal read"):
            rows = self._r.xrange(self._k(f"wal:{session_key}"), min=start, max="+")
        return [(rid.decode(), json.loads(f[b"data"])) for rid, f in rows]

    def wal_trim(self, session_key: str, upto_id: str) -> int:
        """Drop WAL entries up to and including ``upto_id`` (they are in a snapshot)."""
        with _redis_errors("wal trim"):
            removed = 0
            for rid, _ in self._r.xrange(self._k(f"wal:{session_key}"), min="-", max=upto_id):
                removed += int(self._r.xdel(self._k(f"wal:{session_key}"), rid))
        return removed

    def wal_remove_turns(self, session_key: str, turn_ids: set[str]) -> int:
        """Delete the WAL entries of these turns (forgetting a memory removes its source)."""
        doomed = [rid for rid, rec in self.wal_read(session_key)
                  if rec.get("op") == "turn" and rec["turn"].get("turn_id") in turn_ids]
        if not doomed:
            return 0
        with _redis_errors("wal delete"):
            return int(self._r.xdel(self._k(f"wal:{session_key}"), *doomed))

    def delete_user_sessions(self, scope_key: str) -> int:
        """Delete every WAL and snapshot of a user's sessions (live or archived)."""
        keys = (self.keys(f"wal:{scope_key}:*") + self.keys(f"wm:{scope_key}:*")
                + self.keys(f"turns:{scope_key}:*") + self.keys(f"fu:{scope_key}:*"))
        with _redis_errors("delete sessions"):
            archived = [m for m, _ in self._r.zscan_iter(self._k("archived"),
                                                         match=f"{scope_key}:*")]
            if archived:
                self._r.zrem(self._k("archived"), *archived)
            return int(self._r.delete(*keys)) if keys else 0

    # -- follow-ups (strata.layers.proactive) --------------------------------------------
    def archived_of(self, scope_key: str) -> list[tuple[str, float]]:
        """A user's archived (closed) sessions: (session key, archived at)."""
        with _redis_errors("archived sessions"):
            return [(m.decode() if isinstance(m, bytes) else str(m), float(at))
                    for m, at in self._r.zscan_iter(
                self._k("archived"), match=f"{scope_key}:*")]

    def followup_state(self, scope_key: str, session_key: str | None
                       ) -> tuple[dict[str, float], dict[str, tuple[int, int]], int]:
        """Topics' quiet-until times, (used, dismissed) per kind, and the proposals made in
        the session so far."""
        with _redis_errors("follow-up state"):
            pipe = self._r.pipeline()
            pipe.hgetall(self._k(f"fu:{scope_key}:quiet"))
            pipe.hgetall(self._k(f"fu:{scope_key}:outcomes"))
            pipe.get(self._k(f"fu:{session_key}:count") if session_key else self._k("_none"))
            quiet, outcomes, count = pipe.execute()
        kinds: dict[str, list[int]] = {}
        for field, n in _decode(outcomes).items():
            kind, _, outcome = field.rpartition(":")
            kinds.setdefault(kind, [0, 0])[0 if outcome == "used" else 1] += int(n)
        return ({k: float(v) for k, v in _decode(quiet).items()},
                {k: (v[0], v[1]) for k, v in kinds.items()}, int(count or 0))

    def followup_proposed(self, scope_key: str, session_key: str | None, topics: list[str],
                          quiet_until: float, session_ttl_s: int) -> None:
        with _redis_errors("follow-up proposed"):
            pipe = self._r.pipeline()
            if topics:
                pipe.hset(self._k(f"fu:{scope_key}:quiet"),
                          mapping=dict.fromkeys(topics, quiet_until))
            if session_key and topics:
                pipe.incrby(self._k(f"fu:{session_key}:count"), len(topics))
                pipe.expire(self._k(f"fu:{session_key}:count"), session_ttl_s)
            pipe.execute()

    def followup_outcome(self, scope_key: str, topic: str, kind: str, outcome: str,
                         quiet_until: float) -> None:
        with _redis_errors("follow-up outcome"):
            pipe = self._r.pipeline()
            pipe.hset(self._k(f"fu:{scope_key}:quiet"), topic, quiet_until)
            pipe.hincrby(self._k(f"fu:{scope_key}:outcomes"), f"{kind}:{outcome}", 1)
            pipe.execute()

    # -- snapshots -----------------------------------------------------------------------
    def snapshot_put(self, session_key: str, data: Mapping[str, Any], wal_id: str) -> None:
        with _redis_errors("snapshot put"):
            self._r.hset(self._k(f"wm:{session_key}"),
                         mapping={"data": _dumps(data), "wal_id": wal_id})

    def snapshot_get(self, session_key: str) -> tuple[dict[str, Any], str] | None:
        with _redis_errors("snapshot get"):
            raw = self._r.hgetall(self._k(f"wm:{session_key}"))
        if not raw:
            return None
        fields = _decode(raw)
        return json.loads(fields["data"]), fields["wal_id"]

    def delete_session(self, session_key: str) -> None:
        """Remove a session's WAL, snapshot and turn-id set."""
        with _redis_errors("delete session"):
            self._r.delete(self._k(f"wal:{session_key}"), self._k(f"wm:{session_key}"),
                           self._k(f"turns:{session_key}"))

    def touch_session(self, shard: int, session_key: str, at: float) -> None:
        """Record a session's last activity in its shard's index (for idle sweeps)."""
        with _redis_errors("touch session"):
            self._r.zadd(self._k(f"active:{shard}"), {session_key: at})

    def idle_sessions(self, shard: int, before: float, limit: int = 1000) -> list[str]:
        """Sessions of a shard last active before ``before`` (epoch seconds)."""
        with _redis_errors("idle sessions"):
            rows = self._r.zrangebyscore(self._k(f"active:{shard}"), "-inf", before,
                                         start=0, num=limit)
        return [r.decode() for r in rows]

    def untrack_session(self, shard: int, session_key: str) -> None:
        with _redis_errors("untrack session"):
            self._r.zrem(self._k(f"active:{shard}"), session_key)

    def archive_session(self, session_key: str, retention_s: int,
                        at: float | None = None) -> None:
        """Keep a closed session's WAL and snapshot for ``retention_s``, then Redis drops them;
        the ``archived`` index lets the decay sweep purge them explicitly."""
        with _redis_errors("archive session"):
            pipe = self._r.pipeline(transaction=True)
            pipe.expire(self._k(f"wal:{session_key}"), retention_s)
            pipe.expire(self._k(f"wm:{session_key}"), retention_s)
            pipe.expire(self._k(f"turns:{session_key}"), retention_s)
            pipe.zadd(self._k("archived"), {session_key: time.time() if at is None else at})
            pipe.execute()

    def archived_before(self, before: float, limit: int = 10_000) -> list[str]:
        """Archived sessions' keys archived before ``before`` (epoch seconds), oldest first."""
        with _redis_errors("archived sessions"):
            rows = self._r.zrangebyscore(self._k("archived"), "-inf", before, start=0,
                                         num=limit)
        return [r.decode() for r in rows]

    def unarchive_session(self, session_key: str) -> None:
        with _redis_errors("unarchive session"):
            self._r.zrem(self._k("archived"), session_key)

    # -- queues --------------------------------------------------------------------------
    def ensure_group(self, queue: str, group: str) -> None:
        with _redis_errors("create group"):
            try:
                self._r.xgroup_create(self._k(queue), group, id="0", mkstream=True)
            except redis.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    def enqueue(self, queue: str, payload: Mapping[str, Any]) -> str:
        with _redis_errors("enqueue"):
            entry = self._r.xadd(self._k(queue), {"data": _dumps(payload)})
        return str(entry.decode() if isinstance(entry, bytes) else entry)

    def consume(self, queue: str, group: str, consumer: str, count: int = 10,
                block_ms: int | None = None) -> list[QueueMessage]:
        """New entries for this consumer (each is pending until ``ack``)."""
        with _redis_errors("consume"):
            resp = self._r.xreadgroup(group, consumer, {self._k(queue): ">"}, count=count,
                                      block=block_ms)
        out = []
        for _stream, entries in resp or []:
            for rid, fields in entries:
                if fields:
                    out.append(QueueMessage(id=rid.decode(), payload=json.loads(fields[b"data"])))
        return out

    def ack(self, queue: str, group: str, ids: list[str]) -> int:
        """Acknowledge and delete the entries, so no payload outlives its processing."""
        if not ids:
            return 0
        with _redis_errors("ack"):
            pipe = self._r.pipeline(transaction=True)
            pipe.xack(self._k(queue), group, *ids)
            pipe.xdel(self._k(queue), *ids)
            acked, _ = pipe.execute()
        return int(acked)

    def claim_stale(self, queue: str, group: str, consumer: str, min_idle_ms: int,
                    count: int = 10) -> list[QueueMessage]:
        """Take over entries another consumer read but did not ack within ``min_idle_ms``."""
        with _redis_errors("claim"):
            resp = self._r.xautoclaim(self._k(queue), group, consumer, min_idle_ms,
                                      start_id="0-0", count=count)
            entries = resp[1]
            ids = [rid for rid, fields in entries if fields]
            counts: dict[str, int] = {}
            if ids:
                for row in self._r.xpending_range(self._k(queue), group, min=ids[0],
                                                  max=ids[-1], count=len(ids) * 2):
                    counts[row["message_id"].decode()] = int(row["times_delivered"])
        return [
            QueueMessage(id=rid.decode(), payload=json.loads(fields[b"data"]),
                         deliveries=counts.get(rid.decode(), 1))
            for rid, fields in entries if fields
        ]

    def queue_depth(self, queue: str, group: str) -> QueueDepth:
        with _redis_errors("queue depth"):
            length = int(self._r.xlen(self._k(queue)))
            groups = self._r.xinfo_groups(self._k(queue)) if length or self._r.exists(
                self._k(queue)) else []
        for info in groups:
            name = info["name"].decode() if isinstance(info["name"], bytes) else info["name"]
            if name == group:
                # ack deletes the entry, so the stream holds exactly the pending entries plus
                # the undelivered ones; Redis's own "lag" miscounts once entries are deleted
                pending = int(info["pending"])
                return QueueDepth(length=length, pending=pending, lag=max(0, length - pending))
        return QueueDepth(length=length, pending=0, lag=length)

    def scan_queue_ids(self, queue: str, count: int) -> list[str]:
        """The ids of the oldest ``count`` entries still in a queue."""
        with _redis_errors("scan queue ids"):
            rows = self._r.xrange(self._k(queue), min="-", max="+", count=count)
        return [rid.decode() for rid, _ in rows]

    def scan_queue(self, queue: str) -> list[tuple[str, dict[str, Any]]]:
        """Every entry still in a queue (for forgetting and inspection)."""
        with _redis_errors("scan queue"):
            rows = self._r.xrange(self._k(queue), min="-", max="+")
        return [(rid.decode(), json.loads(f[b"data"])) for rid, f in rows]

    def remove_from_queue(self, queue: str, ids: list[str]) -> int:
        if not ids:
            return 0
        with _redis_errors("queue delete"):
            return int(self._r.xdel(self._k(queue), *ids))

    def remove_user_from_queue(self, queue: str, tenant: str, user_id: str) -> int:
        doomed = [rid for rid, p in self.scan_queue(queue)
                  if p.get("tenant") == tenant and p.get("user_id") == user_id]
        return self.remove_from_queue(queue, doomed)

    def untrack_user(self, shard: int, scope_key: str) -> None:
        with _redis_errors("untrack user"):
            members = [m for m in self._r.zrange(self._k(f"active:{shard}"), 0, -1)
                       if m.decode().startswith(f"{scope_key}:")]
            if members:
                self._r.zrem(self._k(f"active:{shard}"), *members)

    # -- user registry (for sweeps across all users) ------------------------------------------
    def register_user(self, scope_key: str) -> None:
        with _redis_errors("register user"):
            self._r.sadd(self._k("users"), scope_key)

    def unregister_user(self, scope_key: str) -> None:
        with _redis_errors("unregister user"):
            self._r.srem(self._k("users"), scope_key)

    def users(self) -> list[str]:
        with _redis_errors("users"):
            return sorted(m.decode() for m in self._r.sscan_iter(self._k("users"), count=1000))

    # -- recall log (content-free: ids and route only) -------------------------------------
    def recall_log_add(self, scope_key: str, memory_ids: list[str], route: str) -> None:
        with _redis_errors("recall log"):
            self._r.xadd(self._k("recall-log"), {"scope": scope_key, "route": route,
                                                 "ids": ",".join(memory_ids)},
                         maxlen=100_000, approximate=True)

    def recall_log(self, scope_key: str) -> list[dict[str, str]]:
        with _redis_errors("recall log read"):
            rows = self._r.xrange(self._k("recall-log"))
        return [f for f in (_decode(r) for _, r in rows) if f.get("scope") == scope_key]

    def recall_log_remove(self, scope_key: str, memory_ids: set[str] | None = None) -> int:
        """Drop a user's recall-log entries (all, or those naming ``memory_ids``)."""
        with _redis_errors("recall log delete"):
            rows = self._r.xrange(self._k("recall-log"))
            doomed = []
            for rid, raw in rows:
                fields = _decode(raw)
                if fields.get("scope") != scope_key:
                    continue
                if memory_ids is None or memory_ids & set(fields.get("ids", "").split(",")):
                    doomed.append(rid)
            return int(self._r.xdel(self._k("recall-log"), *doomed)) if doomed else 0

    # -- idempotency ---------------------------------------------------------------------
    def claim_once(self, idem_id: str, ttl_s: int = 7 * 24 * 3600) -> bool:
        """True the first time ``idem_id`` is claimed within ``ttl_s``; False on a repeat."""
        with _redis_errors("idempotency"):
            return bool(self._r.set(self._k(f"idem:{idem_id}"), "1", nx=True, ex=ttl_s))

    def release(self, idem_id: str) -> None:
        """Forget an idempotency claim (the write it guarded failed and will be retried)."""
        with _redis_errors("idempotency release"):
            self._r.delete(self._k(f"idem:{idem_id}"))

    # -- audit ---------------------------------------------------------------------------
    def audit(self, scope_key: str, **fields: str | int | float) -> str:
        """Append a content-free audit event; only whitelisted, non-text fields are allowed."""
        unknown = set(fields) - _AUDIT_FIELDS
        if unknown:
            raise InvalidInput(f"audit fields must be content-free; unknown {sorted(unknown)}")
        with _redis_errors("audit"):
            entry = self._r.xadd(self._k(f"audit:{scope_key}"),
                                 {k: str(v) for k, v in fields.items()})
        return str(entry.decode() if isinstance(entry, bytes) else entry)

    def audit_read(self, scope_key: str) -> list[dict[str, str]]:
        with _redis_errors("audit read"):
            rows = self._r.xrange(self._k(f"audit:{scope_key}"))
        return [_decode(f) for _, f in rows]

    # -- the append-only file (forgetting) -----------------------------------------------
    def rewrite_aof(self) -> str:
        """Ask Redis to rewrite its AOF from the live dataset, so deleted values leave the
        files (Redis 7 writes a new base and incr file and removes the old ones). Returns
        "started", "scheduled" (Redis runs it after its current child), "in_progress" (a
        rewrite that forked before this call is running: ask again once it ends) or "off"
        (no AOF)."""
        with _redis_errors("aof rewrite"):
            if not self._r.info("persistence").get("aof_enabled"):
                return "off"
            try:
                reply = self._r.execute_command("BGREWRITEAOF")
            except redis.ResponseError as exc:
                if "already in progress" in str(exc):
                    return "in_progress"
                raise
        text = reply.decode() if isinstance(reply, bytes) else str(reply)
        return "scheduled" if "scheduled" in text else "started"

    def aof_rewrite_pending(self) -> bool:
        """True while an AOF rewrite runs or is scheduled."""
        with _redis_errors("aof state"):
            info = self._r.info("persistence")
        return bool(info.get("aof_rewrite_in_progress") or info.get("aof_rewrite_scheduled"))

    # -- scans (forgetting, tests) -----------------------------------------------------------
    def keys(self, pattern: str) -> list[str]:
        with _redis_errors("scan"):
            return [k.decode() for k in self._r.scan_iter(match=self._k(pattern), count=500)]

    def dump_values(self) -> Iterator[tuple[str, bytes]]:
        """Every key under the prefix with its raw contents (a forgetting audit scans this)."""
        with _redis_errors("dump"):
            for key in self._r.scan_iter(match=self._k("*"), count=500):
                kind = self._r.type(key).decode()
                if kind == "string":
                    yield key.decode(), self._r.get(key) or b""
                elif kind == "hash":
                    yield key.decode(), _dumps(_decode(self._r.hgetall(key))).encode()
                elif kind == "stream":
                    for _, fields in self._r.xrange(key):
                        yield key.decode(), _dumps(_decode(fields)).encode()
                elif kind == "list":
                    for item in self._r.lrange(key, 0, -1):
                        yield key.decode(), item
