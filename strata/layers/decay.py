"""Decay: memories fade unless recalled. Cold below a threshold; archived after 90 days
unrecalled with confidence < 0.7. Idempotent: a second sweep at the same time changes nothing.

Weights follow ``exp(-λ·days)`` with λ = ln 2 / half-life (episodes ≈ 7 days, facts ≈ 30),
counted from the last access (or the last update for a memory never recalled).

Two ways to run it:

* ``sweep_scope``: one user, read and written through the ``VectorStore`` port.
* the whole-store sweep: ``plan_sweep`` makes one pass over each collection reading only the
  decay columns (``DecayScan``) and lists the status changes; ``apply_changes`` then writes
  them in place (``StatusWriter``: a partial update, no vectors read or re-sent). It runs in
  the users' shard, their single writer, which re-reads the rows under its lock and
  re-decides, so a memory recalled or edited between the scan and the write keeps the status
  the fresh row calls for.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import NamedTuple

from pydantic import BaseModel, Field

from strata.layers.records import from_record
from strata.models import Collection, Layer, MemoryStatus, RecordFilter, Scope
from strata.recall.scoring import decay_weight
from strata.stores.ports import DecayFields, DecayScan, StatusWriter, VectorStore

__all__ = ["DecayPolicy", "StatusChange", "SweepCounts", "SweepPlan", "apply_changes",
           "group_changes", "next_status", "plan_sweep", "sweep_scope"]

DECAYING = (Layer.FACTS, Layer.EPISODES)  # the layers whose memories go cold
SWEPT_STATUSES = [MemoryStatus.ACTIVE, MemoryStatus.COLD]
SCAN_LIMIT = 100_000
DAY_S = 86400.0


class DecayPolicy(BaseModel):
    half_life_days: dict[Layer, float] = Field(default_factory=lambda: {Layer.FACTS: 30.0,
                                                                         Layer.EPISODES: 7.0})
    cold_below: float = 0.1
    archive_after_days: float = 90.0
    archive_below_confidence: float = 0.7


class SweepCounts(BaseModel):
    users: int = 0
    scanned: int = 0
    cold: int = 0
    archived: int = 0
    rewarmed: int = 0
    skipped: int = 0  # planned, but the row changed before the shard applied it
    sessions_purged: int = 0  # archived working memory deleted past retention
    sessions_expired: int = 0  # already gone by its Redis TTL; only the index entry dropped

    def add(self, other: SweepCounts) -> SweepCounts:
        return SweepCounts(**{k: getattr(self, k) + getattr(other, k)
                              for k in type(self).model_fields})

    def count(self, status: MemoryStatus) -> None:
        if status is MemoryStatus.COLD:
            self.cold += 1
        elif status is MemoryStatus.ARCHIVED:
            self.archived += 1
        else:
            self.rewarmed += 1


def next_status(layer: Layer, last_touch: float, confidence: float, now: float,
                policy: DecayPolicy) -> MemoryStatus:
    """The status a memory of ``layer`` should have at ``now`` (epoch seconds)."""
    idle = max(0.0, (now - last_touch) / DAY_S)
    if idle >= policy.archive_after_days and confidence < policy.archive_below_confidence:
        return MemoryStatus.ARCHIVED
    if decay_weight(idle, policy.half_life_days.get(layer)) < policy.cold_below:
        return MemoryStatus.COLD
    return MemoryStatus.ACTIVE


def _decide(row: DecayFields, layer: Layer, now: float,
            policy: DecayPolicy) -> MemoryStatus | None:
    """The new status of a row, or None if it keeps its own (or is no longer swept)."""
    if row.status not in SWEPT_STATUSES:
        return None
    last = row.last_access_at if row.last_access_at is not None else row.updated_at
    status = next_status(layer, last, row.confidence, now, policy)
    return None if status == row.status else status


def sweep_scope(vectors: VectorStore, scope: Scope, policy: DecayPolicy, now: datetime,
                dry_run: bool = False) -> SweepCounts:
    """Recompute one user's decay; returns what changed (or would change, with dry_run)."""
    counts = SweepCounts(users=1)
    at = now.timestamp()
    for layer in DECAYING:
        collection = layer.collection
        rows = vectors.query(collection, scope, RecordFilter(statuses=SWEPT_STATUSES),
                             SCAN_LIMIT)
        changed = []
        for row in rows:
            item = from_record(row)
            counts.scanned += 1
            last = (item.last_access_at or item.updated_at).timestamp()
            status = next_status(layer, last, item.confidence, at, policy)
            if status is item.status:
                continue
            counts.count(status)
            changed.append(item.model_copy(update={"status": status}))
        if changed and not dry_run:
            stored = {r.id: r for r in vectors.get(collection, scope, [c.id for c in changed])}
            vectors.upsert(collection, scope, [
                stored[c.id].model_copy(update={"status": c.status})
                for c in changed if c.id in stored])
    return counts


class StatusChange(NamedTuple):
    """One planned change: a row of ``collection`` should move to ``status``."""

    collection: Collection
    scope: str
    id: str
    status: MemoryStatus


class SweepPlan(BaseModel):
    """What one pass over the store found: counts, the users seen, the changes to make."""

    counts: SweepCounts = Field(default_factory=SweepCounts)
    users: set[str] = Field(default_factory=set)
    changes: list[StatusChange] = Field(default_factory=list)


def plan_sweep(store: DecayScan, policy: DecayPolicy, now: float,
               batch_size: int = 10_000) -> SweepPlan:
    """One pass over each decaying collection; decides every row, lists only the changes."""
    plan = SweepPlan()
    for layer in DECAYING:
        collection = layer.collection
        for page in store.scan_decay_fields(collection, SWEPT_STATUSES, batch_size):
            plan.counts.scanned += len(page)
            for row in page:
                plan.users.add(row.scope)
                status = _decide(row, layer, now, policy)
                if status is not None:
                    plan.counts.count(status)
                    plan.changes.append(StatusChange(collection, row.scope, row.id, status))
    plan.counts.users = len(plan.users)
    return plan


def apply_changes(store: StatusWriter, changes: Iterable[StatusChange], policy: DecayPolicy,
                  now: float) -> SweepCounts:
    """Re-read the planned rows, re-decide on what is stored now, write what still holds.

    Run by the rows' single writer (their shard), so nothing changes them in between.
    """
    counts = SweepCounts()
    by_collection: dict[Collection, list[StatusChange]] = {}
    for change in changes:
        by_collection.setdefault(change.collection, []).append(change)
    for collection, planned in by_collection.items():
        layer = Layer.of_collection(collection)
        current = store.decay_fields(collection, [(c.scope, c.id) for c in planned])
        writes: list[tuple[str, str, MemoryStatus]] = []
        for row in current:
            status = _decide(row, layer, now, policy)
            if status is not None:
                counts.count(status)
                writes.append((row.scope, row.id, status))
        counts.skipped += len(planned) - len(writes)
        store.set_statuses(collection, writes)
    return counts


def group_changes(changes: Sequence[StatusChange], batch: int) -> list[list[StatusChange]]:
    """Cut a shard's changes into batches of at most ``batch``, one user never split."""
    out: list[list[StatusChange]] = []
    current: list[StatusChange] = []
    ordered = sorted(changes, key=lambda c: c.scope)
    for i, change in enumerate(ordered):
        current.append(change)
        last_of_user = i + 1 == len(ordered) or ordered[i + 1].scope != change.scope
        if len(current) >= batch and last_of_user:
            out.append(current)
            current = []
    if current:
        out.append(current)
    return out
