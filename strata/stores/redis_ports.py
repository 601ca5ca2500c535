"""Ports of what Strata keeps in Redis, one per concern, typed by ``Scope`` and ``SessionRef``.

``strata.stores.redis`` implements each over one connection and bundles them as
``RedisStore`` (``.sessions``, ``.index``, ``.queues``, ``.audit``, ``.recalls``, ``.users``,
``.followups``, ``.forgets``, ``.aof``). ``strata.testing.fake_redis.FakeRedis`` is the
in-memory double of the same ports (the contract tests run against both). A retried turn is made
idempotent by the session log's turn-id set, written in the transaction of the turn's WAL
entry.

Why this module is long: it is the one contract of everything Strata keeps in Redis — nine
small protocols and the data types they exchange — and both adapters and the contract tests
are written against it; split up, a reader would lose the one place to see the whole.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, Protocol

from pydantic import BaseModel, Field

from strata.errors import InvalidInput
from strata.models import Scope, UtcDatetime
from strata.stores.keys import SessionRef

__all__ = [
    "AUDIT_FIELDS",
    "FORGET_LOG_MAX",
    "FORGET_LOG_TTL_S",
    "JOB_TTL_S",
    "RECALL_LOG_MAXLEN",
    "AppendOnlyFile",
    "AuditLog",
    "FollowUpState",
    "ForgetLog",
    "ForgetRequest",
    "JobRecord",
    "JobStatus",
    "QueueDepth",
    "QueueMessage",
    "RecallLog",
    "RedisPorts",
    "SessionIndex",
    "SessionLog",
    "UserRegistry",
    "WalEntry",
    "WriteQueues",
    "check_content_free",
]

WalEntry = tuple[str, dict[str, Any]]
"""A WAL record with its stream id."""

AUDIT_FIELDS = frozenset({"action", "memory_id", "session_id", "kind", "count", "actor", "at",
                          "reason"})
"""The only fields an audit event may carry: ids, counts and actions, never text."""
RECALL_LOG_MAXLEN = 100_000
"""The recall log keeps about this many entries (the oldest go first)."""
FORGET_LOG_MAX = 200
"""A user's forget log keeps this many requests (the oldest go first)."""
FORGET_LOG_TTL_S = 7 * 86_400
"""A user's forget log goes this long after the user's last request: far past any
extraction's delay, and never longer than the shortest archive retention (the requests hold
the user's words)."""

JOB_TTL_S = 7 * 86_400
"""A job's status record goes this long after its last change."""


def check_content_free(fields: Mapping[str, object]) -> None:
    """``InvalidInput`` unless every field of an audit event is in ``AUDIT_FIELDS``."""
    unknown = set(fields) - AUDIT_FIELDS
    if unknown:
        raise InvalidInput(f"audit fields must be content-free; unknown {sorted(unknown)}")


class QueueMessage(BaseModel):
    """One entry read from a queue: its stream id, how often delivered, and its payload."""

    id: str
    payload: dict[str, Any]
    deliveries: int = 1


