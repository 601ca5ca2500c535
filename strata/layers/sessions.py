"""Session shards: many sessions' working memory in one process, durable through Redis.

A fixed pool of shards; ``ShardRing`` maps ``(tenant, user)`` to a shard by consistent
hashing, so all sessions of a user live on one shard (its single writer). Each turn is
appended to the session's Redis WAL before it is acknowledged; snapshots are written in
the background every few turns; a restarted shard rebuilds a session from its snapshot plus
the WAL entries after it. The WAL doubles as the session transcript that extraction reads.
Every turn id a session ever had is kept in a Redis set written in the WAL entry's
transaction, so a retried ``turn_id`` is a duplicate for the session's whole life.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from strata.errors import Conflict, Forbidden, InvalidInput, NotFound, QueueStoreError
from strata.extract.pii import redact
from strata.layers.memories import LongTermMemory
from strata.layers.shard_longterm import IntentResult, LongTermShardOps
from strata.layers.summarize import Summarizer
from strata.layers.working import (
    ContextAside,
    SessionState,
    WorkingMemory,
    WorkingMemoryConfig,
    is_pinned,
)
from strata.models import (
    AgentName,
    ContextName,
    Role,
    Scope,
    Turn,
    check_id,
    check_name,
    utcnow,
)
from strata.settings import Settings
from strata.stores.redis import QUEUE_LOW, RedisStore
from strata.tokens import count_tokens

__all__ = ["CloseAck", "SessionShardService", "ShardRing", "SweepReport", "TurnAck", "TurnIn",
           "WorkingMemoryView", "generated_turn_id", "session_key"]

logger = logging.getLogger(__name__)


def session_key(scope: Scope, session_id: str) -> str:
    return f"{scope.key}:{session_id}"


class ShardRing:
    """Consistent hashing of users onto shards (virtual nodes smooth the spread)."""

    def __init__(self, shards: int, vnodes: int = 64) -> None:
        if shards < 1:
            raise InvalidInput("a shard ring needs at least one shard")
        self.shards = shards
        points = sorted((self._hash(f"shard-{s}#{v}"), s) for s in range(shards)
                        for v in range(vnodes))
        self._keys = [p for p, _ in points]
        self._owners = [s for _, s in points]

    @staticmethod
    def _hash(value: str) -> int:
        return int.from_bytes(hashlib.blake2b(value.encode(), digest_size=8).digest(), "big")

    def shard_for(self, scope: Scope) -> int:
        index = bisect.bisect(self._keys, self._hash(scope.key)) % len(self._keys)
        return self._owners[index]


class TurnIn(BaseModel):
    """A turn as a client sends it (the HTTP body of a turn, without the user)."""

    model_config = ConfigDict(extra="forbid")

    role: str
    content: str
    created_at: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    turn_id: str | None = Field(default=None, description="client id; a retry is deduplicated")
    context: ContextName | None = Field(default=None, description=(
        "the project / business line of this turn and the ones after it; a new one sets "
        "the session's working memory aside for that context's"))
    agent: AgentName | None = Field(default=None, description=(
        "the agent of this session (a key bound to an agent sets it)"))


class TurnAck(BaseModel):
    turn_id: str
    session_id: str
    turn_count: int
    pinned: bool
    window_size: int
    duplicate: bool = False
    intents: IntentResult = IntentResult()
    context: str | None = None  # the session's context after this turn


class CloseAck(BaseModel):
    session_id: str
    closed: bool = True
    already_closed: bool = False
    extraction_job: str | None = None


class WorkingMemoryView(BaseModel):
    session_id: str
    user_id: str
    window: list[Turn]
    summary: str
    pinned: list[Turn]
    task_state: dict[str, Any]
    turn_count: int
    tokens: int
    closed: bool
    last_active_at: datetime
    context: str | None = None
    set_aside: list[str] = Field(default_factory=list)  # contexts left ("": none)
    agent: str | None = None


class SweepReport(BaseModel):
    idle_extractions: int = 0
    evicted: int = 0
    in_memory: int = 0


class _Entry:
    """A live session with its snapshot counters."""

    def __init__(self, memory: WorkingMemory) -> None:
        self.memory = memory
        self.turns_since_snapshot = 0
        self.tokens_since_snapshot = 0


class SessionShardService(LongTermShardOps):
    """One shard's sessions (plain class; ``actors.session_shard`` wraps it for Ray)."""

    def __init__(self, shard_id: int, settings: Settings, redis: RedisStore,
                 summarizer: Summarizer, config: WorkingMemoryConfig | None = None,
                 longterm: Callable[[], LongTermMemory] | None = None) -> None:
        self.shard_id = shard_id
        self._settings = settings
        self._redis = redis
        self._summarizer = summarizer
        self._config = config or WorkingMemoryConfig(window_turns=settings.window_turns)
        self._sessions: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.RLock()
        self._memory_lock = threading.RLock()
        self._snapshots = ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot")
        self._longterm_factory = longterm
        self._longterm: LongTermMemory | None = None

    # -- loading -------------------------------------------------------------------------
    def _memory(self, state: SessionState) -> WorkingMemory:
        return WorkingMemory(state, self._config, self._summarizer)

    def _restore(self, scope: Scope, session_id: str) -> WorkingMemory | None:
        """Snapshot + the WAL after it; None if the session never existed (or expired)."""
        key = session_key(scope, session_id)
        snap = self._redis.snapshot_get(key)
        if snap is not None:
            state = SessionState.model_validate(snap[0])
            memory = self._memory(state)
        else:
            memory = None
        for wal_id, record in self._redis.wal_read(key, after_id=snap[1] if snap else "0"):
            if memory is None:
                memory = self._memory(SessionState(tenant=scope.tenant, user_id=scope.user,
                                                   session_id=session_id))
            self._apply(memory, record)
            memory.state.wal_id = wal_id
        if memory is not None and memory.state.turn_count and not self._redis.has_turn_id_set(key):
            # a session written before the turn-id set: fill it once, from the whole WAL
            self._redis.add_turn_ids(key, [*memory.state.recent_turn_ids, *(
                r["turn"]["turn_id"] for _, r in self._redis.wal_read(key)
                if r.get("op") == "turn")])
        return memory

    @staticmethod
    def _apply(memory: WorkingMemory, record: dict[str, Any]) -> None:
        op = record.get("op")
        at = datetime.fromisoformat(record["at"]) if "at" in record else None
        if op == "turn":
            memory.append(Turn.model_validate(record["turn"]), received_at=at)
        elif op == "task":
            memory.state.task_state = record["task_state"]
            memory.state.last_active_at = at or memory.state.last_active_at
        elif op == "close":
            memory.state.closed = True
        elif op == "extracted":
            memory.state.extracted_upto = record["upto"]

    def _get(self, scope: Scope, session_id: str, create: bool) -> _Entry:
        key = session_key(scope, session_id)
        entry = self._sessions.get(key)
        if entry is not None:
            self._sessions.move_to_end(key)
            return entry
        memory = self._restore(scope, session_id)
        if memory is None:
            if not create:
                raise NotFound(f"no session {session_id!r} for user {scope.user!r}")
            memory = self._memory(SessionState(tenant=scope.tenant, user_id=scope.user,
                                               session_id=session_id))
        entry = _Entry(memory)
        self._sessions[key] = entry
        self._evict_over_capacity()
        return entry

    # -- writes --------------------------------------------------------------------------
    def append_turn(self, scope: Scope, session_id: str, role: str, content: str,
                    created_at: datetime | None = None, metadata: dict[str, Any] | None = None,
                    turn_id: str | None = None, context: str | None = None,
                    agent: str | None = None, caller: str | None = None) -> TurnAck:
        """Append a turn: WAL first, then the window; returns once Redis has the turn.
        ``caller``: whose view the call has (``Principal.viewer``; None: the turn's agent) —
        a session of an agent takes turns from that agent only."""
        parsed_role = self._validate_turn(session_id, role, content, turn_id, metadata)
        turn = TurnIn(role=role, content=content, created_at=created_at,
                      metadata=metadata or {}, turn_id=turn_id, context=context, agent=agent)
        return self._append(scope, session_id, [(parsed_role, turn)], caller)[0]

    def append_turns(self, scope: Scope, session_id: str,
                     turns: Sequence[TurnIn | Mapping[str, Any]],
                     caller: str | None = None) -> list[TurnAck]:
        """Append many turns of one session, in order; returns once Redis has all of them.

        Every turn is validated first: one bad turn rejects the batch and nothing is written.
        The new turns reach the WAL in one transaction; a turn whose ``turn_id`` the session
        (or an earlier turn of the batch) already has is acknowledged as a duplicate.
        """
        _validate_session_id(session_id)
        limit = self._settings.max_batch_turns
        if not 0 < len(turns) <= limit:
            raise InvalidInput(f"a batch holds 1 to {limit} turns (STRATA_MAX_BATCH_TURNS); "
                               f"got {len(turns)}")
        return self._append(scope, session_id,
                            [self._parse_batch_turn(session_id, i, t) for i, t in enumerate(turns)],
                            caller)

    def _parse_batch_turn(self, session_id: str, index: int,
                          raw: TurnIn | Mapping[str, Any]) -> tuple[Role, TurnIn]:
        try:
            turn = raw if isinstance(raw, TurnIn) else TurnIn.model_validate(raw)
            return (self._validate_turn(session_id, turn.role, turn.content, turn.turn_id,
                                        turn.metadata), turn)
        except ValidationError as exc:
            problem = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                for e in exc.errors())
            raise InvalidInput(f"turn {index}: {problem}") from None
        except InvalidInput as exc:
            raise InvalidInput(f"turn {index}: {exc.detail}") from None

    def _append(self, scope: Scope, session_id: str, batch: list[tuple[Role, TurnIn]],
                caller: str | None = None) -> list[TurnAck]:
        """Validated turns in order: known ids are duplicates, the new turns go to the WAL in
        one round trip, then to the window, each with its explicit intents."""
        with self._lock:
            entry = self._get(scope, session_id, create=True)
            state = entry.memory.state
            for _, asked in batch:
                _check_agent(state.agent, asked.agent if caller is None else caller, session_id)
            key = session_key(scope, session_id)
            fresh = self._new_turns(scope, key, entry.memory, batch)
            new = [t for t in fresh if t is not None]
            if new and state.closed:
                raise Conflict(f"session {session_id!r} is closed; start a new session")
            now = utcnow()
            try:
                wal_ids = iter(self._redis.wal_append_many(key, [
                    {"op": "turn", "at": now.isoformat(), "turn": t.model_dump(mode="json")}
                    for t in new], [t.turn_id for t in new]) if new else [])
            except QueueStoreError:
                # the write may have landed before the connection broke: rebuild the
                # session from Redis on its next use rather than trust this copy
                self._sessions.pop(key, None)
                raise
            acks = []
            for (_, asked), turn in zip(batch, fresh, strict=True):
                if turn is None:
                    acks.append(self._ack(state, str(asked.turn_id), duplicate=True))
                    continue
                wal_from, wal_id = state.wal_id, next(wal_ids)
                previous = next((t.content for t in reversed(state.window)
                                 if t.role is Role.USER), None)
                entry.memory.append(turn, received_at=now)
                state.wal_id = wal_id
                intents = self._apply_intents(scope, turn, wal_from, wal_id, previous)
                ack = self._ack(state, turn.turn_id)
                ack.intents = intents
                acks.append(ack)
            if new:
                self._after_append(key, entry, new)
            return acks

    def _new_turns(self, scope: Scope, key: str, memory: WorkingMemory,
                   batch: list[tuple[Role, TurnIn]]) -> list[Turn | None]:
        """The batch as turns to write, None where the turn id is already known."""
        known = self._known_turn_ids(key, memory, [t.turn_id for _, t in batch])
        session_id, count = memory.state.session_id, memory.state.turn_count
        context = memory.state.context  # a turn that names none continues the session's
        fresh: list[Turn | None] = []
        for role, asked in batch:
            if asked.turn_id is not None and asked.turn_id in known:
                fresh.append(None)
                continue
            count += 1
            context = asked.context or context
            turn = Turn(turn_id=asked.turn_id or generated_turn_id(session_id, count),
                        session_id=session_id, user_id=scope.user, role=role,
                        content=asked.content, created_at=asked.created_at or utcnow(),
                        metadata=asked.metadata, pinned=is_pinned(role, asked.content),
                        agent=asked.agent or memory.state.agent, context=context)
            known.add(turn.turn_id)
            fresh.append(turn)
        return fresh

    def _known_turn_ids(self, key: str, memory: WorkingMemory,
                        turn_ids: list[str | None]) -> set[str]:
        """Which of these client ids the session already has, at any age: the window's last
        ``RECENT_IDS`` ids answer without a round trip, the session's turn-id set in Redis
        answers for the rest (one SMISMEMBER; never a WAL read)."""
        asked = {t for t in turn_ids if t is not None}
        known = {t for t in asked if memory.has_turn(t)}
        unknown = sorted(asked - known)
        if unknown:
            known |= self._redis.known_turn_ids(key, unknown)
        return known

    def _after_append(self, key: str, entry: _Entry, turns: list[Turn]) -> None:
        """Mark the session active; snapshot every few turns or tokens."""
        self._redis.touch_session(self.shard_id, key, time.time())
        entry.turns_since_snapshot += len(turns)
        entry.tokens_since_snapshot += sum(count_tokens(t.content) for t in turns)
        if (entry.turns_since_snapshot >= self._settings.snapshot_every_turns
                or entry.tokens_since_snapshot >= self._settings.snapshot_every_tokens):
            self._snapshot_async(key, entry)

    def _validate_turn(self, session_id: str, role: str, content: str,
                       turn_id: str | None, metadata: dict[str, Any] | None = None) -> Role:
        _validate_session_id(session_id)
        try:
            parsed = Role(role)
        except ValueError:
            raise InvalidInput(f"role must be one of {[r.value for r in Role]}; "
                               f"got {role!r}") from None
        if not content.strip():
            raise InvalidInput("content is empty")
        size = len(content.encode("utf-8"))
        if metadata:  # kept with the turn, so it counts toward the turn's size
            size += len(json.dumps(metadata, ensure_ascii=False, separators=(",", ":"),
                                   default=str).encode("utf-8"))
        if size > self._settings.max_turn_bytes:
            raise InvalidInput(f"content and metadata are {size} bytes; the limit is "
                               f"{self._settings.max_turn_bytes} (STRATA_MAX_TURN_BYTES)")
        if turn_id is not None:
            _validate_turn_id(session_id, turn_id)
        return parsed

    @staticmethod
    def _ack(state: SessionState, turn_id: str, duplicate: bool = False) -> TurnAck:
        return TurnAck(turn_id=turn_id, session_id=state.session_id,
                       turn_count=state.turn_count, window_size=len(state.window),
                       pinned=any(t.turn_id == turn_id for t in state.pinned),
                       duplicate=duplicate, context=state.context)

    def patch_task_state(self, scope: Scope, session_id: str,
                         patch: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(patch, dict):
            raise InvalidInput("patch must be a JSON object (RFC 7396 merge patch)")
        with self._lock:
            entry = self._get(scope, session_id, create=False)
            state = entry.memory.state
            if state.closed:
                raise Conflict(f"session {session_id!r} is closed")
            before = state.task_state
            now = utcnow()
            merged = entry.memory.patch_task_state(patch, received_at=now)
            key = session_key(scope, session_id)
            try:
                state.wal_id = self._redis.wal_append(
                    key, {"op": "task", "at": now.isoformat(), "task_state": merged})
            except Exception:
                state.task_state = before  # not durable, so not applied
                raise
            self._snapshot_async(key, entry)
            return merged

    def close(self, scope: Scope, session_id: str) -> CloseAck:
        """Close: hand the session to extraction, archive it, free the memory.

        The archived working memory (window, pinned turns, summary, task state) is redacted
        with the write filter's ``redact``; the WAL keeps the turns as said, since it is the
        transcript the extraction job reads (and the write filter drops what is sensitive).
        """
        _validate_session_id(session_id)
        with self._lock:
            entry = self._get(scope, session_id, create=False)
            state = entry.memory.state
            key = session_key(scope, session_id)
            if state.closed:
                return CloseAck(session_id=session_id, already_closed=True)
            state.wal_id = self._redis.wal_append(key, {"op": "close"})
            state.closed = True
            job = self._enqueue_extraction(scope, state, "close")
            self.flush_snapshots()  # an older, unredacted snapshot must not land after this one
            self._redis.snapshot_put(key, _redacted(state).model_dump(mode="json"),
                                     state.wal_id)
            self._redis.archive_session(key, self._settings.archive_retention_days * 86400)
            self._redis.untrack_session(self.shard_id, key)
            self._sessions.pop(key, None)
            return CloseAck(session_id=session_id, extraction_job=job)

    def _enqueue_extraction(self, scope: Scope, state: SessionState, reason: str) -> str | None:
        """Queue the WAL range not yet extracted; the payload names turns, it holds no text."""
        if state.extracted_upto == state.wal_id:
            return None
        job = self._redis.enqueue(QUEUE_LOW, {
            "type": "extract_session", "reason": reason, "tenant": scope.tenant,
            "user_id": scope.user, "session_id": state.session_id,
            "wal_from": state.extracted_upto, "wal_to": state.wal_id})
        state.extracted_upto = state.wal_id
        return job

    # -- reads ---------------------------------------------------------------------------
    def view(self, scope: Scope, session_id: str,
             viewer: str | None = None) -> WorkingMemoryView:
        """The session's working memory, for its own agent (``viewer``; None: any caller)."""
        _validate_session_id(session_id)
        with self._lock:
            memory = self._get(scope, session_id, create=False).memory
            state = memory.state
            if viewer is not None:
                _check_agent(state.agent, viewer, session_id)
            return WorkingMemoryView(
                context=state.context, set_aside=list(state.set_aside), agent=state.agent,
                session_id=session_id, user_id=scope.user, window=list(state.window),
                summary=state.summary, pinned=list(state.pinned),
                task_state=dict(state.task_state), turn_count=state.turn_count,
                tokens=memory.tokens(), closed=state.closed,
                last_active_at=state.last_active_at)

    # -- background ----------------------------------------------------------------------
    def _snapshot_async(self, key: str, entry: _Entry) -> None:
        state = entry.memory.state
        data, wal_id = state.model_dump(mode="json"), state.wal_id
        entry.turns_since_snapshot = entry.tokens_since_snapshot = 0
        self._snapshots.submit(self._write_snapshot, key, data, wal_id)

    def _write_snapshot(self, key: str, data: dict[str, Any], wal_id: str) -> None:
        try:
            self._redis.snapshot_put(key, data, wal_id)
        except Exception:  # the WAL still holds every turn; the next snapshot catches up
            logger.exception("snapshot of %s failed", key)

    def flush_snapshots(self) -> None:
        """Wait for queued snapshots (tests, shutdown)."""
        self._snapshots.submit(lambda: None).result()

    def _evict(self, key: str) -> None:
        entry = self._sessions.pop(key)
        state = entry.memory.state
        self._redis.snapshot_put(key, state.model_dump(mode="json"), state.wal_id)

    def _evict_over_capacity(self) -> None:
        while len(self._sessions) > self._settings.max_sessions_per_shard:
            self._evict(next(iter(self._sessions)))

    def sweep(self, now: float | None = None) -> SweepReport:
        """Idle sessions: intermediate extraction past the idle limit; evict past the TTL."""
        now = time.time() if now is None else now
        report = SweepReport()
        with self._lock:
            for key in self._redis.idle_sessions(
                    self.shard_id, now - self._settings.session_idle_extract_s):
                tenant, user, session_id = key.split(":", 2)
                scope = Scope(tenant=tenant, user=user)
                memory = (self._sessions[key].memory if key in self._sessions
                          else self._restore(scope, session_id))
                if memory is None or memory.state.closed:
                    self._redis.untrack_session(self.shard_id, key)
                    continue
                if self._enqueue_extraction(scope, memory.state, "idle"):
                    memory.state.wal_id = self._redis.wal_append(
                        key, {"op": "extracted", "upto": memory.state.extracted_upto})
                    report.idle_extractions += 1
                self._redis.untrack_session(self.shard_id, key)
            for key in [k for k, e in self._sessions.items()
                        if now - e.memory.state.last_active_at.timestamp()
                        > self._settings.session_ttl_s]:
                self._evict(key)
                report.evicted += 1
            report.in_memory = len(self._sessions)
        return report

    def stats(self) -> dict[str, int]:
        return {"shard": self.shard_id, "sessions_in_memory": len(self._sessions)}

    def shutdown(self) -> None:
        with self._lock:
            for key in list(self._sessions):
                self._evict(key)
        self._snapshots.shutdown(wait=True)


def _redacted(state: SessionState) -> SessionState:
    """The session's working memory with sensitive spans replaced (``[REDACTED:<kind>]``)."""
    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return redact(value)
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        return value

    def turn(t: Turn) -> Turn:
        return t.model_copy(update={"content": redact(t.content), "metadata": clean(t.metadata)})

    def aside(a: ContextAside) -> ContextAside:
        return a.model_copy(update={
            "window": [turn(t) for t in a.window], "pinned": [turn(t) for t in a.pinned],
            "summary": redact(a.summary), "task_state": clean(a.task_state)})

    return state.model_copy(update={
        "window": [turn(t) for t in state.window], "pinned": [turn(t) for t in state.pinned],
        "summary": redact(state.summary), "task_state": clean(state.task_state),
        "set_aside": {k: aside(a) for k, a in state.set_aside.items()}})


def _check_agent(owner: str | None, caller: str | None, session_id: str) -> None:
    """A session of an agent is that agent's: another agent gets 403 (a caller that names
    no agent, "", too; None is an admin or an unbound key acting for the tenant)."""
    if owner is not None and caller is not None and caller != owner:
        raise Forbidden(f"session {session_id!r} belongs to another agent")


def generated_turn_id(session_id: str, number: int) -> str:
    """The id of a session's ``number``-th turn when the client sent none. Client ids may not
    start with ``<session_id>:``, so the two kinds of id never collide."""
    return f"{session_id}:{number}"


def _validate_turn_id(session_id: str, turn_id: str) -> None:
    try:
        check_name("turn_id", turn_id)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    if turn_id.startswith(f"{session_id}:"):
        raise InvalidInput(f"turn_id may not start with {session_id + ':'!r}: ids of that form "
                           "are the ones Strata gives turns sent without a turn_id")


def _validate_session_id(session_id: str) -> None:
    try:
        check_id("session_id", session_id)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


