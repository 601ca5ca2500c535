"""The session log (WAL, turn-id set, snapshot) and the session index (active per shard,
archived) in Redis; key names from ``strata.stores.keys``."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import redis

from strata import tracing
from strata.errors import QueueStoreError
from strata.models import Scope
from strata.stores import keys
from strata.stores.keys import SessionRef
from strata.stores.redis.connection import (
    RedisConnection,
    decode,
    dumps,
    redis_errors,
    stream_id,
)
from strata.stores.redis_ports import WalEntry

__all__ = ["RedisSessionIndex", "RedisSessionLog"]

# KEYS: the WAL stream, the turn-id set. ARGV: n, n records, n turn ids ('' for none).
# A turn whose id the set already holds is not written again: a client library that resends
# a command after a timeout (redis-py does) would otherwise append a turn twice when the
# first reply, not the write, was lost. Its entry id is found among the newest entries
# (a resend follows at once; one shard owns a session, so nothing lands in between).
_APPEND_TURNS = """
local n = tonumber(ARGV[1])
local ids, resent, seen = {}, {}, 0
for i = 1, n do
  local tid = ARGV[1 + n + i]
  if tid ~= '' and redis.call('SISMEMBER', KEYS[2], tid) == 1 then
    ids[i] = ''
    resent[tid] = i
    seen = seen + 1
  else
    ids[i] = redis.call('XADD', KEYS[1], '*', 'data', ARGV[1 + i])
    if tid ~= '' then redis.call('SADD', KEYS[2], tid) end
  end
end
if seen > 0 then
  for _, row in ipairs(redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 4 * n + 16)) do
    local fields = row[2]
    for j = 1, #fields, 2 do
      if fields[j] == 'data' then
        local ok, record = pcall(cjson.decode, fields[j + 1])
        if ok and record.op == 'turn' and resent[record.turn.turn_id] then
          ids[resent[record.turn.turn_id]] = row[1]
          resent[record.turn.turn_id] = nil
        end
      end
    end
  end
