"""The session log (WAL, turn-id set, snapshot) and the session index (active per shard,
archived) of ``FakeRedis``, in its keyspace under the Redis key names."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

from strata.models import Scope
from strata.stores import keys
from strata.stores.keys import SessionRef
from strata.stores.redis_ports import WalEntry
from strata.testing.fake_redis.keyspace import Hash, Keyspace, Stream, ZSet, dumps, parse_id

__all__ = ["FakeSessionIndex", "FakeSessionLog"]


class FakeSessionLog:
    """``SessionLog`` over ``wal:`` streams, ``turns:`` sets and ``wm:`` hashes."""

    def __init__(self, ks: Keyspace) -> None:
        self._ks = ks

    def append(self, ref: SessionRef, record: Mapping[str, Any]) -> str:
        with self._ks.lock:
            return self._ks.xadd(keys.wal(ref), {"data": dumps(record)})

    def append_turns(self, ref: SessionRef, records: Sequence[Mapping[str, Any]],
                     turn_ids: Sequence[str] = ()) -> list[str]:
        with self._ks.lock:  # one lock: all or none, as Redis's MULTI/EXEC
            ids = [self._ks.xadd(keys.wal(ref), {"data": dumps(r)}) for r in records]
            self.add_turn_ids(ref, turn_ids)
        return ids

    def read(self, ref: SessionRef, after_id: str = "0") -> list[WalEntry]:
        with self._ks.lock:
            stream = self._ks.get(keys.wal(ref), Stream)
            rows = stream.after(parse_id(after_id)) if stream else []
        return [(rid, json.loads(f["data"])) for rid, f in rows]

    def remove_turns(self, ref: SessionRef, turn_ids: set[str]) -> int:
        with self._ks.lock:
            stream = self._ks.get(keys.wal(ref), Stream) or Stream()
            doomed = [rid for rid, rec in self.read(ref)
                      if rec.get("op") == "turn" and rec["turn"].get("turn_id") in turn_ids]
            for rid in doomed:
                del stream.entries[rid]
        return len(doomed)

    def known_turn_ids(self, ref: SessionRef, turn_ids: Sequence[str]) -> set[str]:
        with self._ks.lock:
            known = self._ks.get(keys.turn_ids(ref), set) or set()
        return {t for t in turn_ids if t in known}

    def has_turn_id_set(self, ref: SessionRef) -> bool:
        with self._ks.lock:
            return self._ks.get(keys.turn_ids(ref), set) is not None

    def add_turn_ids(self, ref: SessionRef, turn_ids: Sequence[str]) -> None:
        if turn_ids:
            with self._ks.lock:
                self._ks.ensure(keys.turn_ids(ref), set).update(turn_ids)

    def put_snapshot(self, ref: SessionRef, data: Mapping[str, Any], wal_id: str) -> None:
        with self._ks.lock:
            self._ks.ensure(keys.snapshot(ref), Hash).update(data=dumps(data), wal_id=wal_id)

    def snapshot(self, ref: SessionRef) -> tuple[dict[str, Any], str] | None:
        with self._ks.lock:
            fields = self._ks.get(keys.snapshot(ref), Hash)
        return (json.loads(fields["data"]), fields["wal_id"]) if fields else None

    def delete(self, ref: SessionRef) -> None:
        with self._ks.lock:
            self._ks.delete(keys.wal(ref), keys.snapshot(ref), keys.turn_ids(ref))

    def delete_user(self, scope: Scope) -> int:
        with self._ks.lock:
            return self._ks.delete(*[k for kind in ("wal", "wm", "turns")
                                     for k in self._ks.names(keys.user_keys(kind, scope))])


class FakeSessionIndex:
    """``SessionIndex`` over ``active:{shard}`` and ``archived`` sorted sets."""

    def __init__(self, ks: Keyspace) -> None:
        self._ks = ks

    def _refs(self, index: str, before: float, limit: int) -> list[SessionRef]:
        with self._ks.lock:
            zset = self._ks.get(index, ZSet) or ZSet()
            return [SessionRef.parse(m) for m in zset.range_by_score(before, limit)]

    def _remove(self, index: str, ref: SessionRef | None = None,
                scope: Scope | None = None) -> None:
        with self._ks.lock:
            zset = self._ks.get(index, ZSet) or ZSet()
            if ref is not None:
                zset.pop(ref.key, None)
            if scope is not None:
                for member in [m for m in zset if fnmatchcase(m, keys.user_members(scope))]:
                    del zset[member]

    def touch(self, shard: int, ref: SessionRef, at: float) -> None:
        with self._ks.lock:
            self._ks.ensure(keys.active(shard), ZSet)[ref.key] = at

    def idle(self, shard: int, before: float, limit: int = 1000) -> list[SessionRef]:
        return self._refs(keys.active(shard), before, limit)

    def untrack(self, shard: int, ref: SessionRef) -> None:
        self._remove(keys.active(shard), ref=ref)

    def untrack_user(self, shard: int, scope: Scope) -> None:
        self._remove(keys.active(shard), scope=scope)

    def archive(self, ref: SessionRef, retention_s: int, at: float | None = None) -> None:
        with self._ks.lock:
            for name in (keys.wal(ref), keys.snapshot(ref), keys.turn_ids(ref)):
                self._ks.expire(name, retention_s)
            self._ks.ensure(keys.ARCHIVED, ZSet)[ref.key] = self._ks.clock() if at is None else at

    def archived_before(self, before: float, limit: int = 10_000) -> list[SessionRef]:
        return self._refs(keys.ARCHIVED, before, limit)

    def archived_of(self, scope: Scope) -> list[tuple[SessionRef, float]]:
        with self._ks.lock:
            zset = self._ks.get(keys.ARCHIVED, ZSet) or ZSet()
            return [(SessionRef.parse(m), at) for m, at in zset.items()
                    if fnmatchcase(m, keys.user_members(scope))]

    def unarchive(self, ref: SessionRef) -> None:
        self._remove(keys.ARCHIVED, ref=ref)

    def unarchive_user(self, scope: Scope) -> None:
        self._remove(keys.ARCHIVED, scope=scope)
