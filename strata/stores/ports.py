"""The storage ports. Adapters implement these; services depend only on them.

Every read and write of the vector store takes a ``Scope``: there is deliberately no
method that reads across scopes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, Field

from strata.models import (
    Collection,
    MemoryStatus,
    RecordFilter,
    Scope,
    SearchHit,
    StoredRecord,
    is_visible,
)

__all__ = ["DecayFields", "DecayScan", "Embedder", "IdScorer", "PurgeReport", "Purging",
           "QueryEmbedding", "StatusWriter", "VectorStore", "WriteBatching", "complete_parts",
           "cosine", "fuse_rrf", "score_ids"]

RRF_K = 60


class QueryEmbedding(NamedTuple):
    """A query's pooled vector and, when the embedder has them, its token vectors (unit
    rows, for late interaction)."""

    vector: list[float]
    tokens: npt.NDArray[np.float32] | None = None


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors."""

    @property
    def dim(self) -> int: ...

    @property
    def model_id(self) -> str: ...

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


@runtime_checkable
class VectorStore(Protocol):
    """One collection per layer; every call is confined to one scope."""

    def ensure_collections(self, dim: int) -> None: ...

    def insert(self, collection: Collection, scope: Scope, records: Sequence[StoredRecord]) -> None:
        """Add new records; raises ``Conflict`` if an id already exists in the scope."""
        ...

    def upsert(self, collection: Collection, scope: Scope, records: Sequence[StoredRecord]) -> None:
        ...

    def delete(self, collection: Collection, scope: Scope, ids: Sequence[str]) -> int: ...

    def delete_scope(self, collection: Collection, scope: Scope) -> int: ...

    def get(self, collection: Collection, scope: Scope, ids: Sequence[str]) -> list[StoredRecord]:
        """Records by id, vectors (and stored token vectors) included."""
        ...

    def scan_scope(self, collection: Collection, scope: Scope,
                   limit: int = 16_384) -> list[StoredRecord]:
        """Every record of the scope as ``get`` returns it (a hot-index load)."""
        ...

    def set_payloads(self, collection: Collection,
                     changes: Sequence[tuple[str, str, dict[str, Any]]]) -> int:
        """Rewrite the payload alone of rows named by (scope key, id); returns how many."""
        ...

    def query(
        self,
        collection: Collection,
        scope: Scope,
        flt: RecordFilter | None = None,
        limit: int = 100,
    ) -> list[StoredRecord]: ...

    def count(self, collection: Collection, scope: Scope) -> int: ...

    def search_dense(
        self,
        collection: Collection,
        scope: Scope,
        vector: Sequence[float],
        k: int,
        flt: RecordFilter | None = None,
    ) -> list[SearchHit]: ...

    def search_lexical(
        self,
        collection: Collection,
        scope: Scope,
        text: str,
        k: int,
        flt: RecordFilter | None = None,
    ) -> list[SearchHit]: ...

    def search_hybrid(
        self,
        collection: Collection,
        scope: Scope,
        vector: Sequence[float],
        text: str,
        k: int,
        flt: RecordFilter | None = None,
    ) -> list[SearchHit]: ...

    def flush(self, collection: Collection | None = None) -> None: ...

    def ping(self) -> None: ...

    def close(self) -> None: ...


class DecayFields(NamedTuple):
    """The few columns the decay rule reads (no text, no vectors). A tuple, not a model:
    a sweep handles a million of these."""

    scope: str  # the scope key, "tenant:user"
    id: str
    status: MemoryStatus
    updated_at: float
    last_access_at: float | None
    confidence: float

    @classmethod
    def of(cls, scope: str, id: str, status: str, updated_at: float, confidence: float,
           payload: dict[str, Any] | None) -> DecayFields:
        """From a row's columns; ``last_access_at`` is an ISO time inside the payload."""
        raw = (payload or {}).get("last_access_at")
        last = datetime.fromisoformat(raw).timestamp() if isinstance(raw, str) else None
        return cls(scope, id, MemoryStatus(status), float(updated_at), last, float(confidence))


@runtime_checkable
class DecayScan(Protocol):
    """One pass over a whole collection, for the decay sweep only (it alone reads across
    scopes, and only the decay columns)."""

    def scan_decay_fields(self, collection: Collection, statuses: Sequence[MemoryStatus],
                          batch_size: int = 10_000) -> Iterator[list[DecayFields]]: ...


