"""A refreshed in-memory copy of each tenant's knowledge base, for recall.

The knowledge base is shared by a tenant's users and written only by imports (the HTTP
import and the batch jobs), so recall can read a copy: ``KnowledgeSnapshot`` is a
``VectorStore`` whose knowledge searches run on a ``HotTable`` of the tenant's chunks,
loaded on first use and reloaded in the background once older than ``refresh_s`` (the copy
in use stays served meanwhile). An import through this process calls ``invalidate`` and the
next search reloads first; an import by a job elsewhere is seen within ``refresh_s``.
A tenant whose knowledge base has more than ``max_rows`` chunks is searched in the store
itself. Every other call passes through.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from strata.models import Collection, Scope, StoredRecord
from strata.stores.hot_table import HotTable
from strata.stores.ports import VectorStore
from strata.stores.served import TableServed

__all__ = ["KnowledgeSnapshot"]

logger = logging.getLogger(__name__)


@dataclass
class _Copy:
    table: HotTable | None  # None: too large to copy
    loaded_at: float
    refreshing: bool = False


class KnowledgeSnapshot(TableServed):
    """See the module docstring."""

    def __init__(self, inner: VectorStore, dim: int, refresh_s: float = 5.0,
                 max_rows: int = 50_000, clock: Callable[[], float] = time.monotonic) -> None:
        self.inner = inner
        self._dim = dim
        self._refresh_s = refresh_s
        self._max_rows = max_rows
        self._clock = clock
        self._copies: dict[str, _Copy] = {}
        self._lock = threading.Lock()

    def invalidate(self, scope: Scope) -> None:
        """The scope's knowledge changed here: the next search reloads it first."""
        with self._lock:
            self._copies.pop(scope.key, None)

    def _load(self, scope: Scope) -> _Copy:
        rows = self.inner.scan_scope(Collection.KNOWLEDGE, scope, self._max_rows + 1)
        if len(rows) > self._max_rows:
            return _Copy(None, self._clock())
        table = HotTable(self._dim)
        for record in rows:
            table.put(record, record.vector or [0.0] * self._dim, None)
        return _Copy(table, self._clock())

    def _refresh(self, scope: Scope) -> None:
        try:
            fresh = self._load(scope)
        except Exception:  # the stale copy stays in use; the next search retries
            logger.exception("knowledge snapshot of %s: reload failed", scope.key)
            with self._lock:
                copy = self._copies.get(scope.key)
                if copy is not None:
                    copy.refreshing = False
            return
        with self._lock:
            self._copies[scope.key] = fresh

    def _served(self, collection: Collection, scope: Scope) -> HotTable | None:
        if collection is not Collection.KNOWLEDGE:
            return None
        with self._lock:
            copy = self._copies.get(scope.key)
            stale = copy is not None and self._clock() - copy.loaded_at > self._refresh_s
            if stale and copy is not None and not copy.refreshing:
                copy.refreshing = True
                threading.Thread(target=self._refresh, args=(scope,), daemon=True).start()
        if copy is None:
            copy = self._load(scope)
            with self._lock:
                self._copies[scope.key] = copy
        return copy.table

    # -- everything else: the store ------------------------------------------------------
    def ensure_collections(self, dim: int) -> None:
        self.inner.ensure_collections(dim)

    def insert(self, collection: Collection, scope: Scope,
               records: Sequence[StoredRecord]) -> None:
        self.inner.insert(collection, scope, records)
        self.invalidate(scope)

    def upsert(self, collection: Collection, scope: Scope,
               records: Sequence[StoredRecord]) -> None:
        self.inner.upsert(collection, scope, records)
        self.invalidate(scope)

    def delete(self, collection: Collection, scope: Scope, ids: Sequence[str]) -> int:
        removed = self.inner.delete(collection, scope, ids)
        self.invalidate(scope)
        return removed

    def delete_scope(self, collection: Collection, scope: Scope) -> int:
        removed = self.inner.delete_scope(collection, scope)
        self.invalidate(scope)
        return removed

    def get(self, collection: Collection, scope: Scope, ids: Sequence[str]) -> list[StoredRecord]:
        return self.inner.get(collection, scope, ids)

    def scan_scope(self, collection: Collection, scope: Scope,
                   limit: int = 16_384) -> list[StoredRecord]:
        return self.inner.scan_scope(collection, scope, limit)

    def set_payloads(self, collection: Collection,
                     changes: Sequence[tuple[str, str, dict[str, Any]]]) -> int:
        return self.inner.set_payloads(collection, changes)

    def flush(self, collection: Collection | None = None) -> None:
        self.inner.flush(collection)

    def ping(self) -> None:
        self.inner.ping()

    def close(self) -> None:
        self.inner.close()
