"""Session shards: many sessions' working memory in one process, durable through Redis.

A fixed pool of shards; ``ShardRing`` maps ``(tenant, user)`` to a shard by consistent
hashing, so all sessions of a user live on one shard (its single writer). Each turn is
appended to the session's Redis WAL before it is acknowledged; snapshots are written in
the background every few turns; a restarted shard rebuilds a session from its snapshot plus
the WAL entries after it (``strata.shard.durability``). The WAL doubles as the session
transcript that extraction reads. Every turn id a session ever had is kept in a Redis set
written in the WAL entry's transaction, so a retried ``turn_id`` is a duplicate for the
session's whole life.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from strata.errors import Conflict, InvalidInput, NotFound, QueueStoreError
from strata.extract.pii import redact, redact_value
from strata.layers.summarize import Summarizer
from strata.layers.working import (
    ContextAside,
    SessionState,
    WorkingMemory,
    WorkingMemoryConfig,
    is_pinned,
)
from strata.models import Role, Scope, Turn, utcnow
from strata.settings import Settings
from strata.shard.durability import (
    SnapshotWriter,
    known_turn_ids,
    redacted,
    restore_session,
)
from strata.shard.models import (
    CloseAck,
    SweepReport,
    TurnAck,
    TurnIn,
    WorkingMemoryView,
)
from strata.shard.readings import IntentHandler, said_in
from strata.shard.turns import (
    check_agent,
    generated_turn_id,
    parse_batch_turn,
    validate_session_id,
    validate_turn,
)
from strata.stores.keys import QUEUE_LOW, SessionRef
from strata.stores.redis_ports import SessionIndex, SessionLog, WriteQueues
from strata.tokens import count_tokens

__all__ = ["LiveSession", "ShardSessions"]


class LiveSession:
    """A session in the shard's memory, with its snapshot counters."""

    def __init__(self, memory: WorkingMemory) -> None:
        self.memory = memory
        self.turns_since_snapshot = 0
        self.tokens_since_snapshot = 0