class JobStatus(StrEnum):
    """Where a queued job is: waiting, being processed, finished, or given up on."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class JobRecord(BaseModel):
    """A queued job's status, kept beside its queue entry (which ack deletes): ids, counts
    and an error's type, never text. ``written`` counts the job's writes by kind and action
    (``facts.insert``, ``episodes.merge``, ``dropped``, ``forgotten``, ...)."""

    id: str
    status: JobStatus
    kind: str
    reason: str = ""
    tenant: str
    user_id: str
    session_id: str | None = None
    queue: str
    created_at: float
    updated_at: float
    attempts: int = 0
    written: dict[str, int] = Field(default_factory=dict)
    error: str | None = None

    @property
    def finished(self) -> bool:
        return self.status in (JobStatus.DONE, JobStatus.FAILED)

    @classmethod
    def queued(cls, job_id: str, queue: str, payload: Mapping[str, Any], now: float
               ) -> JobRecord:
        """The record of a job just queued with ``payload`` (its ids, never its text)."""
        return cls(id=job_id, status=JobStatus.QUEUED, kind=str(payload.get("type", "")),
                   reason=str(payload.get("reason", "")),
                   tenant=str(payload.get("tenant", "")),
                   user_id=str(payload.get("user_id", "")),
                   session_id=payload.get("session_id"),
                   queue=queue, created_at=now, updated_at=now)

    def progressed(self, status: JobStatus, now: float, attempts: int | None,
                   written: Mapping[str, int] | None, error: str | None) -> JobRecord:
        """This record after an ``update_job``."""
        changes: dict[str, Any] = {"status": status, "updated_at": now}
        if attempts is not None:
            changes["attempts"] = attempts
        if written is not None:
            changes["written"] = dict(written)
        if error is not None or status is JobStatus.DONE:
            changes["error"] = error
        return self.model_copy(update=changes)


class QueueDepth(BaseModel):
    """How far behind a queue's consumer group is."""

    length: int
    pending: int
    lag: int

    @property
    def backlog(self) -> int:
        """Entries not yet acknowledged: never delivered plus delivered-but-unacked."""
        return self.lag + self.pending


class SessionLog(Protocol):
    """A session's write-ahead log, its turn-id set and its working-memory snapshot."""

    def append(self, ref: SessionRef, record: Mapping[str, Any]) -> str:
        """Append one record; its stream id once Redis has it."""
        ...

    def append_turns(self, ref: SessionRef, records: Sequence[Mapping[str, Any]],
                     turn_ids: Sequence[str] = ()) -> list[str]:
        """Append records in order, all or none, with ``turn_ids`` joining the turn-id set
        in the same transaction; their stream ids."""
        ...

    def read(self, ref: SessionRef, after_id: str = "0") -> list[WalEntry]:
        """Records strictly after ``after_id``, in order."""
        ...

    def remove_turns(self, ref: SessionRef, turn_ids: set[str]) -> int:
        """Delete the entries of these turns; how many went."""
        ...

    def known_turn_ids(self, ref: SessionRef, turn_ids: Sequence[str]) -> set[str]:
        """Which of ``turn_ids`` the session ever had."""
        ...

    def has_turn_id_set(self, ref: SessionRef) -> bool:
        """Whether the session has a turn-id set (sessions older than it have none)."""
        ...

    def add_turn_ids(self, ref: SessionRef, turn_ids: Sequence[str]) -> None:
        """Fill the turn-id set (from the WAL, for a session written before it)."""
        ...

    def put_snapshot(self, ref: SessionRef, data: Mapping[str, Any], wal_id: str) -> None:
        """Store the working memory as of WAL entry ``wal_id``."""
        ...

    def snapshot(self, ref: SessionRef) -> tuple[dict[str, Any], str] | None:
        """The stored working memory and its WAL id; None if there is none."""
        ...

    def delete(self, ref: SessionRef) -> None:
        """Remove the session's WAL, snapshot and turn-id set."""
        ...

    def delete_user(self, scope: Scope) -> int:
        """Remove the WAL, snapshot and turn-id set of every session of the user; how many
        keys went."""
        ...


class SessionIndex(Protocol):
    """Which sessions are active on a shard, and which closed sessions are archived."""

    def touch(self, shard: int, ref: SessionRef, at: float) -> None:
        """Record the session's last activity (epoch seconds) in its shard's index."""
        ...

    def idle(self, shard: int, before: float, limit: int = 1000) -> list[SessionRef]:
        """The shard's sessions last active before ``before``."""
        ...

    def untrack(self, shard: int, ref: SessionRef) -> None: ...

    def untrack_user(self, shard: int, scope: Scope) -> None:
        """Drop every session of the user from the shard's index."""
        ...

    def archive(self, ref: SessionRef, retention_s: int, at: float | None = None) -> None:
        """Keep a closed session's log for ``retention_s`` (then Redis drops it) and index it
        as archived at ``at`` (now by default)."""
        ...

    def archived_before(self, before: float, limit: int = 10_000) -> list[SessionRef]:
        """Sessions archived before ``before``, oldest first."""
        ...

    def archived_of(self, scope: Scope) -> list[tuple[SessionRef, float]]:
        """The user's archived sessions with the time each was archived."""
        ...

    def unarchive(self, ref: SessionRef) -> None: ...

    def unarchive_user(self, scope: Scope) -> None:
        """Drop every session of the user from the archive index."""
        ...


