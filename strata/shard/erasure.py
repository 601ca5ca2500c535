"""Deletes that cross the shard's two halves: a memory with its source turns, a whole user,
and closed sessions past retention. Each holds the sessions' lock, then the long-term
memory's (the order every caller keeps), and leaves a content-free audit entry; the file
purge that follows removes the deleted text from the stores' files."""

from __future__ import annotations

import re
from typing import Any

from strata.extract.terms import word_pattern
from strata.layers.decay import SweepCounts
from strata.models import Scope, utcnow
from strata.shard.longterm import LazyLongTerm, ShardMemories
from strata.shard.sessions import ShardSessions
from strata.stores.keys import QUEUE_HIGH, QUEUE_LOW, SessionRef
from strata.stores.redis_ports import (
    AuditLog,
    FollowUpState,
    ForgetLog,
    RecallLog,
    SessionIndex,
    SessionLog,
    UserRegistry,
    WriteQueues,
)

__all__ = ["ShardErasure"]


class ShardErasure:
    """Deletes through the sessions (``ShardSessions``), the long-term memory
    (``ShardMemories``) and the user's Redis keys."""

    def __init__(self, shard_id: int, sessions: ShardSessions, memories: ShardMemories,
                 longterm: LazyLongTerm, *, log: SessionLog, index: SessionIndex,
                 queues: WriteQueues, followups: FollowUpState, users: UserRegistry,
                 recalls: RecallLog, audit: AuditLog, forgets: ForgetLog) -> None:
        self._shard_id = shard_id
        self._forgets = forgets
        self._log = log
        self._index = index
        self._queues = queues
        self._followups = followups
        self._users = users
        self._recalls = recalls
        self._audit = audit
        self._sessions = sessions
        self._memories = memories
        self._longterm = longterm

    def delete_memory(self, scope: Scope, memory_id: str,
                      viewer: str | None = None) -> dict[str, Any]:
        """Delete a memory, its versions, the memories made from the same words
        (``LongTermMemory.delete``), their source turns and their recall-log entries; the
        turns' ids are kept (``ForgetLog.add_deleted_turns``) so that an extraction job that
        read them before the delete writes nothing of them."""
        with self._sessions.lock, self._memories.lock:
            doomed = self._longterm.get().delete(scope, memory_id, viewer)
            turns: dict[str, set[str]] = {}
            for item in doomed:
                if item.provenance.session_id:
                    turns.setdefault(item.provenance.session_id, set()).update(
                        item.provenance.turn_ids)
            for sid, ids in turns.items():  # an extraction that read them writes none of them
                self._forgets.add_deleted_turns(scope, sid, ids)
            needles = [n for d in doomed for n in (d.value, d.text) if n and len(n) >= 2]
            removed = sum(self._sessions.scrub_turns(scope, sid, ids, needles)
                          for sid, ids in turns.items())
            self._forgets.remove(scope, [r for r in self._forgets.recent(scope)
                                         if any(re.search(word_pattern(n), r.target, re.I)
                                                for n in needles)])
            self._recalls.remove(scope, {d.id for d in doomed})
            self._audit.append(scope, action="delete", memory_id=memory_id,
                               count=len(doomed), at=utcnow().isoformat())
        self._memories.file_purge.request()
        return {"deleted_versions": len(doomed), "deleted_turns": removed,
                "deleted_ids": [d.id for d in doomed]}

    def delete_user(self, scope: Scope) -> dict[str, int]:
        """Forget everything about a user, in every store; only a tombstone remains."""
        with self._sessions.lock, self._memories.lock:
            memories = (self._longterm.get().delete_user(scope)
                        if self._longterm.configured else 0)
            self._sessions.drop([ref for ref in self._sessions.live if ref.of(scope)])
            sessions = (self._log.delete_user(scope) + self._followups.delete_user(scope)
                        + self._forgets.delete_user(scope))
            self._index.unarchive_user(scope)
            queued = sum(self._queues.remove_user(q, scope) for q in (QUEUE_LOW, QUEUE_HIGH))
            self._index.untrack_user(self._shard_id, scope)
            self._users.unregister(scope)
            logged = self._recalls.remove(scope)
            self._audit.append(scope, action="delete_user", count=memories,
                               at=utcnow().isoformat())
        self._memories.file_purge.request()
        return {"memories": memories, "session_keys": sessions, "queued_jobs": queued,
                "recall_log_entries": logged}

    def purge_archived_sessions(self, sessions: list[SessionRef], now: float) -> SweepCounts:
        """Delete closed sessions' archived working memory (past retention: the caller
        picks them from the archive index). A live session that reuses an expired
        session's id is left alone; only its stale index entry goes."""
        counts = SweepCounts()
        with self._sessions.lock:
            for ref in sessions:
                snap = self._log.snapshot(ref)
                if snap is not None and snap[0].get("closed"):
                    self._sessions.drop([ref])
                    self._log.delete(ref)
                    counts.sessions_purged += 1
                else:  # expired by its TTL (or the id now names a new, live session)
                    counts.sessions_expired += 1
                self._index.unarchive(ref)
        return counts
