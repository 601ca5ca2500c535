"""Semantic facts: ``key = value`` per user, with versions, kept current by the ConflictResolver."""

from __future__ import annotations

import logging
import re

from pydantic import BaseModel

from strata.conflict import Action, ConflictResolver, Decision
from strata.errors import InvalidInput, NotFound
from strata.extract.base import Candidate, attribution, said_at_metadata
from strata.layers.records import from_record, in_lane, memory_id, to_record
from strata.models import (
    Collection,
    MemoryItem,
    MemoryKind,
    MemoryStatus,
    RecordFilter,
    Scope,
    utcnow,
)
from strata.stores.ports import Embedder, VectorStore

__all__ = ["FactStore", "FactWrite"]

logger = logging.getLogger(__name__)
_STATUS_OF = {Action.INSERT: MemoryStatus.ACTIVE, Action.SUPERSEDE: MemoryStatus.ACTIVE,
              Action.KEEP_BOTH: MemoryStatus.ACTIVE, Action.PENDING: MemoryStatus.PENDING,
              Action.OBSERVE: MemoryStatus.OBSERVATION}
MAX_VERSIONS = 1000
STALE_WEIGHT = 0.5  # an episode stating a superseded value: half its score in recall
STALE_SEARCH = 50   # episodes looked at for the superseded value, per change


def _states(text: str, value: str) -> bool:
    """Whether ``text`` names ``value`` (a whole word in English, a substring in Chinese)."""
    low = text.lower()
    if re.search(r"[\u4e00-\u9fff]", value):
        return value in low
    return re.search(rf"(?<![\w]){re.escape(value)}(?![\w])", low) is not None


class FactWrite(BaseModel):
    """What writing one candidate did."""

    decision: Decision
    item: MemoryItem