end
return ids
"""


def _turn_id(fields: Mapping[bytes, bytes]) -> str | None:
    """The turn id of a raw WAL entry that records a turn."""
    record = json.loads(fields[b"data"])
    return record["turn"].get("turn_id") if record.get("op") == "turn" else None


class RedisSessionLog:
    """``SessionLog`` over Redis: ``wal:`` streams, ``turns:`` sets, ``wm:`` hashes.

    ``wait_replicas`` > 0: every WAL append is followed, on the same connection, by
    ``WAIT wait_replicas wait_timeout_ms``, and returns only once that many replicas have
    it; fewer in time raise ``QueueStoreError`` (the entry is on the primary, unacknowledged:
    a retry with the same ``turn_id`` is then a duplicate, not a second turn).
    """

    def __init__(self, conn: RedisConnection, wait_replicas: int = 0,
                 wait_timeout_ms: int = 1000) -> None:
        self._conn = conn
        self._r = conn.client
        self._wait_replicas = wait_replicas
        self._wait_timeout_ms = wait_timeout_ms
        self._append_turns = self._r.register_script(_APPEND_TURNS)

    def append(self, ref: SessionRef, record: Mapping[str, Any]) -> str:
        stream = self._conn.key(keys.wal(ref))
        with tracing.span("redis.wal_append", ref.scope, session_id=ref.session_id,
                          count=1), redis_errors("wal append"):
            return stream_id(self._transaction(
                lambda pipe: pipe.xadd(stream, {"data": dumps(record)}))[0])

    def _transaction(self, queue: Callable[[Any], object]) -> list[Any]:
        """The commands ``queue`` puts on a pipeline, as one MULTI/EXEC; their results once
        Redis (and, with ``wait_replicas``, that many replicas) has them."""
        if not self._wait_replicas:
            pipe = self._r.pipeline(transaction=True)
            queue(pipe)
            return list(pipe.execute())
        # WAIT counts the replicas that have this connection's writes, so it must follow
        # the write on the same connection: one non-transactional pipeline holding both
        pipe = self._r.pipeline(transaction=False)
        pipe.execute_command("MULTI")
        queue(pipe)
        pipe.execute_command("EXEC")
        pipe.wait(self._wait_replicas, self._wait_timeout_ms)
        *_, results, replicas = pipe.execute()
        self._check_replicas(replicas)
        return list(results)

    def _check_replicas(self, replicas: Any) -> None:
        if int(replicas) < self._wait_replicas:
            raise QueueStoreError(
                f"redis wal append reached {replicas} of {self._wait_replicas} replicas in "
                f"{self._wait_timeout_ms} ms (STRATA_REDIS_WAIT_REPLICAS): on the primary, "
                "not acknowledged")

    def append_turns(self, ref: SessionRef, records: Sequence[Mapping[str, Any]],
                     turn_ids: Sequence[str] = ()) -> list[str]:
        """One script: the records and their turn ids land together or not at all, and a
        resent call (its first reply lost) writes nothing twice."""
        ids = [*turn_ids, *([""] * (len(records) - len(turn_ids)))]
        script_keys = [self._conn.key(keys.wal(ref)), self._conn.key(keys.turn_ids(ref))]
        args = [len(records), *(dumps(r) for r in records), *ids]
        with tracing.span("redis.wal_append", ref.scope, session_id=ref.session_id,
                          count=len(records)), redis_errors("wal append"):
            if self._wait_replicas:  # the script is atomic: no MULTI needed around it
                pipe = self._r.pipeline(transaction=False)
                self._append_turns(keys=script_keys, args=args, client=pipe)
                pipe.wait(self._wait_replicas, self._wait_timeout_ms)
                entries, replicas = pipe.execute()
                self._check_replicas(replicas)
            else:
                entries = self._append_turns(keys=script_keys, args=args)
        wal_ids = [stream_id(e) for e in entries]
        if "" in wal_ids:  # an earlier write of these turns, too old to find: reload
            raise QueueStoreError("redis wal append: a turn of this batch is already in the "
                                  "WAL from an earlier write; the session reloads")
        return wal_ids

    def read(self, ref: SessionRef, after_id: str = "0") -> list[WalEntry]:
        start = f"({after_id}" if after_id != "0" else "-"
        with redis_errors("wal read"):
            rows = self._r.xrange(self._conn.key(keys.wal(ref)), min=start, max="+")
        return [(rid.decode(), json.loads(f[b"data"])) for rid, f in rows]

    def remove_turns(self, ref: SessionRef, turn_ids: set[str]) -> int:
        """The stream is rewritten without the turns, not XDEL'd: XDEL only flags an entry
        in its listpack node, whose bytes — the deleted words — stay in memory and go into
        every later RDB/AOF rewrite until the whole node goes."""
        stream = self._conn.key(keys.wal(ref))
        with redis_errors("wal delete"), self._r.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(stream)  # an append in between: read again
                    rows = pipe.xrange(stream)
                    doomed = {rid for rid, f in rows if _turn_id(f) in turn_ids}
                    if not doomed:
                        pipe.unwatch()
                        return 0
                    ttl_ms, last = int(pipe.pttl(stream)), rows[-1][0]
                    pipe.multi()
                    pipe.delete(stream)
                    for rid, fields in rows:
                        if rid not in doomed:
                            pipe.xadd(stream, fields, id=rid)
                    if len(doomed) < len(rows):
                        pipe.execute_command("XSETID", stream, last)  # ids never go back
                        if ttl_ms > 0:
                            pipe.pexpire(stream, ttl_ms)
                    pipe.execute()
                    return len(doomed)
                except redis.WatchError:
                    continue

    def known_turn_ids(self, ref: SessionRef, turn_ids: Sequence[str]) -> set[str]:
        if not turn_ids:
            return set()
        with redis_errors("turn ids"):  # one SMISMEMBER, not a WAL read
            found = self._r.smismember(self._conn.key(keys.turn_ids(ref)), list(turn_ids))
        return {t for t, hit in zip(turn_ids, found, strict=True) if hit}

    def has_turn_id_set(self, ref: SessionRef) -> bool:
        with redis_errors("turn ids"):
            return bool(self._r.exists(self._conn.key(keys.turn_ids(ref))))

    def add_turn_ids(self, ref: SessionRef, turn_ids: Sequence[str]) -> None:
        if turn_ids:
            with redis_errors("turn ids"):
                self._r.sadd(self._conn.key(keys.turn_ids(ref)), *turn_ids)

    def put_snapshot(self, ref: SessionRef, data: Mapping[str, Any], wal_id: str) -> None:
        with redis_errors("snapshot put"):
            self._r.hset(self._conn.key(keys.snapshot(ref)),
                         mapping={"data": dumps(data), "wal_id": wal_id})

    def snapshot(self, ref: SessionRef) -> tuple[dict[str, Any], str] | None:
        with redis_errors("snapshot get"):
            raw = self._r.hgetall(self._conn.key(keys.snapshot(ref)))
        if not raw:
            return None
        fields = decode(raw)
        return json.loads(fields["data"]), fields["wal_id"]

    def delete(self, ref: SessionRef) -> None:
        with redis_errors("delete session"):
            self._r.delete(self._conn.key(keys.wal(ref)), self._conn.key(keys.snapshot(ref)),
                           self._conn.key(keys.turn_ids(ref)))

    def delete_user(self, scope: Scope) -> int:
        found = [k for kind in ("wal", "wm", "turns")
                 for k in self._conn.keys(keys.user_keys(kind, scope))]
        with redis_errors("delete sessions"):
            return int(self._r.delete(*found)) if found else 0


class RedisSessionIndex:
    """``SessionIndex`` over Redis: ``active:{shard}`` and ``archived`` zsets of session
    keys scored by time."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn
        self._r = conn.client

    def touch(self, shard: int, ref: SessionRef, at: float) -> None:
        with redis_errors("touch session"):
            self._r.zadd(self._conn.key(keys.active(shard)), {ref.key: at})

    def idle(self, shard: int, before: float, limit: int = 1000) -> list[SessionRef]:
        with redis_errors("idle sessions"):
            rows = self._r.zrangebyscore(self._conn.key(keys.active(shard)), "-inf", before,
                                         start=0, num=limit)
        return [SessionRef.parse(r.decode()) for r in rows]

    def untrack(self, shard: int, ref: SessionRef) -> None:
        with redis_errors("untrack session"):
            self._r.zrem(self._conn.key(keys.active(shard)), ref.key)

    def untrack_user(self, shard: int, scope: Scope) -> None:
        self._remove_user(keys.active(shard), scope)

    def _remove_user(self, index: str, scope: Scope) -> None:
        with redis_errors(f"{index} remove user"):
            members = [m for m, _ in self._r.zscan_iter(self._conn.key(index),
                                                        match=keys.user_members(scope))]
            if members:
                self._r.zrem(self._conn.key(index), *members)

    def archive(self, ref: SessionRef, retention_s: int, at: float | None = None) -> None:
        # the TTL is a backstop: the decay sweep purges what the index says is past retention
        with redis_errors("archive session"):
            pipe = self._r.pipeline(transaction=True)
            for name in (keys.wal(ref), keys.snapshot(ref), keys.turn_ids(ref)):
                pipe.expire(self._conn.key(name), retention_s)
            pipe.zadd(self._conn.key(keys.ARCHIVED),
                      {ref.key: time.time() if at is None else at})
            pipe.execute()

    def archived_before(self, before: float, limit: int = 10_000) -> list[SessionRef]:
        with redis_errors("archived sessions"):
            rows = self._r.zrangebyscore(self._conn.key(keys.ARCHIVED), "-inf", before,
                                         start=0, num=limit)
        return [SessionRef.parse(r.decode()) for r in rows]

    def archived_of(self, scope: Scope) -> list[tuple[SessionRef, float]]:
        with redis_errors("archived sessions"):
            return [(SessionRef.parse(m.decode()), float(at)) for m, at in self._r.zscan_iter(
                self._conn.key(keys.ARCHIVED), match=keys.user_members(scope))]

    def unarchive(self, ref: SessionRef) -> None:
        with redis_errors("unarchive session"):
            self._r.zrem(self._conn.key(keys.ARCHIVED), ref.key)

    def unarchive_user(self, scope: Scope) -> None:
        self._remove_user(keys.ARCHIVED, scope)
