"""A user's long-term memory out of and into the vector store, for export and import
(the format is ``strata.portability``).

``read_scope`` reads every memory of one scope, every status. ``import_items`` writes
memories with their own ids, timestamps and statuses: a memory already stored exactly so
is left alone (``unchanged``), so importing the same file twice writes nothing the second
time. Texts are embedded with this deployment's model (only new or changed texts). The
whole batch is checked first (roles against what it would overwrite, the procedure cap);
a refusal writes nothing. Runs in the user's shard, the single writer of the scope.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from strata.errors import Forbidden, InvalidInput, LimitExceeded
from strata.layers.records import from_record, lane_id, to_record
from strata.models import (
    LONG_TERM,
    Collection,
    MemoryItem,
    MemoryKind,
    MemoryStatus,
    RecordFilter,
    Scope,
    Source,
    StoredRecord,
    embedded_text,
    is_visible,
)
from strata.portability import ImportCounts
from strata.stores.ports import Embedder, VectorStore, WriteBatching

__all__ = ["holds_visible", "import_items", "read_rows", "read_scope"]

PAGE = 16_384  # Milvus's largest query limit
EMBED_BATCH = 256


def read_scope(vectors: VectorStore, scope: Scope) -> Iterator[MemoryItem]:
    """Every memory of ``scope``, facts then episodes then procedures, every status."""
    for collection in (layer.collection for layer in LONG_TERM):
        yield from map(from_record, read_rows(vectors, collection, scope))


def read_rows(vectors: VectorStore, collection: Collection, scope: Scope,
              flt: RecordFilter | None = None) -> Iterator[StoredRecord]:
    """Every row of ``scope`` in ``collection`` that ``flt`` keeps, however many: pages by
    creation time (a page holds at most ``PAGE`` rows; rows created in the same instant as a
    page's last are read again and skipped by id)."""
    base = flt or RecordFilter()
    seen: set[str] = set()
    after: float | None = base.created_after
    while True:
        rows = vectors.query(collection, scope, base.model_copy(update={"created_after": after}),
                             PAGE)
        fresh = [r for r in rows if r.id not in seen]
        for row in sorted(fresh, key=lambda r: (r.created_at, r.id)):
            seen.add(row.id)
            yield row
        if len(rows) < PAGE or not fresh:
            break
        after = max(r.created_at for r in rows)


def holds_visible(vectors: VectorStore, scope: Scope, viewer: str) -> bool:
    """Whether ``scope`` has a memory ``viewer`` (an agent; "" none) may see, any status."""
    seen = RecordFilter(visible_to=viewer)
    return any(vectors.query(layer.collection, scope, seen, 1) for layer in LONG_TERM)


def _comparable(item: MemoryItem) -> dict[str, Any]:
    """An item as it compares after a trip through a store (float timestamps, float32
    confidence): times to the millisecond, confidence to six places."""
    dumped = item.model_dump(mode="json", exclude={"created_at", "updated_at", "confidence"})
    return {**dumped, "created_at": round(item.created_at.timestamp(), 3),
            "updated_at": round(item.updated_at.timestamp(), 3),
            "confidence": round(item.confidence, 6)}


def _admins(item: MemoryItem) -> bool:
    return item.kind is MemoryKind.PROCEDURE or item.source is Source.ADMIN


def _stored_anywhere(vectors: VectorStore, scope: Scope, ids: list[str]
                     ) -> dict[str, tuple[Collection, StoredRecord]]:
    """The stored memories with these ids, in whichever collection holds them."""
    found: dict[str, tuple[Collection, StoredRecord]] = {}
    for layer in LONG_TERM:
        for record in vectors.get(layer.collection, scope, ids):
            found[record.id] = (layer.collection, record)
    return found


def _in_lane(vectors: VectorStore, scope: Scope, items: Sequence[MemoryItem],
             viewer: str | None) -> tuple[list[MemoryItem], dict[str, StoredRecord]]:
    """The items with the ids they are written under, and what is stored under those ids.

    A line whose id names a memory ``viewer`` may not see gets its ``lane_id``: it is
    neither overwritten nor revealed (the answer is that of a new id). An id that names a
    memory of another kind is refused (one id, one memory)."""
    stored = _stored_anywhere(vectors, scope, [i.id for i in items])
    if viewer is not None:
        hidden = {i.id for i in items if i.id in stored
                  and not is_visible(stored[i.id][1].payload, viewer)}
        if hidden:
            items = [i.model_copy(update={"id": lane_id(i.id, viewer)}) if i.id in hidden
                     else i for i in items]
            stored.update(_stored_anywhere(vectors, scope,
                                           [lane_id(h, viewer) for h in sorted(hidden)]))
    collection_of = {layer.kind: layer.collection for layer in LONG_TERM}
    for item in items:
        if item.id in stored and stored[item.id][0] is not collection_of[item.kind]:
            raise InvalidInput(f"memory {item.id!r} is a {stored[item.id][1].payload.get('kind')}"
                               f" here; the import says {item.kind.value} (an id names one "
                               "memory)")
    return list(items), {memory_id: record for memory_id, (_, record) in stored.items()}


def import_items(vectors: VectorStore, embedder: Embedder, scope: Scope,
                 items: Sequence[MemoryItem], *, admin: bool,
                 procedure_cap: int, viewer: str | None = None) -> ImportCounts:
    """Write ``items`` into ``scope`` keeping their ids (see the module docstring), as
    ``viewer`` sees the scope (``_in_lane``; None: everything)."""
    counts = ImportCounts()
    plan: dict[Collection, list[tuple[MemoryItem, StoredRecord | None]]] = {}
    items, stored = _in_lane(vectors, scope, items, viewer)
    for layer in LONG_TERM:
        collection = layer.collection
        mine = [i for i in items if i.kind is layer.kind]
        if not mine:
            continue
        for item in mine:
            old = stored.get(item.id)
            if old is not None and _comparable(from_record(old)) == _comparable(item):
                counts.unchanged += 1
                continue
            if old is not None and not admin and _admins(from_record(old)):
                raise Forbidden(f"memory {item.id!r} is an admin's (a procedure or source "
                                "admin); only an admin key may overwrite it")
            plan.setdefault(collection, []).append((item, old))
    _check_cap(vectors, scope, plan.get(Collection.PROCEDURES, []), procedure_cap)
    writes = {c: _records(embedder, todo) for c, todo in plan.items()}
    batch = vectors.write_batch(scope) if isinstance(vectors, WriteBatching) else None
    if batch is not None:
        with batch:
            for collection, records in writes.items():
                vectors.upsert(collection, scope, records)
    else:
        for collection, records in writes.items():
            vectors.upsert(collection, scope, records)
    for todo in plan.values():
        counts.created += sum(old is None for _, old in todo)
        counts.updated += sum(old is not None for _, old in todo)
    return counts


def _check_cap(vectors: VectorStore, scope: Scope,
               todo: list[tuple[MemoryItem, StoredRecord | None]], cap: int) -> None:
    stored = {r.id for r in vectors.query(Collection.PROCEDURES, scope,
                                          RecordFilter(statuses=[MemoryStatus.ACTIVE]), PAGE)}
    for item, _ in todo:
        if item.status is MemoryStatus.ACTIVE:
            stored.add(item.id)
        else:
            stored.discard(item.id)
    if len(stored) > cap:
        raise LimitExceeded(f"the import would leave {len(stored)} active procedures; the cap "
                            f"is {cap}")


def _records(embedder: Embedder, todo: list[tuple[MemoryItem, StoredRecord | None]]
             ) -> list[StoredRecord]:
    """The rows to write: a changed text is embedded (in batches), an unchanged one keeps
    its stored vector."""
    fresh = [item for item, old in todo
             if old is None or old.vector is None or old.text != item.text]
    vectors: dict[str, list[float]] = {}
    for start in range(0, len(fresh), EMBED_BATCH):
        part = fresh[start:start + EMBED_BATCH]
        texts = [embedded_text(i.text, i.metadata) for i in part]
        for item, vector in zip(part, embedder.encode(texts), strict=True):
            vectors[item.id] = vector.tolist()
    return [to_record(item, vectors.get(item.id) or (old.vector if old and old.vector else []),
                      embedder.model_id) for item, old in todo]