class FactStore:
    """Facts of one collection; every call is confined to one scope."""

    def __init__(self, vectors: VectorStore, embedder: Embedder,
                 resolver: ConflictResolver | None = None) -> None:
        self._vectors = vectors
        self._embedder = embedder
        self._resolver = resolver or ConflictResolver()

    def _save(self, scope: Scope, items: list[MemoryItem]) -> None:
        vectors = self._embedder.encode([i.text for i in items])
        self._vectors.upsert(Collection.FACTS, scope, [
            to_record(i, v.tolist(), self._embedder.model_id)
            for i, v in zip(items, vectors, strict=True)])

    def versions(self, scope: Scope, key: str) -> list[MemoryItem]:
        """Every stored version of ``key`` (all statuses), oldest first."""
        rows = self._vectors.query(Collection.FACTS, scope,
                                   RecordFilter(payload_equals={"key": key}), MAX_VERSIONS)
        return sorted((from_record(r) for r in rows), key=lambda i: i.created_at)

    def get(self, scope: Scope, item_id: str) -> MemoryItem:
        rows = self._vectors.get(Collection.FACTS, scope, [item_id])
        if not rows:
            raise NotFound(f"no memory {item_id!r}")
        return from_record(rows[0])

    def apply(self, scope: Scope, candidate: Candidate) -> FactWrite:
        """Write one candidate fact as the resolver decides."""
        if candidate.kind is not MemoryKind.FACT or not candidate.key:
            raise InvalidInput("a fact needs kind=fact and a key")
        # the writer's lane: another agent's private versions are neither seen nor changed
        lane = candidate.agent or ""
        statement = f"{candidate.key}={candidate.value}|{','.join(candidate.scope_tags)}"
        if candidate.metadata.get("confirms"):  # the confirmation of an observation of this
            statement += f"|confirmed in {candidate.metadata['confirms']}"  # session: its own
        new_id, existing = in_lane(self._vectors, Collection.FACTS, scope, memory_id(
            scope, candidate.provenance.session_id, MemoryKind.FACT.value, statement), lane)
        if existing is not None:
            return FactWrite(decision=Decision(action=Action.DUPLICATE, affected=[new_id],
                                               reason="this statement was already applied"),
                             item=from_record(existing))
        decision = self._resolver.decide(candidate, [
            v for v in self.versions(scope, candidate.key) if v.visible_to(lane)])
        now = utcnow()
        if decision.action in (Action.REINFORCE, Action.PROMOTE):
            item = self.get(scope, decision.affected[0])
            item.metadata["mentions"] = int(item.metadata.get("mentions", 1)) + 1
            item.confidence = max(item.confidence, candidate.confidence)
            item.updated_at = now
            if item.status is MemoryStatus.COLD:  # said again: current again (rewarmed)
                item.status, item.last_access_at = MemoryStatus.ACTIVE, now
            if decision.action is Action.PROMOTE:
                item.status = MemoryStatus.ACTIVE
                item.confidence = max(item.confidence, self._resolver.override_min_confidence)
            self._save(scope, [item])
            return FactWrite(decision=decision, item=item)
        item = MemoryItem(
            id=new_id, kind=MemoryKind.FACT, text=candidate.text, key=candidate.key,
            value=candidate.value, confidence=candidate.confidence, source=candidate.source,
            status=_STATUS_OF[decision.action], scope_tags=sorted(candidate.scope_tags),
            provenance=candidate.provenance, created_at=now, updated_at=now,
            event_time=candidate.event_time, metadata={
                **candidate.metadata, "mentions": 1, **said_at_metadata(candidate),
                **({"speaker": candidate.speaker} if candidate.speaker else {})},
            **attribution(candidate))
        changed = [item]
        for seen_id in decision.confirmed:  # observations this statement confirms: retired
            seen = self.get(scope, seen_id)
            item.metadata["mentions"] += int(seen.metadata.get("mentions", 1))
            seen.status, seen.valid_to, seen.superseded_by = MemoryStatus.SUPERSEDED, now, new_id
            seen.updated_at = now
            changed.append(seen)
        superseded: list[MemoryItem] = []
        if decision.action is Action.SUPERSEDE:
            for old_id in decision.affected:
                old = self.get(scope, old_id)
                old.status, old.valid_to, old.superseded_by = MemoryStatus.SUPERSEDED, now, new_id
                old.updated_at = now
                changed.append(old)
                superseded.append(old)
        self._save(scope, changed)
        for old in superseded:
            self._stale_episodes(scope, old, item)
        return FactWrite(decision=decision, item=item)

    def _stale_episodes(self, scope: Scope, old: MemoryItem, new: MemoryItem) -> int:
        """Episodes (and exchanges) that state a superseded value ("I live in Denver") are
        stale: their weight drops to ``STALE_WEIGHT`` (recall multiplies a memory's score by
        its weight), so a present-tense question gets the current fact first, while "where
        did I live before?" still finds them. Only the same person's, said before the
        change, not naming the new value (the change's own turn names both); how many."""
        value, current = (old.value or "").strip().lower(), (new.value or "").strip().lower()
        if len(value) < 2 or value == current:
            return 0
        speaker = old.metadata.get("speaker")
        vector = self._embedder.encode([old.text])[0].tolist()
        hits = self._vectors.search_hybrid(
            Collection.EPISODES, scope, vector, old.value or "", STALE_SEARCH,
            RecordFilter(statuses=[MemoryStatus.ACTIVE, MemoryStatus.COLD],
                         visible_to=new.agent or ""))
        ids = [h.record.id for h in hits if _states(h.record.text, value)
               and not (current and _states(h.record.text, current))
               and (not speaker or (h.record.payload.get("metadata") or {}).get(
                   "speaker") in (None, speaker))]
        stale = []
        for row in self._vectors.get(Collection.EPISODES, scope, ids) if ids else []:
            episode = from_record(row)
            if row.vector is None or episode.weight <= 0.0 or episode.metadata.get(
                    "stale_by"):
                continue  # forgotten (weight 0: an undo restores its weight) or stale already
            episode = episode.model_copy(update={
                "weight": min(episode.weight, STALE_WEIGHT),
                "metadata": {**episode.metadata, "stale_by": new.id, "stale_key": old.key}})
            stale.append(to_record(episode, row.vector, self._embedder.model_id))
        if stale:
            self._vectors.upsert(Collection.EPISODES, scope, stale)
        return len(stale)

    def current(self, scope: Scope, key: str, scope_tags: list[str] | None = None
                ) -> MemoryItem | None:
        """The value a question about ``key`` should get: the newest active version."""
        tags = sorted(scope_tags or [])
        active = [v for v in self.versions(scope, key)
                  if v.status is MemoryStatus.ACTIVE and sorted(v.scope_tags) == tags]
        return active[-1] if active else None

    def history(self, scope: Scope, item_id: str) -> list[MemoryItem]:
        """Every version of the fact ``item_id`` belongs to (same key and tags), oldest first."""
        item = self.get(scope, item_id)
        if not item.key:
            return [item]
        return [v for v in self.versions(scope, item.key)
                if sorted(v.scope_tags) == sorted(item.scope_tags)]
