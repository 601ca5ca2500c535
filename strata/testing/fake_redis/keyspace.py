"""The keyspace under ``FakeRedis`` (``strata.testing.fake_redis``): Redis's data types
as Python values under the same key names (``strata.stores.keys``), with what the ports rely
on from Redis itself — expiry times, stream ids that only grow, consumer groups with their
pending entries, and keys that vanish when they empty (streams excepted).

Every operation runs under ``lock``; ``changed`` wakes a consumer blocked on a stream.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, TypeVar

from strata.errors import QueueStoreError

__all__ = ["Group", "Hash", "Keyspace", "Pending", "Stream", "ZSet", "dumps", "parse_id"]

T = TypeVar("T")
StreamId = tuple[int, int]


def dumps(value: Any) -> str:
    # as the Redis adapters store JSON: text stays text, so a forgetting scan sees it
    return json.dumps(value, ensure_ascii=False)


def parse_id(text: str) -> StreamId:
    """``<ms>-<seq>`` (or ``<ms>``) as a comparable pair."""
    ms, _, seq = text.partition("-")
    try:
        return int(ms), int(seq or 0)
    except ValueError as exc:
        raise QueueStoreError(f"redis: invalid stream id {text!r}") from exc


class Hash(dict[str, str]):
    """A Redis hash."""


class ZSet(dict[str, float]):
    """A Redis sorted set: member -> score."""

    def range_by_score(self, high: float, limit: int) -> list[str]:
        """Members scored at most ``high``, lowest score first (ties by member)."""
        rows = sorted((score, member) for member, score in self.items() if score <= high)
        return [member for _, member in rows[:limit]]


@dataclass
class Pending:
    """An entry delivered to a consumer and not yet acknowledged."""

    consumer: str
    delivered_at: float
    deliveries: int = 1


@dataclass
class Group:
    """A consumer group: the last id it delivered and its pending entries."""

    last_delivered: StreamId = (0, 0)
    pending: dict[str, Pending] = field(default_factory=dict)


@dataclass
class Stream:
    """A Redis stream: entries in id order, the last id it generated (kept when entries
    are deleted) and its consumer groups."""

    entries: dict[str, dict[str, str]] = field(default_factory=dict)
    last_id: StreamId = (0, 0)
    groups: dict[str, Group] = field(default_factory=dict)

    def after(self, start: StreamId) -> list[tuple[str, dict[str, str]]]:
        """Entries with ids strictly after ``start``, oldest first."""
        return [(rid, f) for rid, f in self.entries.items() if parse_id(rid) > start]

    def group(self, name: str, action: str) -> Group:
        found = self.groups.get(name)
        if found is None:
            raise QueueStoreError(f"redis {action} failed: NOGROUP no consumer group {name!r}")
        return found


class Keyspace:
    """Named values with optional expiry. ``clock``: epoch seconds (``time.time``, or a
    test's fake clock: expiry and idle times follow it)."""

    def __init__(self, clock: Callable[[], float], prefix: str = "strata:") -> None:
        self.clock = clock
        self.prefix = prefix
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self._values: dict[str, object] = {}
        self._expires: dict[str, float] = {}

    def _alive(self, name: str) -> object | None:
        value = self._values.get(name)
        expired = name in self._expires and self._expires[name] <= self.clock()
        if value is None or expired or (not isinstance(value, Stream | str) and not value):
            self._values.pop(name, None)
            self._expires.pop(name, None)
            return None
        return value

    def get(self, name: str, kind: type[T]) -> T | None:
        """The value of ``name`` if it exists (a ``WRONGTYPE`` error if of another type)."""
        value = self._alive(name)
        if value is not None and not isinstance(value, kind):
            raise QueueStoreError(f"redis: WRONGTYPE {name!r} holds {type(value).__name__}")
        return value

    def ensure(self, name: str, kind: type[T]) -> T:
        """The value of ``name``, created empty if missing."""
        value = self.get(name, kind)
        if value is None:
            value = kind()
            self._values[name] = value
        return value

    def put(self, name: str, value: str) -> None:
        """Set a string value, keeping its expiry (as ``INCRBY`` does)."""
        self.get(name, str)
        self._values[name] = value

    def expire(self, name: str, seconds: float) -> None:
        if self._alive(name) is not None:
            self._expires[name] = self.clock() + seconds

    def delete(self, *names: str) -> int:
        """Remove the keys; how many existed."""
        gone = [n for n in names if self._alive(n) is not None]
        for name in gone:
            self._values.pop(name, None)
            self._expires.pop(name, None)
        return len(gone)

    def names(self, pattern: str) -> list[str]:
        """Existing key names matching the glob ``pattern``."""
        return [n for n in list(self._values)
                if fnmatchcase(n, pattern) and self._alive(n) is not None]

    def xadd(self, name: str, fields: Mapping[str, str]) -> str:
        """Append to a stream under a new id above every id it ever had; that id."""
        stream = self.ensure(name, Stream)
        ms = int(self.clock() * 1000)
        last_ms, last_seq = stream.last_id
        stream.last_id = (ms, 0) if ms > last_ms else (last_ms, last_seq + 1)
        rid = f"{stream.last_id[0]}-{stream.last_id[1]}"
        stream.entries[rid] = dict(fields)
        self.changed.notify_all()
        return rid

    def dump(self) -> Iterator[tuple[str, bytes]]:
        """Every key (with the prefix) and its raw contents, as ``RedisStore.dump_values``
        yields them: strings, hashes and stream entries."""
        for name in self.names("*"):
            value = self._values[name]
            if isinstance(value, str):
                yield self.prefix + name, value.encode()
            elif isinstance(value, Hash):
                yield self.prefix + name, dumps(dict(value)).encode()
            elif isinstance(value, Stream):
                for entry in value.entries.values():
                    yield self.prefix + name, dumps(entry).encode()
