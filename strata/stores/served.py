"""Searches answered from in-memory ``HotTable``s, with the durable store behind them.

``TableServed`` is the read half both in-memory layers share: the shard's hot index
(``strata.stores.hot``) and the ingress's knowledge snapshot (``strata.stores.snapshot``).
A subclass says which table serves a (collection, scope) — or None: the store answers —
and which lock guards the tables while a search reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext

from strata.models import (
    Collection,
    MemoryStatus,
    RecordFilter,
    Scope,
    SearchHit,
    StoredRecord,
    is_visible,
)
from strata.stores.hot_table import HotTable
from strata.stores.ports import VectorStore, score_ids

__all__ = ["TableServed"]


class TableServed:
    """The searches, ``query`` and ``count`` of the ``VectorStore`` port, from tables."""

    inner: VectorStore

    def _served(self, collection: Collection, scope: Scope) -> HotTable | None:
        raise NotImplementedError

    def _guard(self) -> AbstractContextManager[object]:
        return nullcontext()

    def query(self, collection: Collection, scope: Scope, flt: RecordFilter | None = None,
              limit: int = 100) -> list[StoredRecord]:
        table = self._served(collection, scope)
        if table is None:
            return self.inner.query(collection, scope, flt, limit)
        with self._guard():
            return table.filtered(flt, limit)

    def count(self, collection: Collection, scope: Scope) -> int:
        table = self._served(collection, scope)
        if table is None:
            return self.inner.count(collection, scope)
        return len(table)

    def search_dense(self, collection: Collection, scope: Scope, vector: Sequence[float],
                     k: int, flt: RecordFilter | None = None) -> list[SearchHit]:
        table = self._served(collection, scope)
        if table is None:
            return self.inner.search_dense(collection, scope, vector, k, flt)
        with self._guard():
            return table.search_dense(vector, k, flt)

    def search_lexical(self, collection: Collection, scope: Scope, text: str, k: int,
                       flt: RecordFilter | None = None) -> list[SearchHit]:
        table = self._served(collection, scope)
        if table is None:
            return self.inner.search_lexical(collection, scope, text, k, flt)
        with self._guard():
            return table.search_lexical(text, k, flt)

    def search_hybrid(self, collection: Collection, scope: Scope, vector: Sequence[float],
                      text: str, k: int, flt: RecordFilter | None = None) -> list[SearchHit]:
        table = self._served(collection, scope)
        if table is None:
            return self.inner.search_hybrid(collection, scope, vector, text, k, flt)
        with self._guard():
            return table.search_hybrid(vector, text, k, flt)

    def score_ids(self, collection: Collection, scope: Scope, vector: Sequence[float],
                  text: str, ids: Sequence[str], statuses: Sequence[MemoryStatus] | None,
                  visible_to: str | None) -> list[SearchHit]:
        """``ports.score_ids`` from the user's table (``IdScorer``), else from the store
        behind it."""
        table = self._served(collection, scope)
        if table is None:
            return score_ids(self.inner, collection, scope, vector, text, ids, statuses,
                             visible_to)
        with self._guard():
            scored = table.scored(ids, vector, text)
        return [SearchHit(record=r, score=0.0, parts={"dense": dense, "lexical": lexical})
                for r, dense, lexical in scored
                if (statuses is None or r.status in statuses)
                and (visible_to is None or is_visible(r.payload, visible_to))]