class ShardSessions:
    """One shard's live sessions: turns, task state, close, the working memory's view, and
    the sweep of idle sessions. ``lock`` guards them; whoever also needs the long-term
    memory's lock takes this one first."""

    def __init__(self, shard_id: int, settings: Settings, summarizer: Summarizer,
                 intents: IntentHandler, *, log: SessionLog, index: SessionIndex,
                 queues: WriteQueues, config: WorkingMemoryConfig | None = None) -> None:
        self.shard_id = shard_id
        self.lock = threading.RLock()
        self._settings = settings
        self._log = log
        self._index = index
        self._queues = queues
        self._summarizer = summarizer
        self._intents = intents
        self._config = config or WorkingMemoryConfig(window_turns=settings.window_turns)
        self._live: OrderedDict[SessionRef, LiveSession] = OrderedDict()
        self._snapshots = SnapshotWriter(log)

    @property
    def live(self) -> Mapping[SessionRef, LiveSession]:
        """The sessions in memory, least recently used first."""
        return self._live

    # -- loading -------------------------------------------------------------------------
    def _memory(self, state: SessionState) -> WorkingMemory:
        return WorkingMemory(state, self._config, self._summarizer)

    def _restore(self, ref: SessionRef) -> WorkingMemory | None:
        return restore_session(self._log, ref, self._memory)

    def _get(self, scope: Scope, session_id: str, create: bool) -> LiveSession:
        key = SessionRef(scope, session_id)
        entry = self._live.get(key)
        if entry is not None:
            self._live.move_to_end(key)
            return entry
        memory = self._restore(key)
        if memory is None:
            if not create:
                raise NotFound(f"no session {session_id!r} for user {scope.user!r}")
            memory = self._memory(SessionState(tenant=scope.tenant, user_id=scope.user,
                                               session_id=session_id))
        entry = LiveSession(memory)
        self._live[key] = entry
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
        parsed_role = validate_turn(session_id, role, content, turn_id, metadata,
                                    self._settings.max_turn_bytes)
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
        validate_session_id(session_id)
        limit = self._settings.max_batch_turns
        if not 0 < len(turns) <= limit:
            raise InvalidInput(f"a batch holds 1 to {limit} turns (STRATA_MAX_BATCH_TURNS); "
                               f"got {len(turns)}")
        max_bytes = self._settings.max_turn_bytes
        return self._append(scope, session_id,
                            [parse_batch_turn(session_id, i, t, max_bytes)
                             for i, t in enumerate(turns)], caller)

    def _append(self, scope: Scope, session_id: str, batch: list[tuple[Role, TurnIn]],
                caller: str | None = None) -> list[TurnAck]:
        """Validated turns in order: known ids are duplicates, the new turns go to the WAL in
        one round trip, then to the window, each with its explicit intents."""
        with self.lock:
            entry = self._get(scope, session_id, create=True)
            state = entry.memory.state
            for _, asked in batch:
                check_agent(state.agent, asked.agent if caller is None else caller, session_id)
            key = SessionRef(scope, session_id)
            fresh = self._new_turns(scope, key, entry.memory, batch)
            new = [t for t in fresh if t is not None]
            if new and state.closed:
                raise Conflict(f"session {session_id!r} is closed; start a new session")
            now = utcnow()
            try:
                wal_ids = iter(self._log.append_turns(key, [
                    {"op": "turn", "at": now.isoformat(), "turn": t.model_dump(mode="json")}
                    for t in new], [t.turn_id for t in new]) if new else [])
            except QueueStoreError:
                # the write may have landed before the connection broke: rebuild the
                # session from Redis on its next use rather than trust this copy
                self._live.pop(key, None)
                raise
            if len(new) > 1:
                self._intents.read_ahead(said_in(state.window, new))
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
                intents = self._intents.apply_intents(scope, turn, wal_from, wal_id, previous)
                ack = self._ack(state, turn.turn_id)
                ack.intents = intents
                acks.append(ack)
            if new:
                self._after_append(key, entry, new)
            return acks

    def _new_turns(self, scope: Scope, key: SessionRef, memory: WorkingMemory,
                   batch: list[tuple[Role, TurnIn]]) -> list[Turn | None]:
        """The batch as turns to write, None where the turn id is already known."""
        known = known_turn_ids(self._log, key, memory, [t.turn_id for _, t in batch])
        session_id, count = memory.state.session_id, memory.state.turn_count
        context = memory.state.context  # a turn that names none continues the session's
        fresh: list[Turn | None] = []
        for role, asked in batch:
            if asked.turn_id is not None and asked.turn_id in known:
                fresh.append(None)
                continue
            count += 1
            context = asked.context or context
            content = redact(asked.content)  # acknowledged = stored redacted (WAL, AOF)
            turn = Turn(turn_id=asked.turn_id or generated_turn_id(session_id, count),
                        session_id=session_id, user_id=scope.user, role=role,
                        content=content, created_at=asked.created_at or utcnow(),
                        metadata=redact_value(asked.metadata), pinned=is_pinned(role, content),
                        agent=asked.agent or memory.state.agent, context=context)
            known.add(turn.turn_id)
            fresh.append(turn)
        return fresh

    def _after_append(self, key: SessionRef, entry: LiveSession, turns: list[Turn]) -> None:
        """Mark the session active; snapshot every few turns or tokens."""
        self._index.touch(self.shard_id, key, time.time())
        entry.turns_since_snapshot += len(turns)
        entry.tokens_since_snapshot += sum(count_tokens(t.content) for t in turns)
        if (entry.turns_since_snapshot >= self._settings.snapshot_every_turns
                or entry.tokens_since_snapshot >= self._settings.snapshot_every_tokens):
            self._snapshot_async(key, entry)

    @staticmethod
    def _ack(state: SessionState, turn_id: str, duplicate: bool = False) -> TurnAck:
        return TurnAck(turn_id=turn_id, session_id=state.session_id,
                       turn_count=state.turn_count, window_size=len(state.window),
                       pinned=any(t.turn_id == turn_id for t in state.pinned),
                       duplicate=duplicate, context=state.context)

    def patch_task_state(self, scope: Scope, session_id: str, patch: dict[str, Any],
                         viewer: str | None = None) -> dict[str, Any]:
        """Merge ``patch`` into the task state (its agent's or an admin's, ``viewer`` None)."""
        if not isinstance(patch, dict):
            raise InvalidInput("patch must be a JSON object (RFC 7396 merge patch)")
        with self.lock:
            entry = self._get(scope, session_id, create=False)
            state = entry.memory.state
            check_agent(state.agent, viewer, session_id)
            if state.closed:
                raise Conflict(f"session {session_id!r} is closed")
            before = state.task_state
            now = utcnow()
            merged = entry.memory.patch_task_state(redact_value(patch), received_at=now)
            key = SessionRef(scope, session_id)
            try:
                state.wal_id = self._log.append(
                    key, {"op": "task", "at": now.isoformat(), "task_state": merged})
            except Exception:
                state.task_state = before  # not durable, so not applied
                raise
            self._snapshot_async(key, entry)
            return merged

    def close(self, scope: Scope, session_id: str, viewer: str | None = None) -> CloseAck:
        """Close (its agent or an admin, ``viewer`` None): to extraction, archived, freed.

        The archive (window, pinned turns, summary, task state) is redacted again; the WAL
        (the transcript extraction reads) holds the turns redacted since their append.
        """
        validate_session_id(session_id)
        with self.lock:
            entry = self._get(scope, session_id, create=False)
            state = entry.memory.state
            check_agent(state.agent, viewer, session_id)
            key = SessionRef(scope, session_id)
            if state.closed:
                return CloseAck(session_id=session_id, already_closed=True)
            state.wal_id = self._log.append(key, {"op": "close"})
            state.closed = True
            job = self._enqueue_extraction(scope, state, "close")
            self.flush_snapshots()  # an older, unredacted snapshot must not land after this one
            self._log.put_snapshot(key, redacted(state).model_dump(mode="json"),
                                   state.wal_id)
            self._index.archive(key, self._settings.archive_retention_days * 86400)
            self._index.untrack(self.shard_id, key)
            self._live.pop(key, None)
            return CloseAck(session_id=session_id, extraction_job=job)

    def _enqueue_extraction(self, scope: Scope, state: SessionState, reason: str) -> str | None:
        """Queue the WAL range not yet extracted; the payload names turns, it holds no text."""
        if state.extracted_upto == state.wal_id:
            return None
        job = self._queues.enqueue(QUEUE_LOW, {
            "type": "extract_session", "reason": reason, "tenant": scope.tenant,
            "user_id": scope.user, "session_id": state.session_id,
            "wal_from": state.extracted_upto, "wal_to": state.wal_id})
        state.extracted_upto = state.wal_id
        return job

    # -- reads ---------------------------------------------------------------------------
    def view(self, scope: Scope, session_id: str, viewer: str | None = None) -> WorkingMemoryView:
        """The session's working memory, for its own agent (``viewer``; None: an admin)."""
        validate_session_id(session_id)
        with self.lock:
            memory = self._get(scope, session_id, create=False).memory
            check_agent(memory.state.agent, viewer, session_id)
            state = redacted(memory.state)  # stored redacted; a session from before may not be
            return WorkingMemoryView(
                context=state.context, set_aside=list(state.set_aside), agent=state.agent,
                session_id=session_id, user_id=scope.user, window=list(state.window),
                summary=state.summary, pinned=list(state.pinned),
                task_state=dict(state.task_state), turn_count=state.turn_count,
                tokens=memory.tokens(), closed=state.closed,
                last_active_at=state.last_active_at)

    # -- deletes (``strata.shard.erasure`` calls these under ``lock``) -------------------
    def scrub_turns(self, scope: Scope, session_id: str, turn_ids: set[str],
                    needles: list[str]) -> int:
        """Remove the source turns from the WAL, the live window and the snapshot, and the
        summary lines that mention a ``needle``; returns how many WAL entries went."""
        key = SessionRef(scope, session_id)
        with self.lock:
            removed = self._log.remove_turns(key, turn_ids)
            entry = self._live.get(key)
            if entry is None:
                snap = self._log.snapshot(key)
                if snap is None:
                    return removed
                state = SessionState.model_validate(snap[0])
            else:
                state = entry.memory.state
            parts: list[SessionState | ContextAside] = [state, *state.set_aside.values()]
            for part in parts:  # the contexts set aside too
                part.window = [t for t in part.window if t.turn_id not in turn_ids]
                part.pinned = [t for t in part.pinned if t.turn_id not in turn_ids]
                part.summary = "\n".join(line for line in part.summary.split("\n")
                                         if not any(n.lower() in line.lower() for n in needles))
            self._log.put_snapshot(key, state.model_dump(mode="json"),
                                   state.wal_id)
            return removed

    def drop(self, refs: list[SessionRef]) -> None:
        """Forget these sessions in memory, unsaved (their Redis keys are the caller's)."""
        with self.lock:
            for ref in refs:
                self._live.pop(ref, None)

    # -- background ----------------------------------------------------------------------
    def _snapshot_async(self, key: SessionRef, entry: LiveSession) -> None:
        state = entry.memory.state
        data, wal_id = state.model_dump(mode="json"), state.wal_id
        entry.turns_since_snapshot = entry.tokens_since_snapshot = 0
        self._snapshots.submit(key, data, wal_id)

    def flush_snapshots(self) -> None:
        """Wait for queued snapshots (tests, shutdown)."""
        self._snapshots.flush()

    def _evict(self, key: SessionRef) -> None:
        entry = self._live.pop(key)
        state = entry.memory.state
        self._log.put_snapshot(key, state.model_dump(mode="json"), state.wal_id)

    def _evict_over_capacity(self) -> None:
        while len(self._live) > self._settings.max_sessions_per_shard:
            self._evict(next(iter(self._live)))

    def sweep(self, now: float | None = None) -> SweepReport:
        """Idle sessions: intermediate extraction past the idle limit; evict past the TTL."""
        now = time.time() if now is None else now
        report = SweepReport()
        with self.lock:
            for key in self._index.idle(
                    self.shard_id, now - self._settings.session_idle_extract_s):
                memory = (self._live[key].memory if key in self._live
                          else self._restore(key))
                if memory is None or memory.state.closed:
                    self._index.untrack(self.shard_id, key)
                    continue
                if self._enqueue_extraction(key.scope, memory.state, "idle"):
                    memory.state.wal_id = self._log.append(
                        key, {"op": "extracted", "upto": memory.state.extracted_upto})
                    report.idle_extractions += 1
                self._index.untrack(self.shard_id, key)
            for key in [k for k, e in self._live.items()
                        if now - e.memory.state.last_active_at.timestamp()
                        > self._settings.session_ttl_s]:
                self._evict(key)
                report.evicted += 1
            report.in_memory = len(self._live)
        return report

    def shutdown(self) -> None:
        """Snapshot every live session, then stop the snapshot writer."""
        with self.lock:
            for key in list(self._live):
                self._evict(key)
        self._snapshots.shutdown()

