"""Per-user records of ``FakeRedis`` besides sessions and queues: the audit log, the
recall log, the user registry, the follow-up state, the forget log; and an append-only file
that is off."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from strata.models import Scope
from strata.stores import keys
from strata.stores.keys import SessionRef, parse_scope_key
from strata.stores.redis_ports import (
    FORGET_LOG_MAX,
    FORGET_LOG_TTL_S,
    RECALL_LOG_MAXLEN,
    ForgetRequest,
    check_content_free,
)
from strata.testing.fake_redis.keyspace import Hash, Keyspace, Stream, ZSet

__all__ = ["FakeAppendOnlyFile", "FakeAuditLog", "FakeFollowUpState", "FakeForgetLog",
           "FakeRecallLog", "FakeUserRegistry"]


class FakeAuditLog:
    """``AuditLog`` over one ``audit:{scope}`` stream per user; content-free fields only."""

    def __init__(self, ks: Keyspace) -> None:
        self._ks = ks

    def append(self, scope: Scope, **fields: str | int | float) -> str:
        check_content_free(fields)
        with self._ks.lock:
            return self._ks.xadd(keys.audit(scope), {k: str(v) for k, v in fields.items()})

    def read(self, scope: Scope) -> list[dict[str, str]]:
        with self._ks.lock:
            stream = self._ks.get(keys.audit(scope), Stream)
            return [dict(f) for f in stream.entries.values()] if stream else []


class FakeRecallLog:
    """``RecallLog`` over one capped ``recall-log`` stream of {scope, route, ids}."""

    def __init__(self, ks: Keyspace) -> None:
        self._ks = ks

    def add(self, scope: Scope, memory_ids: list[str], route: str) -> None:
        with self._ks.lock:
            self._ks.xadd(keys.RECALL_LOG, {"scope": scope.key, "route": route,
                                            "ids": ",".join(memory_ids)})
            entries = self._ks.ensure(keys.RECALL_LOG, Stream).entries
            for rid in list(entries)[:max(0, len(entries) - RECALL_LOG_MAXLEN)]:
                del entries[rid]

    def remove(self, scope: Scope, memory_ids: set[str] | None = None) -> int:
        with self._ks.lock:
            stream = self._ks.get(keys.RECALL_LOG, Stream) or Stream()
            doomed = [rid for rid, f in stream.entries.items() if f["scope"] == scope.key and (
                memory_ids is None or memory_ids & set(f["ids"].split(",")))]
            for rid in doomed:
                del stream.entries[rid]
        return len(doomed)


class FakeUserRegistry:
    """``UserRegistry`` over the ``users`` set of scope keys."""

    def __init__(self, ks: Keyspace) -> None:
        self._ks = ks

    def register(self, scope: Scope) -> None:
        with self._ks.lock:
            self._ks.ensure(keys.USERS, set).add(scope.key)

    def unregister(self, scope: Scope) -> None:
        with self._ks.lock:
            (self._ks.get(keys.USERS, set) or set()).discard(scope.key)

    def all(self) -> list[Scope]:
        with self._ks.lock:
            found = sorted(self._ks.get(keys.USERS, set) or ())
        return [parse_scope_key(k) for k in found]


class FakeFollowUpState:
    """``FollowUpState`` over ``fu:{scope}:quiet`` and ``fu:{scope}:outcomes`` hashes and a
    ``fu:{session}:count`` counter that expires with the session."""

    def __init__(self, ks: Keyspace) -> None:
        self._ks = ks

    def state(self, scope: Scope, ref: SessionRef | None
              ) -> tuple[dict[str, float], dict[str, tuple[int, int]], int]:
        with self._ks.lock:
            quiet = self._ks.get(keys.followup_quiet(scope), Hash) or Hash()
            outcomes = self._ks.get(keys.followup_outcomes(scope), Hash) or Hash()
            count = self._ks.get(keys.followup_count(ref), str) if ref else None
            return ({k: float(v) for k, v in quiet.items()}, keys.outcome_counts(outcomes),
                    int(count or 0))

    def proposed(self, scope: Scope, ref: SessionRef | None, topics: list[str],
                 quiet_until: float, session_ttl_s: int) -> None:
        if not topics:
            return
        with self._ks.lock:
            self._ks.ensure(keys.followup_quiet(scope), Hash).update(
                dict.fromkeys(topics, repr(quiet_until)))
            if ref:
                made = self._ks.get(keys.followup_count(ref), str)
                self._ks.put(keys.followup_count(ref), str(int(made or 0) + len(topics)))
                self._ks.expire(keys.followup_count(ref), session_ttl_s)

    def outcome(self, scope: Scope, topic: str, kind: str, outcome: str,
                quiet_until: float) -> None:
        with self._ks.lock:
            self._ks.ensure(keys.followup_quiet(scope), Hash)[topic] = repr(quiet_until)
            counts = self._ks.ensure(keys.followup_outcomes(scope), Hash)
            field = keys.outcome_field(kind, outcome)
            counts[field] = str(int(counts.get(field, 0)) + 1)

    def delete_user(self, scope: Scope) -> int:
        with self._ks.lock:
            return self._ks.delete(*self._ks.names(keys.user_keys("fu", scope)))


class FakeForgetLog:
    """``ForgetLog`` over one ``forgets:{scope}`` hash of ``ForgetRequest.key`` -> request
    (JSON)."""

    def __init__(self, ks: Keyspace) -> None:
        self._ks = ks

    def add(self, scope: Scope, request: ForgetRequest) -> None:
        with self._ks.lock:
            kept = self._ks.ensure(keys.forgets(scope), Hash)
            kept[request.key] = request.model_dump_json()
            self._ks.expire(keys.forgets(scope), FORGET_LOG_TTL_S)
            for old in self.recent(scope)[:max(0, len(kept) - FORGET_LOG_MAX)]:
                del kept[old.key]

    def recent(self, scope: Scope) -> list[ForgetRequest]:
        with self._ks.lock:
            kept = self._ks.get(keys.forgets(scope), Hash) or Hash()
            return sorted((ForgetRequest.model_validate_json(v) for v in kept.values()),
                          key=lambda r: r.at)

    def remove(self, scope: Scope, requests: Sequence[ForgetRequest]) -> int:
        with self._ks.lock:
            kept = self._ks.get(keys.forgets(scope), Hash) or Hash()
            return len([k for k in {r.key for r in requests} if kept.pop(k, None) is not None])

    def add_deleted_turns(self, scope: Scope, session_id: str, turn_ids: Iterable[str]
                          ) -> None:
        members = {keys.deleted_turn(session_id, t) for t in turn_ids}
        if not members:
            return
        with self._ks.lock:
            self._ks.ensure(keys.deleted_turns(scope), set).update(members)
            self._ks.expire(keys.deleted_turns(scope), FORGET_LOG_TTL_S)

    def deleted_turns(self, scope: Scope) -> set[str]:
        with self._ks.lock:
            return set(self._ks.get(keys.deleted_turns(scope), set) or ())

    def schedule(self, shard: int, scope: Scope, request: ForgetRequest, due: float) -> None:
        with self._ks.lock:
            due_set = self._ks.ensure(keys.forgets_due(shard), ZSet)
            due_set[keys.due_member(scope, request.key)] = due

    def due(self, shard: int, now: float, limit: int = 100) -> list[tuple[Scope, str]]:
        with self._ks.lock:
            zset = self._ks.get(keys.forgets_due(shard), ZSet) or ZSet()
            return [keys.parse_due_member(m) for m in zset.range_by_score(now, limit)]

    def unschedule(self, shard: int, scope: Scope, key: str) -> None:
        with self._ks.lock:
            (self._ks.get(keys.forgets_due(shard), ZSet) or ZSet()).pop(
                keys.due_member(scope, key), None)

    def delete_user(self, scope: Scope) -> int:
        with self._ks.lock:
            return self._ks.delete(keys.forgets(scope), keys.deleted_turns(scope))


class FakeAppendOnlyFile:
    """``AppendOnlyFile`` of a store that writes no file: a rewrite is always ``off``."""

    def rewrite(self) -> str:
        return "off"

    def rewrite_pending(self) -> bool:
        return False