class WriteQueues(Protocol):
    """The long-term write queues (``QUEUE_HIGH``, ``QUEUE_LOW``), read by consumer groups."""

    def ensure_group(self, queue: str, group: str) -> None:
        """Create the consumer group (and the queue) unless it exists."""
        ...

    def enqueue(self, queue: str, payload: Mapping[str, Any]) -> str: ...

    def consume(self, queue: str, group: str, consumer: str, count: int = 10,
                block_ms: int | None = None) -> list[QueueMessage]:
        """New entries for this consumer (each is pending until ``ack``)."""
        ...

    def ack(self, queue: str, group: str, ids: list[str]) -> int:
        """Acknowledge and delete the entries; how many were pending."""
        ...

    def claim_stale(self, queue: str, group: str, consumer: str, min_idle_ms: int,
                    count: int = 10) -> list[QueueMessage]:
        """Take over entries another consumer read but did not ack within ``min_idle_ms``."""
        ...

    def depth(self, queue: str, group: str) -> QueueDepth: ...

    def oldest_ids(self, queue: str, count: int) -> list[str]:
        """The ids of the oldest ``count`` entries still queued."""
        ...

    def entries(self, queue: str) -> list[tuple[str, dict[str, Any]]]:
        """Every entry still queued, oldest first."""
        ...

    def remove_user(self, queue: str, scope: Scope) -> int:
        """Delete the user's entries; how many went."""
        ...

    def job(self, job_id: str) -> JobRecord | None:
        """The status of a job ``enqueue`` returned (``queued`` from the moment it is
        queued), or None once it has expired or for an id never queued."""
        ...

    def update_job(self, job_id: str, status: JobStatus, *, attempts: int | None = None,
                   written: Mapping[str, int] | None = None, error: str | None = None
                   ) -> None:
        """Record a job's progress (nothing for an id with no record)."""
        ...


class AuditLog(Protocol):
    """Content-free audit events per user: ids, counts and actions, never text."""

    def append(self, scope: Scope, **fields: str | int | float) -> str:
        """Append an event (``InvalidInput`` for a field outside the content-free set)."""
        ...

    def read(self, scope: Scope) -> list[dict[str, str]]: ...


class RecallLog(Protocol):
    """Which memory ids a recall returned, per user (ids and route only)."""

    def add(self, scope: Scope, memory_ids: list[str], route: str) -> None: ...

    def remove(self, scope: Scope, memory_ids: set[str] | None = None) -> int:
        """Drop the user's entries (all, or those naming ``memory_ids``); how many went."""
        ...


class UserRegistry(Protocol):
    """The users with long-term memory (for sweeps across all users)."""

    def register(self, scope: Scope) -> None: ...

    def unregister(self, scope: Scope) -> None: ...

    def all(self) -> list[Scope]:
        """Every registered user, sorted by scope key."""
        ...


class FollowUpState(Protocol):
    """Proactive follow-ups: topics' quiet-until times, outcomes per kind, and proposals
    per session."""

    def state(self, scope: Scope, ref: SessionRef | None
              ) -> tuple[dict[str, float], dict[str, tuple[int, int]], int]:
        """Quiet-until per topic, (used, dismissed) per kind, proposals in ``ref`` so far."""
        ...

    def proposed(self, scope: Scope, ref: SessionRef | None, topics: list[str],
                 quiet_until: float, session_ttl_s: int) -> None: ...

    def outcome(self, scope: Scope, topic: str, kind: str, outcome: str,
                quiet_until: float) -> None: ...

    def delete_user(self, scope: Scope) -> int:
        """Remove the user's follow-up state; how many keys went."""
        ...


