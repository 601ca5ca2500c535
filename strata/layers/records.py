"""MemoryItem ↔ StoredRecord, and the idempotent memory id."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timezone

from strata.models import MemoryItem, Scope, StoredRecord

__all__ = ["from_record", "memory_id", "to_record"]

_PAYLOAD_FIELDS = ("kind", "key", "value", "source", "scope_tags", "provenance", "event_time",
                   "valid_to", "superseded_by", "last_access_at", "access_count", "weight",
                   "metadata", "context", "agent", "visibility", "shared_with")


def memory_id(scope: Scope, session_id: str | None, kind: str, content: str) -> str:
    """hash(user, session, normalized content): a retried write gets the same id."""
    normalized = re.sub(r"\s+", " ", content.strip().lower())
    raw = f"{scope.key}|{session_id or ''}|{kind}|{normalized}"
    return hashlib.blake2b(raw.encode("utf-8"), digest_size=12).hexdigest()


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
