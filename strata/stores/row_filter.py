"""``RecordFilter`` evaluated on one stored row in this process: the same semantics as the
Milvus expression that ``strata.stores.milvus_expr`` builds, for stores that filter rows
themselves (the hot index's tables, the test double of the vector store)."""

from __future__ import annotations

from typing import Any

from strata.models import RecordFilter, StoredRecord, is_visible

__all__ = ["matches"]


def matches(record: StoredRecord, flt: RecordFilter | None) -> bool:
    """Whether ``record`` passes ``flt`` (the same semantics as the Milvus expression)."""
    if flt is None:
        return True
    if flt.statuses is not None and record.status not in flt.statuses:
        return False
    if flt.ids is not None and record.id not in flt.ids:
        return False
    if flt.created_after is not None and record.created_at < flt.created_after:
        return False
    if flt.created_before is not None and record.created_at > flt.created_before:
        return False
    if flt.visible_to is not None and not is_visible(record.payload, flt.visible_to):
        return False
    if flt.event_from is not None or flt.event_before is not None:
        when = record.payload.get("event_time")  # ISO text: compared as text, as in Milvus
        if not isinstance(when, str) or (flt.event_from is not None and when < flt.event_from) \
                or (flt.event_before is not None and when >= flt.event_before):
            return False
    return (all(_path(record.payload, k) == v for k, v in flt.payload_equals.items())
            and all(_path(record.payload, k) != v for k, v in flt.payload_not_equals.items()))


def _path(payload: dict[str, Any], key: str) -> Any:
    value: Any = payload
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value
