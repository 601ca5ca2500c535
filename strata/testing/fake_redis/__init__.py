"""``FakeRedis``: the in-process double of Strata's Redis ports
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
from strata.testing.fake_redis.keyspace import Keyspace
from strata.testing.fake_redis.queues import FakeWriteQueues
from strata.testing.fake_redis.records import (
    FakeAppendOnlyFile,
    FakeAuditLog,
    FakeFollowUpState,
    FakeForgetLog,
    FakeRecallLog,
    FakeUserRegistry,
)
from strata.testing.fake_redis.sessions import FakeSessionIndex, FakeSessionLog

__all__ = ["FakeRedis"]


class FakeRedis:
    """Strata's Redis ports in this process, attribute for attribute as ``RedisStore``.
    ``clock``: epoch seconds, for expiry, idle claims and stream ids (a test may pass a
    fake one to expire archived sessions without waiting)."""

    def __init__(self, prefix: str = "strata:",
                 clock: Callable[[], float] = time.time) -> None:
        self._keyspace = Keyspace(clock, prefix)
        self.sessions: ports.SessionLog = FakeSessionLog(self._keyspace)
        self.index: ports.SessionIndex = FakeSessionIndex(self._keyspace)
        self.queues: ports.WriteQueues = FakeWriteQueues(self._keyspace)
        self.audit: ports.AuditLog = FakeAuditLog(self._keyspace)
        self.recalls: ports.RecallLog = FakeRecallLog(self._keyspace)
        self.users: ports.UserRegistry = FakeUserRegistry(self._keyspace)
        self.followups: ports.FollowUpState = FakeFollowUpState(self._keyspace)
        self.forgets: ports.ForgetLog = FakeForgetLog(self._keyspace)
        self.aof: ports.AppendOnlyFile = FakeAppendOnlyFile()

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
