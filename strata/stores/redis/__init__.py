"""The Redis adapters of Strata's Redis ports (``strata.stores.redis_ports``), over one
connection, bundled as ``RedisStore``. Key names: ``strata.stores.keys``.

``RedisStore(url, prefix)`` exposes one adapter per concern::

    .sessions   SessionLog      a session's WAL, turn-id set and snapshot
    .index      SessionIndex    sessions active per shard; closed sessions archived
    .queues     WriteQueues     long-term write queues and their consumer groups
    .audit      AuditLog        content-free audit events per user
    .recalls    RecallLog       recalled memory ids per user
    .users      UserRegistry    users with long-term memory
    .followups  FollowUpState   proactive follow-ups' quiet times and outcomes
    .forgets    ForgetLog       the user's recent forget requests and deleted turns
    .aof        AppendOnlyFile  the AOF rewrite that purges deleted values from disk
"""

from __future__ import annotations

from collections.abc import Iterator

from strata.stores.keys import QUEUE_HIGH, QUEUE_LOW
from strata.stores.redis.connection import RedisConnection
from strata.stores.redis.queues import RedisWriteQueues
from strata.stores.redis.records import (
    RedisAppendOnlyFile,
    RedisAuditLog,
    RedisFollowUpState,
    RedisForgetLog,
    RedisRecallLog,
    RedisUserRegistry,
)
from strata.stores.redis.sessions import RedisSessionIndex, RedisSessionLog
from strata.stores.redis_ports import (
    AppendOnlyFile,
    AuditLog,
    FollowUpState,
    ForgetLog,
    QueueDepth,
    QueueMessage,
    RecallLog,
    SessionIndex,
    SessionLog,
    UserRegistry,
    WriteQueues,
)

__all__ = ["QUEUE_HIGH", "QUEUE_LOW", "QueueDepth", "QueueMessage", "RedisConnection",
           "RedisStore"]


class RedisStore:
    """Strata's Redis ports over one connection (``url``, every key under ``prefix``);
    ``wait_replicas``, ``wait_timeout_ms``: WAIT after each WAL append (``RedisSessionLog``)."""

    def __init__(self, url: str, prefix: str = "strata:", wait_replicas: int = 0,
                 wait_timeout_ms: int = 1000) -> None:
        self.connection = RedisConnection(url, prefix)
        self.sessions: SessionLog = RedisSessionLog(self.connection, wait_replicas,
                                                    wait_timeout_ms)
        self.index: SessionIndex = RedisSessionIndex(self.connection)
        self.queues: WriteQueues = RedisWriteQueues(self.connection)
        self.audit: AuditLog = RedisAuditLog(self.connection)
        self.recalls: RecallLog = RedisRecallLog(self.connection)
        self.users: UserRegistry = RedisUserRegistry(self.connection)
        self.followups: FollowUpState = RedisFollowUpState(self.connection)
        self.forgets: ForgetLog = RedisForgetLog(self.connection)
        self.aof: AppendOnlyFile = RedisAppendOnlyFile(self.connection)

    def ping(self) -> None:
        self.connection.ping()

    def close(self) -> None:
        self.connection.close()

    def keys(self, pattern: str) -> list[str]:
        """Stored key names matching ``pattern`` (under the prefix), with the prefix."""
        return self.connection.keys(pattern)

    def dump_values(self) -> Iterator[tuple[str, bytes]]:
        """Every key under the prefix with its raw contents (a forgetting audit scans this)."""
        return self.connection.dump_values()