@runtime_checkable
class StatusWriter(Protocol):
    """Re-read and rewrite the status of rows named by (scope key, id), in place: the
    other columns, vectors included, are neither read nor sent back."""

    def decay_fields(self, collection: Collection,
                     keys: Sequence[tuple[str, str]]) -> list[DecayFields]: ...

    def set_statuses(self, collection: Collection,
                     changes: Sequence[tuple[str, str, MemoryStatus]]) -> int:
        """``(scope key, id, status)`` each; returns how many rows were written."""
        ...


class PurgeReport(BaseModel):
    """What a purge of deleted rows did: the collections compacted, the data files
    rewritten (milvus-lite), and whether the store could purge at all."""

    collections: list[str] = Field(default_factory=list)
    files_rewritten: int = 0
    complete: bool = True


@runtime_checkable
class Purging(Protocol):
    """A store whose deletes leave the text in its files until a compaction: ``purge_deleted``
    compacts what was deleted since the last purge (forgetting calls it after a delete)."""

    def purge_deleted(self) -> PurgeReport: ...


@runtime_checkable
class WriteBatching(Protocol):
    """A store that can gather one scope's writes and send them together at the end of a
    block (``HotIndexStore``); reads inside the block see the block's writes."""

    def write_batch(self, scope: Scope) -> AbstractContextManager[None]: ...


def complete_parts(fused: Sequence[SearchHit],
                   score_of: Callable[[list[str]], dict[str, dict[str, float]]]
                   ) -> list[SearchHit]:
    """Give every fused hit both raw similarities: a hit that ranked below ``k`` on one side
    gets its real score there (0 only when it truly shares no term), not a missing part.
    ``score_of`` gives the ``dense`` and ``lexical`` parts of the named ids of the same scope
    (``score_ids`` for a real store)."""
    missing = [h.record.id for h in fused if not {"dense", "lexical"} <= h.parts.keys()]
    scores = score_of(missing) if missing else {}
    for hit in fused:
        for name in ("dense", "lexical"):
            hit.parts.setdefault(name, scores.get(hit.record.id, {}).get(name, 0.0))
    return list(fused)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors (0 for a zero vector)."""
    x, y = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    norm = float(np.linalg.norm(x) * np.linalg.norm(y))
    return float(x @ y) / norm if norm else 0.0


@runtime_checkable
class IdScorer(Protocol):
    """A store that gives ``score_ids``'s answer from its own columns."""

    def score_ids(self, collection: Collection, scope: Scope, vector: Sequence[float],
                  text: str, ids: Sequence[str], statuses: Sequence[MemoryStatus] | None,
                  visible_to: str | None) -> list[SearchHit]: ...


def score_ids(store: VectorStore, collection: Collection, scope: Scope,
              vector: Sequence[float], text: str, ids: Sequence[str],
              statuses: Sequence[MemoryStatus] | None = None,
              visible_to: str | None = None) -> list[SearchHit]:
    """The named records (with one of ``statuses``, if given, and that the agent
    ``visible_to`` may see, if given), each with both raw
    similarities, exactly: the cosine from its stored vector (an id-restricted ANN search can
    miss ids far from the query) and BM25 through a lexical search restricted to these ids.
    A store that can score its own rows without building them with their vectors
    (``IdScorer``: the hot index) does it itself."""
    if isinstance(store, IdScorer):
        return store.score_ids(collection, scope, vector, text, ids, statuses, visible_to)
    records = [r for r in store.get(collection, scope, list(ids))
               if (statuses is None or r.status in statuses)
               and (visible_to is None or is_visible(r.payload, visible_to))]
    if not records:
        return []
    only = RecordFilter(ids=[r.id for r in records])
    lexical = {h.record.id: h.score
               for h in store.search_lexical(collection, scope, text, len(records), only)}
    return [SearchHit(record=r, score=0.0, parts={
        "dense": cosine(r.vector, vector) if r.vector is not None else 0.0,
        "lexical": lexical.get(r.id, 0.0)}) for r in records]


def fuse_rrf(
    dense: Sequence[SearchHit], lexical: Sequence[SearchHit], k: int, rrf_k: int = RRF_K
) -> list[SearchHit]:
    """Reciprocal-rank fusion of a dense and a lexical result list.

    The fused hit keeps the raw similarity of each side in ``parts`` so that
    later scoring can use the dense cosine rather than a rank.
    """
    fused: dict[str, SearchHit] = {}
    for name, hits in (("dense", dense), ("lexical", lexical)):
        for rank, hit in enumerate(hits):
            entry = fused.get(hit.record.id)
            if entry is None:
                entry = SearchHit(record=hit.record, score=0.0)
                fused[hit.record.id] = entry
            entry.score += 1.0 / (rrf_k + rank + 1)
            entry.parts[name] = hit.score
    ranked = sorted(fused.values(), key=lambda h: h.score, reverse=True)
    return ranked[:k]
