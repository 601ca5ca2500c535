"""Per-user records in Redis besides sessions and queues: the content-free audit log, the
recall log, the user registry, the follow-up state, the forget log; and the append-only
file's rewrite."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import redis

from strata.models import Scope
from strata.stores import keys
from strata.stores.keys import SessionRef, parse_scope_key
from strata.stores.redis.connection import RedisConnection, decode, redis_errors, stream_id
from strata.stores.redis_ports import (
    FORGET_LOG_MAX,
    FORGET_LOG_TTL_S,
    RECALL_LOG_MAXLEN,
    ForgetRequest,
    check_content_free,
)

__all__ = ["RedisAppendOnlyFile", "RedisAuditLog", "RedisFollowUpState", "RedisForgetLog",
           "RedisRecallLog", "RedisUserRegistry"]


class RedisAuditLog:
    """``AuditLog`` over one ``audit:{scope}`` stream per user; only whitelisted,
    non-text fields are accepted."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn
        self._r = conn.client

    def append(self, scope: Scope, **fields: str | int | float) -> str:
        check_content_free(fields)
        with redis_errors("audit"):
            return stream_id(self._r.xadd(self._conn.key(keys.audit(scope)),
                                          {k: str(v) for k, v in fields.items()}))

    def read(self, scope: Scope) -> list[dict[str, str]]:
        with redis_errors("audit read"):
            rows = self._r.xrange(self._conn.key(keys.audit(scope)))
        return [decode(f) for _, f in rows]


class RedisRecallLog:
    """``RecallLog`` over one capped ``recall-log`` stream of {scope, route, ids}."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn
        self._r = conn.client

    def add(self, scope: Scope, memory_ids: list[str], route: str) -> None:
        with redis_errors("recall log"):
            self._r.xadd(self._conn.key(keys.RECALL_LOG),
                         {"scope": scope.key, "route": route, "ids": ",".join(memory_ids)},
                         maxlen=RECALL_LOG_MAXLEN, approximate=True)

    def remove(self, scope: Scope, memory_ids: set[str] | None = None) -> int:
        stream = self._conn.key(keys.RECALL_LOG)
        with redis_errors("recall log delete"):
            doomed = []
            for rid, raw in self._r.xrange(stream):
                fields = decode(raw)
                if fields.get("scope") != scope.key:
                    continue
                if memory_ids is None or memory_ids & set(fields.get("ids", "").split(",")):
                    doomed.append(rid)
            return int(self._r.xdel(stream, *doomed)) if doomed else 0


class RedisUserRegistry:
    """``UserRegistry`` over the ``users`` set of scope keys."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn
        self._r = conn.client

    def register(self, scope: Scope) -> None:
        with redis_errors("register user"):
            self._r.sadd(self._conn.key(keys.USERS), scope.key)

    def unregister(self, scope: Scope) -> None:
        with redis_errors("unregister user"):
            self._r.srem(self._conn.key(keys.USERS), scope.key)

    def all(self) -> list[Scope]:
        with redis_errors("users"):
            found = sorted(m.decode() for m in self._r.sscan_iter(self._conn.key(keys.USERS),
                                                                  count=1000))
        return [parse_scope_key(k) for k in found]


