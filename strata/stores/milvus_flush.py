"""When the Milvus adapter flushes: a policy (rows or age) and a gate that keeps reads and a
flush apart (milvus-lite's unflushed rows move outside its own lock)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from strata.models import Collection

__all__ = ["FlushGate", "FlushPolicy"]


class FlushGate:
    """Reads share it; a flush holds it alone. milvus-lite swaps its unflushed table outside
    its own lock, so a read that straddles a flush can miss the rows being flushed (a delete
    by filter then leaves them, a ``get`` says they do not exist)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._flushing = False

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._flushing)
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextmanager
    def flushing(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._flushing and self._readers == 0)
            self._flushing = True
        try:
            yield
        finally:
            with self._cond:
                self._flushing = False
                self._cond.notify_all()


class FlushPolicy:
    """Flush when unflushed rows pass a threshold, or when they are older than an interval.

    Searching growing segments is slow on milvus-lite (docs/benchmarks.md), so rows
    should not stay unflushed for long; but each flush costs time, so writes batch up.
    """

    def __init__(self, max_unflushed_rows: int = 500, max_age_s: float = 2.0) -> None:
        self.max_unflushed_rows = max_unflushed_rows
        self.max_age_s = max_age_s
        self._unflushed: dict[Collection, int] = {}
        self._since: dict[Collection, float] = {}

    def record_write(self, collection: Collection, rows: int, now: float) -> None:
        if rows <= 0:
            return
        self._unflushed[collection] = self._unflushed.get(collection, 0) + rows
        self._since.setdefault(collection, now)

    def due(self, now: float) -> list[Collection]:
        """Collections whose unflushed rows should be flushed now."""
        return [
            c
            for c, n in self._unflushed.items()
            if n >= self.max_unflushed_rows or now - self._since[c] >= self.max_age_s
        ]

    def flushed(self, collection: Collection) -> None:
        self._unflushed.pop(collection, None)
        self._since.pop(collection, None)

    def unflushed(self, collection: Collection) -> int:
        return self._unflushed.get(collection, 0)
