"""``FakeVectorStore``: the vector store's test double, dicts in this process behind the same
``VectorStore`` port as the Milvus adapter (real code; the contract tests run the same
assertions against both). Never used by the product."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from strata.errors import Conflict, InvalidInput
from strata.models import (
    Collection,
    MemoryStatus,
    RecordFilter,
    Scope,
    SearchHit,
    StoredRecord,
)
from strata.stores.lexical import bm25_scores
from strata.stores.ports import DecayFields, complete_parts, fuse_rrf
from strata.stores.row_filter import matches

__all__ = ["FakeVectorStore"]


class FakeVectorStore:
    """Dict-backed store: {collection: {scope key: {id: record}}}."""

    def __init__(self) -> None:
        self._data: dict[Collection, dict[str, dict[str, StoredRecord]]] = {
            c: {} for c in Collection
        }
        self._dim: int | None = None
        self._lock = threading.Lock()

    def ensure_collections(self, dim: int) -> None:
        self._dim = dim

    def _rows(self, collection: Collection, scope: Scope) -> dict[str, StoredRecord]:
        return self._data[collection].setdefault(scope.key, {})

    def _check(self, records: Sequence[StoredRecord]) -> None:
        for record in records:
            if record.vector is None:
                raise InvalidInput(f"record {record.id!r} has no vector")
            if self._dim is not None and len(record.vector) != self._dim:
                raise InvalidInput(
                    f"record {record.id!r} has a {len(record.vector)}-d vector; "
                    f"the store holds {self._dim}-d vectors"
                )

    def insert(self, collection: Collection, scope: Scope, records: Sequence[StoredRecord]) -> None:
        self._check(records)
        with self._lock:
            rows = self._rows(collection, scope)
            clash = [r.id for r in records if r.id in rows]
            if clash:
                raise Conflict(f"ids already exist in {collection.value}: {clash[:5]}")
            for record in records:
                rows[record.id] = record.model_copy(deep=True)

    def upsert(self, collection: Collection, scope: Scope, records: Sequence[StoredRecord]) -> None:
        self._check(records)
        with self._lock:
            rows = self._rows(collection, scope)
            for record in records:
                rows[record.id] = record.model_copy(deep=True)

    def delete(self, collection: Collection, scope: Scope, ids: Sequence[str]) -> int:
        with self._lock:
            rows = self._rows(collection, scope)
            return sum(1 for i in ids if rows.pop(i, None) is not None)

    def delete_scope(self, collection: Collection, scope: Scope) -> int:
        with self._lock:
            return len(self._data[collection].pop(scope.key, {}))

    def get(self, collection: Collection, scope: Scope, ids: Sequence[str]) -> list[StoredRecord]:
        rows = self._rows(collection, scope)
        return [rows[i].model_copy(deep=True) for i in ids if i in rows]

    def scan_scope(self, collection: Collection, scope: Scope,
                   limit: int = 16_384) -> list[StoredRecord]:
        return [r.model_copy(deep=True) for r in list(self._rows(collection, scope).values())
                [:limit]]

    def set_payloads(self, collection: Collection,
                     changes: Sequence[tuple[str, str, dict[str, Any]]]) -> int:
        written = 0
        with self._lock:
            data = self._data[collection]
            for key, i, payload in changes:
                if i in data.get(key, {}):
                    data[key][i].payload = dict(payload)
                    written += 1
        return written

    def query(
        self,
        collection: Collection,
        scope: Scope,
        flt: RecordFilter | None = None,
        limit: int = 100,
    ) -> list[StoredRecord]:
        rows = [r for r in self._rows(collection, scope).values() if matches(r, flt)]
        return [r.model_copy(deep=True) for r in rows[:limit]]

    def count(self, collection: Collection, scope: Scope) -> int:
        return len(self._rows(collection, scope))

    def search_dense(
        self,
        collection: Collection,
        scope: Scope,
        vector: Sequence[float],
        k: int,
        flt: RecordFilter | None = None,
    ) -> list[SearchHit]:
        rows = [r for r in self._rows(collection, scope).values() if matches(r, flt)]
        if not rows:
            return []
        query = np.asarray(vector, dtype=np.float32)
        matrix = np.asarray([r.vector for r in rows], dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(query) or 1.0)
        sims = matrix @ query / np.where(norms == 0, 1.0, norms)
        order = np.argsort(-sims)[:k]
        return [
            SearchHit(record=rows[i].model_copy(deep=True), score=float(sims[i])) for i in order
        ]

    def search_lexical(
        self,
        collection: Collection,
        scope: Scope,
        text: str,
        k: int,
        flt: RecordFilter | None = None,
    ) -> list[SearchHit]:
        rows = [r for r in self._rows(collection, scope).values() if matches(r, flt)]
        scores = bm25_scores(text, [r.indexed_text for r in rows])
        ranked = sorted(
            ((s, r) for s, r in zip(scores, rows, strict=True) if s > 0),
            key=lambda pair: pair[0],
            reverse=True,
        )
        return [SearchHit(record=r.model_copy(deep=True), score=s) for s, r in ranked[:k]]

    def search_hybrid(
        self,
        collection: Collection,
        scope: Scope,
        vector: Sequence[float],
        text: str,
        k: int,
        flt: RecordFilter | None = None,
    ) -> list[SearchHit]:
        every = self.count(collection, scope)
        dense = self.search_dense(collection, scope, vector, every, flt)
        lexical = self.search_lexical(collection, scope, text, every, flt)
        dense_all = {h.record.id: h.score for h in dense}
        lexical_all = {h.record.id: h.score for h in lexical}
        return complete_parts(fuse_rrf(dense[:k], lexical[:k], k), lambda ids: {
            i: {"dense": dense_all.get(i, 0.0), "lexical": lexical_all.get(i, 0.0)}
            for i in ids})

    # -- the decay sweep's ports (DecayScan, StatusWriter) ------------------------------------
    @staticmethod
    def _fields(scope_key: str, r: StoredRecord) -> DecayFields:
        return DecayFields.of(scope_key, r.id, r.status, r.updated_at, r.confidence, r.payload)

    def scan_decay_fields(self, collection: Collection, statuses: Sequence[MemoryStatus],
                          batch_size: int = 10_000) -> Iterator[list[DecayFields]]:
        with self._lock:
            rows = [self._fields(key, r) for key, scoped in self._data[collection].items()
                    for r in scoped.values() if r.status in statuses]
        for i in range(0, len(rows), batch_size):
            yield rows[i:i + batch_size]

    def decay_fields(self, collection: Collection,
                     keys: Sequence[tuple[str, str]]) -> list[DecayFields]:
        data = self._data[collection]
        return [self._fields(key, data[key][i]) for key, i in keys
                if i in data.get(key, {})]

    def set_statuses(self, collection: Collection,
                     changes: Sequence[tuple[str, str, MemoryStatus]]) -> int:
        written = 0
        with self._lock:
            data = self._data[collection]
            for key, i, status in changes:
                if i in data.get(key, {}):
                    data[key][i].status = status
                    written += 1
        return written

    def flush(self, collection: Collection | None = None) -> None:
        return None

    def ping(self) -> None:
        return None

    def close(self) -> None:
        return None
