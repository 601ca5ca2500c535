"""``InMemoryRedis``: the in-process double of Strata's Redis ports
(``strata.stores.redis_ports``), for fast unit tests. Same ports, same attributes as
``RedisStore``, same key names (``strata.stores.keys``); the contract tests in
``tests/unit/test_redis_ports.py`` hold both to the same assertions — consumer groups with
pending entries, idle claims and acks included. Values live in one ``Keyspace``
(``keyspace.py``) with Redis's expiry and stream-id rules; nothing reaches disk, so the AOF
rewrite is ``off``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from strata.stores import redis_ports as ports
from strata.stores.redis_memory.keyspace import Keyspace
from strata.stores.redis_memory.queues import MemoryWriteQueues
from strata.stores.redis_memory.records import (
    MemoryAppendOnlyFile,
    MemoryAuditLog,
    MemoryFollowUpState,
    MemoryForgetLog,
    MemoryRecallLog,
    MemoryUserRegistry,
)
from strata.stores.redis_memory.sessions import MemorySessionIndex, MemorySessionLog

__all__ = ["InMemoryRedis"]


class InMemoryRedis:
    """Strata's Redis ports in this process, attribute for attribute as ``RedisStore``.
    ``clock``: epoch seconds, for expiry, idle claims and stream ids (a test may pass a
    fake one to expire archived sessions without waiting)."""

    def __init__(self, prefix: str = "strata:",
                 clock: Callable[[], float] = time.time) -> None:
        self._keyspace = Keyspace(clock, prefix)
        self.sessions: ports.SessionLog = MemorySessionLog(self._keyspace)
        self.index: ports.SessionIndex = MemorySessionIndex(self._keyspace)
        self.queues: ports.WriteQueues = MemoryWriteQueues(self._keyspace)
        self.audit: ports.AuditLog = MemoryAuditLog(self._keyspace)
        self.recalls: ports.RecallLog = MemoryRecallLog(self._keyspace)
        self.users: ports.UserRegistry = MemoryUserRegistry(self._keyspace)
        self.followups: ports.FollowUpState = MemoryFollowUpState(self._keyspace)
        self.forgets: ports.ForgetLog = MemoryForgetLog(self._keyspace)
        self.aof: ports.AppendOnlyFile = MemoryAppendOnlyFile()

    def ping(self) -> None:
        """Always up."""

    def close(self) -> None:
        """Nothing to close."""

    def keys(self, pattern: str) -> list[str]:
        """Key names matching ``pattern`` (under the prefix), with the prefix."""
        with self._keyspace.lock:
            return [self._keyspace.prefix + n for n in self._keyspace.names(pattern)]

    def dump_values(self) -> Iterator[tuple[str, bytes]]:
        """Every key with its raw contents, as ``RedisStore.dump_values`` gives them."""
        with self._keyspace.lock:
            return iter(list(self._keyspace.dump()))
