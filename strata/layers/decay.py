"""Decay: memories fade unless recalled. Cold below a threshold; archived after 90 days
unrecalled with confidence < 0.7. Idempotent: a second sweep at the same time changes nothing.

Weights follow ``exp(-λ·days)`` with λ = ln 2 / half-life (episodes ≈ 7 days, facts ≈ 30),
counted from the last access (or the last update for a memory never recalled).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from strata.layers.records import from_record, to_record
from strata.models import Collection, MemoryStatus, RecordFilter, Scope
from strata.recall.scoring import decay_weight
from strata.stores.ports import VectorStore

__all__ = ["DecayPolicy", "SweepCounts", "sweep_scope"]

LAYERS = {Collection.FACTS: "facts", Collection.EPISODES: "episodes"}
SCAN_LIMIT = 100_000


class DecayPolicy(BaseModel):
    half_life_days: dict[str, float] = Field(default_factory=lambda: {"facts": 30.0,
                                                                       "episodes": 7.0})
    cold_below: float = 0.1
    archive_after_days: float = 90.0
    archive_below_confidence: float = 0.7


class SweepCounts(BaseModel):
    users: int = 0
    scanned: int = 0
    cold: int = 0
    archived: int = 0
    rewarmed: int = 0

    def add(self, other: SweepCounts) -> SweepCounts:
        return SweepCounts(**{k: getattr(self, k) + getattr(other, k)
                              for k in type(self).model_fields})


def _next_status(status: MemoryStatus, weight: float, idle_days: float, confidence: float,
                 policy: DecayPolicy) -> MemoryStatus:
    if idle_days >= policy.archive_after_days and confidence < policy.archive_below_confidence:
        return MemoryStatus.ARCHIVED
    if weight < policy.cold_below:
        return MemoryStatus.COLD
    return MemoryStatus.ACTIVE


def sweep_scope(vectors: VectorStore, scope: Scope, policy: DecayPolicy, now: datetime,
                dry_run: bool = False) -> SweepCounts:
    """Recompute one user's decay; returns what changed (or would change, with dry_run)."""
    counts = SweepCounts(users=1)
    for collection, layer in LAYERS.items():
        rows = vectors.query(collection, scope, RecordFilter(statuses=["active", "cold"]),
                             SCAN_LIMIT)
        changed = []
        for row in rows:
            item = from_record(row)
            counts.scanned += 1
            last = item.last_access_at or item.updated_at
            idle = max(0.0, (now - last).total_seconds() / 86400)
            weight = decay_weight(idle, policy.half_life_days.get(layer))
            status = _next_status(item.status, weight, idle, item.confidence, policy)
            if status is item.status:
                continue
            if status is MemoryStatus.COLD:
                counts.cold += 1
            elif status is MemoryStatus.ARCHIVED:
                counts.archived += 1
            else:
                counts.rewarmed += 1
            changed.append(item.model_copy(update={"status": status}))
        if changed and not dry_run:
            stored = {r.id: r for r in vectors.get(collection, scope, [c.id for c in changed])}
            vectors.upsert(collection, scope, [
                to_record(c, stored[c.id].vector or [], stored[c.id].embed_model)
                for c in changed if c.id in stored])
    return counts
