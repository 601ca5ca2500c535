"""How a session survives its shard: rebuilt from its snapshot plus the WAL after it,
snapshots written in the background, the redacted copy a closed session is archived as, and
the turn-id set that makes a retried ``turn_id`` a duplicate for the session's whole life."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from strata.extract.pii import redact, redact_value
from strata.layers.working import ContextAside, SessionState, WorkingMemory
from strata.models import Turn
from strata.stores.keys import SessionRef
from strata.stores.redis_ports import SessionLog

__all__ = ["SnapshotWriter", "apply_record", "known_turn_ids", "redacted", "restore_session"]

logger = logging.getLogger(__name__)


def restore_session(log: SessionLog, ref: SessionRef,
                    memory_of: Callable[[SessionState], WorkingMemory]) -> WorkingMemory | None:
    """Snapshot + the WAL after it; None if the session never existed (or expired)."""
    snap = log.snapshot(ref)
    if snap is not None:
        state = SessionState.model_validate(snap[0])
        memory = memory_of(state)
    else:
        memory = None
    for wal_id, record in log.read(ref, after_id=snap[1] if snap else "0"):
        if memory is None:
            memory = memory_of(SessionState(tenant=ref.scope.tenant, user_id=ref.scope.user,
                                            session_id=ref.session_id))
        apply_record(memory, record)
        memory.state.wal_id = wal_id
    if memory is not None and memory.state.turn_count and not log.has_turn_id_set(ref):
        # a session written before the turn-id set: fill it once, from the whole WAL
        log.add_turn_ids(ref, [*memory.state.recent_turn_ids, *(
            r["turn"]["turn_id"] for _, r in log.read(ref) if r.get("op") == "turn")])
    return memory


def known_turn_ids(log: SessionLog, ref: SessionRef, memory: WorkingMemory,
                   turn_ids: list[str | None]) -> set[str]:
    """Which of these client ids the session already has, at any age: the window's last
    ``RECENT_IDS`` ids answer without a round trip, the session's turn-id set in Redis
    answers for the rest (one SMISMEMBER; never a WAL read)."""
    asked = {t for t in turn_ids if t is not None}
    known = {t for t in asked if memory.has_turn(t)}
    unknown = sorted(asked - known)
    if unknown:
        known |= log.known_turn_ids(ref, unknown)
    return known


def apply_record(memory: WorkingMemory, record: dict[str, Any]) -> None:
    """Replay one WAL entry onto the working memory."""
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


class SnapshotWriter:
    """Snapshots written one at a time off the turn's path (a failed one is only logged:
    the WAL still holds every turn, and the next snapshot catches up)."""

    def __init__(self, log: SessionLog) -> None:
        self._log = log
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot")

    def submit(self, ref: SessionRef, data: dict[str, Any], wal_id: str) -> None:
        self._pool.submit(self._write, ref, data, wal_id)

    def _write(self, ref: SessionRef, data: dict[str, Any], wal_id: str) -> None:
        try:
            self._log.put_snapshot(ref, data, wal_id)
        except Exception:  # the WAL still holds every turn; the next snapshot catches up
            logger.exception("snapshot of %s failed", ref.key)

    def flush(self) -> None:
        """Wait for the queued snapshots."""
        self._pool.submit(lambda: None).result()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)


def redacted(state: SessionState) -> SessionState:
    """The session's working memory with sensitive spans replaced (``[REDACTED:<kind>]``)."""
    clean = redact_value

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
