"""Procedures: "when <condition>, do <steps> under <constraints>", at most ~100 per scope."""

from __future__ import annotations

from pydantic import BaseModel, Field

from strata.errors import Conflict, LimitExceeded
from strata.layers.records import memory_id, to_record
from strata.models import (
    Collection,
    MemoryItem,
    MemoryKind,
    MemoryStatus,
    RecordFilter,
    Scope,
    Source,
    utcnow,
)
from strata.stores.ports import Embedder, VectorStore

__all__ = ["ProcedureSpec", "ProcedureStore"]

DEFAULT_CAP = 100


class ProcedureSpec(BaseModel):
    """The structured part of a procedure (kept in the memory's metadata)."""

    keywords: list[str] = Field(default_factory=list)
    intents: list[str] = Field(default_factory=list)
    steps: list[str] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)
    priority: int = Field(default=50, ge=0, le=100)

    def condition(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return (tuple(sorted(k.lower() for k in self.keywords)),
                tuple(sorted(i.lower() for i in self.intents)))


def render(name: str, spec: ProcedureSpec) -> str:
    """The text recall shows: the rule as an instruction."""
    when = ", ".join(spec.keywords + spec.intents) or "always"
    steps = "; ".join(spec.steps)
    text = f"{name} — when: {when}; do: {steps}" if steps else f"{name} — when: {when}"
    if spec.constraints:
        text += f"; constraints: {'; '.join(spec.constraints)}"
    return text


class ProcedureStore:
    """Procedures of one scope, capped, with same-condition detection."""

    def __init__(self, vectors: VectorStore, embedder: Embedder, cap: int = DEFAULT_CAP) -> None:
        self._vectors = vectors
        self._embedder = embedder
        self.cap = cap

    def create(self, scope: Scope, name: str, spec: ProcedureSpec,
               source: Source = Source.ADMIN) -> MemoryItem:
        active = RecordFilter(statuses=[MemoryStatus.ACTIVE])
        existing = self._vectors.query(Collection.PROCEDURES, scope, active, self.cap + 1)
        if len(existing) >= self.cap:
            raise LimitExceeded(f"this scope already has {self.cap} procedures (the cap); "
                                "edit or delete one first")
        for record in existing:
            other = ProcedureSpec.model_validate(record.payload.get("metadata", {}))
            if (spec.keywords or spec.intents) and other.condition() == spec.condition():
                raise Conflict(f"procedure {record.id} already has the same condition; "
                               "edit it instead")
        now = utcnow()
        kind = MemoryKind.PROCEDURE
        item = MemoryItem(id=memory_id(scope, None, kind.value, name), kind=kind,
                          text=render(name, spec), key=name, confidence=1.0, source=source,
                          created_at=now, updated_at=now,
                          metadata=spec.model_dump() | {"name": name})
        vector = self._embedder.encode([item.text])[0].tolist()
        self._vectors.insert(Collection.PROCEDURES, scope,
                             [to_record(item, vector, self._embedder.model_id)])
        return item