class ForgetRequest(BaseModel):
    """A user's "forget …" (``Intent.FORGET``): the turn that said it, when, what it names,
    the agent it was said to (``viewer``) and who said it (``speaker``)."""

    turn_id: str
    at: UtcDatetime
    target: str
    viewer: str = ""
    speaker: str | None = None
    # what it hid from storage, each memory's weight before (what an undo puts back); emptied
    # when the grace period ends and they are deleted (``purged_at``)
    forgotten: dict[str, float] = Field(default_factory=dict)
    undo_until: UtcDatetime | None = None
    purged_at: UtcDatetime | None = None

    @property
    def key(self) -> str:
        """What identifies it in the log: its turn and what it names (a turn may name two)."""
        return f"{self.turn_id}:{hashlib.sha256(self.target.encode()).hexdigest()[:16]}"

    @property
    def forget_id(self) -> str:
        """Its id in the API (``/v1/users/{user_id}/forgets/{forget_id}``): URL-safe."""
        return hashlib.sha256(self.key.encode()).hexdigest()[:20]


class ForgetLog(Protocol):
    """What a late write must not bring back: the user's recent forget requests (a memory
    said before one of them and written after it — a late session-end extraction, a retried
    job — is forgotten as well) and the turns whose memories the user deleted (an extraction
    that read them before the delete writes nothing of them). Both expire
    ``FORGET_LOG_TTL_S`` after the user's last add."""

    def add(self, scope: Scope, request: ForgetRequest) -> None:
        """Keep ``request`` (again: the one with the same ``key`` is replaced); the oldest go
        past ``FORGET_LOG_MAX``, and the log expires ``FORGET_LOG_TTL_S`` after the last add."""
        ...

    def recent(self, scope: Scope) -> list[ForgetRequest]:
        """The user's kept requests, oldest first."""
        ...

    def remove(self, scope: Scope, requests: Sequence[ForgetRequest]) -> int:
        """Drop these requests; how many went."""
        ...

    def add_deleted_turns(self, scope: Scope, session_id: str, turn_ids: Iterable[str]
                          ) -> None:
        """Keep that these turns of the session were deleted (ids only, no words)."""
        ...

    def deleted_turns(self, scope: Scope) -> set[str]:
        """The user's deleted turns, each as ``keys.deleted_turn(session_id, turn_id)``."""
        ...

    def schedule(self, shard: int, scope: Scope, request: ForgetRequest, due: float) -> None:
        """Keep that ``request``'s hidden memories are deleted at ``due`` (epoch seconds) by
        ``shard`` (again: the new time stands)."""
        ...

    def due(self, shard: int, now: float, limit: int = 100) -> list[tuple[Scope, str]]:
        """Up to ``limit`` of ``shard``'s scheduled requests due by ``now``, as (scope,
        ``ForgetRequest.key``), earliest first; they stay scheduled until ``unschedule``."""
        ...

    def unschedule(self, shard: int, scope: Scope, key: str) -> None:
        ...

    def delete_user(self, scope: Scope) -> int:
        """Drop the user's log and deleted turns; how many keys went (what is scheduled for
        the user goes when it is due and finds no request)."""
        ...


class AppendOnlyFile(Protocol):
    """Redis's append-only file, rewritten so that deleted values leave the disk."""

    def rewrite(self) -> str:
        """Ask for a rewrite: ``started``, ``scheduled`` (after the running child),
        ``in_progress`` (one that forked earlier runs: ask again once it ends) or ``off``."""
        ...

    def rewrite_pending(self) -> bool:
        """True while a rewrite runs or is scheduled."""
        ...


class RedisPorts(Protocol):
    """Every Redis port of Strata, one attribute each: ``RedisStore`` over a Redis server,
    ``FakeRedis`` in the process. Parts of a shard take the ports they use off it."""

    sessions: SessionLog
    index: SessionIndex
    queues: WriteQueues
    audit: AuditLog
    recalls: RecallLog
    users: UserRegistry
    followups: FollowUpState
    forgets: ForgetLog
    aof: AppendOnlyFile