class RedisFollowUpState:
    """``FollowUpState`` over ``fu:{scope}:quiet`` and ``fu:{scope}:outcomes`` hashes and a
    ``fu:{session}:count`` counter that expires with the session."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn
        self._r = conn.client

    def state(self, scope: Scope, ref: SessionRef | None
              ) -> tuple[dict[str, float], dict[str, tuple[int, int]], int]:
        with redis_errors("follow-up state"):
            pipe = self._r.pipeline()
            pipe.hgetall(self._conn.key(keys.followup_quiet(scope)))
            pipe.hgetall(self._conn.key(keys.followup_outcomes(scope)))
            pipe.get(self._conn.key(keys.followup_count(ref) if ref else "_none"))
            quiet, outcomes, count = pipe.execute()
        return ({k: float(v) for k, v in decode(quiet).items()},
                keys.outcome_counts(decode(outcomes)), int(count or 0))

    def proposed(self, scope: Scope, ref: SessionRef | None, topics: list[str],
                 quiet_until: float, session_ttl_s: int) -> None:
        with redis_errors("follow-up proposed"):
            pipe = self._r.pipeline()
            if topics:
                pipe.hset(self._conn.key(keys.followup_quiet(scope)),
                          mapping=dict.fromkeys(topics, quiet_until))
            if ref and topics:
                pipe.incrby(self._conn.key(keys.followup_count(ref)), len(topics))
                pipe.expire(self._conn.key(keys.followup_count(ref)), session_ttl_s)
            pipe.execute()

    def outcome(self, scope: Scope, topic: str, kind: str, outcome: str,
                quiet_until: float) -> None:
        with redis_errors("follow-up outcome"):
            pipe = self._r.pipeline()
            pipe.hset(self._conn.key(keys.followup_quiet(scope)), topic, quiet_until)
            pipe.hincrby(self._conn.key(keys.followup_outcomes(scope)),
                         keys.outcome_field(kind, outcome), 1)
            pipe.execute()

    def delete_user(self, scope: Scope) -> int:
        found = self._conn.keys(keys.user_keys("fu", scope))
        with redis_errors("delete follow-ups"):
            return int(self._r.delete(*found)) if found else 0


class RedisForgetLog:
    """``ForgetLog`` over one ``forgets:{scope}`` hash of ``ForgetRequest.key`` -> request
    (JSON)."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn
        self._r = conn.client

    def add(self, scope: Scope, request: ForgetRequest) -> None:
        key = self._conn.key(keys.forgets(scope))
        with redis_errors("forget log"):
            pipe = self._r.pipeline()
            pipe.hset(key, request.key, request.model_dump_json())
            pipe.expire(key, FORGET_LOG_TTL_S)
            pipe.hlen(key)
            kept = int(pipe.execute()[-1])
            if kept > FORGET_LOG_MAX:
                oldest = self.recent(scope)[:kept - FORGET_LOG_MAX]
                self._r.hdel(key, *(r.key for r in oldest))

    def recent(self, scope: Scope) -> list[ForgetRequest]:
        with redis_errors("forget log read"):
            raw = self._r.hvals(self._conn.key(keys.forgets(scope)))
        return sorted((ForgetRequest.model_validate_json(v) for v in raw),
                      key=lambda r: r.at)

    def remove(self, scope: Scope, requests: Sequence[ForgetRequest]) -> int:
        if not requests:
            return 0
        with redis_errors("forget log delete"):
            return int(self._r.hdel(self._conn.key(keys.forgets(scope)),
                                    *{r.key for r in requests}))

    def add_deleted_turns(self, scope: Scope, session_id: str, turn_ids: Iterable[str]
                          ) -> None:
        members = [keys.deleted_turn(session_id, t) for t in turn_ids]
        if not members:
            return
        key = self._conn.key(keys.deleted_turns(scope))
        with redis_errors("deleted turns"):
            pipe = self._r.pipeline()
            pipe.sadd(key, *members)
            pipe.expire(key, FORGET_LOG_TTL_S)
            pipe.execute()

    def deleted_turns(self, scope: Scope) -> set[str]:
        with redis_errors("deleted turns read"):
            return {m.decode() if isinstance(m, bytes) else m
                    for m in self._r.smembers(self._conn.key(keys.deleted_turns(scope)))}

    def schedule(self, shard: int, scope: Scope, request: ForgetRequest, due: float) -> None:
        with redis_errors("forget schedule"):
            self._r.zadd(self._conn.key(keys.forgets_due(shard)),
                         {keys.due_member(scope, request.key): due})

    def due(self, shard: int, now: float, limit: int = 100) -> list[tuple[Scope, str]]:
        with redis_errors("forget schedule read"):
            members = self._r.zrangebyscore(self._conn.key(keys.forgets_due(shard)), "-inf",
                                            now, start=0, num=limit)
        return [keys.parse_due_member(m.decode() if isinstance(m, bytes) else m)
                for m in members]

    def unschedule(self, shard: int, scope: Scope, key: str) -> None:
        with redis_errors("forget schedule delete"):
            self._r.zrem(self._conn.key(keys.forgets_due(shard)), keys.due_member(scope, key))

    def delete_user(self, scope: Scope) -> int:
        with redis_errors("delete forget log"):
            return int(self._r.delete(self._conn.key(keys.forgets(scope)),
                                      self._conn.key(keys.deleted_turns(scope))))


class RedisAppendOnlyFile:
    """``AppendOnlyFile``: BGREWRITEAOF from the live dataset, so deleted values leave the
    files (Redis 7 writes a new base and incr file and removes the old ones)."""

    def __init__(self, conn: RedisConnection) -> None:
        self._r = conn.client

    def rewrite(self) -> str:
        with redis_errors("aof rewrite"):
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

    def rewrite_pending(self) -> bool:
        with redis_errors("aof state"):
            info = self._r.info("persistence")
        return bool(info.get("aof_rewrite_in_progress") or info.get("aof_rewrite_scheduled"))
