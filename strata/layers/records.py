"""MemoryItem ↔ StoredRecord, the idempotent memory id, and the id of a write in its
writer's lane."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timezone

from strata.models import Collection, MemoryItem, Scope, StoredRecord, is_visible
from strata.stores.ports import VectorStore

__all__ = ["from_record", "in_lane", "lane_id", "memory_id", "to_record"]

_PAYLOAD_FIELDS = ("kind", "key", "value", "source", "scope_tags", "provenance", "event_time",
                   "valid_to", "superseded_by", "last_access_at", "access_count", "weight",
                   "metadata", "context", "agent", "visibility", "shared_with")


def memory_id(scope: Scope, session_id: str | None, kind: str, content: str) -> str:
    """hash(user, session, normalized content): a retried write gets the same id."""
    normalized = re.sub(r"\s+", " ", content.strip().lower())
    raw = f"{scope.key}|{session_id or ''}|{kind}|{normalized}"
    return hashlib.blake2b(raw.encode("utf-8"), digest_size=12).hexdigest()


def lane_id(memory_id: str, viewer: str) -> str:
    """The id a write takes when its own id names a memory its writer may not see (another
    agent's private memory): the same for the same id and writer, never the hidden one."""
    digest = hashlib.blake2b(f"{memory_id}|{viewer}".encode(), digest_size=12).hexdigest()
    return f"lane-{digest}"


def in_lane(vectors: VectorStore, collection: Collection, scope: Scope, new_id: str,
            writer: str) -> tuple[str, StoredRecord | None]:
    """The id a write of ``writer`` (an agent, "" none) takes, and what is stored under it.
    Another lane's memory with the same content is neither returned (it would reveal it)
    nor touched: the write gets its lane's own id (``lane_id``)."""
    rows = vectors.get(collection, scope, [new_id])
    if rows and not is_visible(rows[0].payload, writer):
        new_id = lane_id(new_id, writer)
        rows = vectors.get(collection, scope, [new_id])
    return new_id, rows[0] if rows else None


def to_record(item: MemoryItem, vector: list[float], embed_model: str) -> StoredRecord:
    payload = item.model_dump(mode="json", include=set(_PAYLOAD_FIELDS))
    return StoredRecord(id=item.id, text=item.text, vector=vector, status=item.status,
                        created_at=item.created_at.timestamp(),
                        updated_at=item.updated_at.timestamp(), confidence=item.confidence,
                        embed_model=embed_model, payload=payload)


def from_record(record: StoredRecord) -> MemoryItem:
    return MemoryItem.model_validate({
        **record.payload, "id": record.id, "text": record.text, "status": record.status,
        "confidence": record.confidence,
        "created_at": datetime.fromtimestamp(record.created_at, timezone.utc),
        "updated_at": datetime.fromtimestamp(record.updated_at, timezone.utc)})
