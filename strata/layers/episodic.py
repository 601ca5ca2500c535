"""Episodes: what happened to a user, with time, type, session and sentiment.

Similar events of one user close in time merge into one record that counts them and keeps
the sentiment trend ("reported lag 3 times, getting more annoyed"). Exchanges (two
neighbouring user turns, ``strata.extract.exchanges``) are a second granularity of the same
conversation: they never merge, and they name the ids of their turns' own episodes.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel

from strata.extract.base import Candidate, attribution, said_at_metadata
from strata.extract.exchanges import EXCHANGE
from strata.extract.terms import has_cjk, overlap
from strata.layers.records import from_record, in_lane, memory_id, to_record
from strata.models import (
    Collection,
    MemoryItem,
    MemoryKind,
    MemoryStatus,
    RecordFilter,
    Scope,
    Source,
    embedded_text,
    utcnow,
)
from strata.stores.ports import Embedder, VectorStore

__all__ = ["EpisodeStore", "EpisodeWrite"]

MERGE_SIMILARITY = 0.9
MERGE_WINDOW = timedelta(days=7)
MERGE_SCAN = 10  # nearest episodes looked at (exchanges, which never merge, among them)
CJK_MERGE_COSINE = 0.8
CJK_MERGE_OVERLAP = 0.55


class EpisodeWrite(BaseModel):
    action: str  # insert | merge | duplicate
    item: MemoryItem


class EpisodeStore:
    """Episodes of one collection; every call is confined to one scope."""

    def __init__(self, vectors: VectorStore, embedder: Embedder,
                 merge_similarity: float = MERGE_SIMILARITY) -> None:
        self._vectors = vectors
        self._embedder = embedder
        self._merge_similarity = merge_similarity

    def apply(self, scope: Scope, candidate: Candidate) -> EpisodeWrite:
        new_id, existing = in_lane(self._vectors, Collection.EPISODES, scope, memory_id(
            scope, candidate.provenance.session_id, MemoryKind.EPISODE.value,
            f"{','.join(candidate.provenance.turn_ids)}|{candidate.text}"), candidate.agent or "")
        if existing is not None:  # in the writer's lane: another's private one is not seen
            return EpisodeWrite(action="duplicate", item=from_record(existing))
        vector = self._embedder.encode([embedded_text(candidate.text,
                                                      candidate.metadata)])[0].tolist()
        when = candidate.event_time or utcnow()
        if candidate.episode_type == EXCHANGE:
            return self._insert(scope, candidate, new_id, vector, when, {
                "type": EXCHANGE, "count": 1, "merged_ids": [new_id],
                "members": self.member_ids(scope, candidate)})
        similar = self._similar(scope, vector, candidate, when)
        if similar is not None:
            merged = self._merge(similar, candidate, new_id)
            self._vectors.upsert(Collection.EPISODES, scope, [
                to_record(merged, self._embedder.encode(
                    [embedded_text(merged.text, merged.metadata)])[0].tolist(),
                          self._embedder.model_id)])
            return EpisodeWrite(action="merge", item=merged)
        return self._insert(scope, candidate, new_id, vector, when, {
            "type": candidate.episode_type or "event", "count": 1,
            "object": candidate.business_object, "sentiments": [candidate.sentiment],
            "merged_ids": [new_id],
            **({"speaker": candidate.speaker} if candidate.speaker else {})})

    def _insert(self, scope: Scope, candidate: Candidate, new_id: str, vector: list[float],
                when: datetime, metadata: dict[str, Any]) -> EpisodeWrite:
        now = utcnow()
        item = MemoryItem(id=new_id, kind=MemoryKind.EPISODE, text=candidate.text,
                          confidence=candidate.confidence, source=candidate.source,
                          scope_tags=candidate.scope_tags, provenance=candidate.provenance,
                          created_at=now, updated_at=now, event_time=when,
                          metadata={**candidate.metadata, **said_at_metadata(candidate),
                                    **metadata},
                          **attribution(candidate))
        self._vectors.upsert(Collection.EPISODES, scope,
                             [to_record(item, vector, self._embedder.model_id)])
        return EpisodeWrite(action="insert", item=item)

    @staticmethod
    def member_ids(scope: Scope, candidate: Candidate) -> list[str]:
        """The ids the turn-level episodes of an exchange's turns get (when they exist)."""
        return [memory_id(scope, candidate.provenance.session_id, MemoryKind.EPISODE.value,
                          f"{tid}|{text}")
                for tid, text in zip(candidate.provenance.turn_ids, candidate.parts,
                                     strict=False)]

    def _similar(self, scope: Scope, vector: list[float], candidate: Candidate,
                 when: object) -> MemoryItem | None:
        """A recent active episode of the same type and speaker that says nearly the same,
        with the same agent, visibility and context (a merge never widens who sees what)."""
        text, kind, speaker = candidate.text, candidate.episode_type or "event", candidate.speaker
        same = attribution(candidate)
        live = RecordFilter(statuses=[MemoryStatus.ACTIVE, MemoryStatus.COLD])
        hits = self._vectors.search_dense(Collection.EPISODES, scope, vector, MERGE_SCAN, live)
        for hit in hits:
            item = from_record(hit.record)
            close = (item.event_time is not None and when is not None
                     and abs(item.event_time - when) <= MERGE_WINDOW)  # type: ignore[operator]
            if (close and item.metadata.get("type") == kind != EXCHANGE
                    and item.metadata.get("speaker") == speaker
                    and all(getattr(item, k) == v for k, v in same.items())
                    # what an admin wrote changes only by an admin
                    and (item.source is not Source.ADMIN or candidate.source is Source.ADMIN)
                    and self._says_the_same(hit.score, item.text, text)):
                return item
        return None

    def _says_the_same(self, cosine: float, old: str, new: str) -> bool:
        """Nearly the same words: a high cosine, or — for Chinese, where the packaged
        English model's cosines are high for unrelated sentences and lower for rephrasings
        ("页面又卡顿了" / "页面卡顿，点了半天") — a fair cosine and most characters shared."""
        if cosine >= self._merge_similarity:
            return True
        return (cosine >= CJK_MERGE_COSINE and has_cjk(new)
                and overlap(old, new) >= CJK_MERGE_OVERLAP)

    @staticmethod
    def _merge(item: MemoryItem, candidate: Candidate, new_id: str) -> MemoryItem:
        meta = dict(item.metadata)
        if new_id in meta.get("merged_ids", []):
            return item
        meta["count"] = int(meta.get("count", 1)) + 1
        said = said_at_metadata(candidate).get("said_at")
        if said and "said_at" in meta:  # said again: the latest time
            meta["said_at"] = max(meta["said_at"], said)
        meta["sentiments"] = [*meta.get("sentiments", []), candidate.sentiment][-20:]
        meta["merged_ids"] = [*meta.get("merged_ids", []), new_id]
        first, last = meta["sentiments"][0], meta["sentiments"][-1]
        meta["trend"] = "worse" if last < first else "better" if last > first else "steady"
        turns = [*item.provenance.turn_ids, *candidate.provenance.turn_ids]
        return item.model_copy(update={
            "metadata": meta, "updated_at": utcnow(), "status": MemoryStatus.ACTIVE,
            "event_time": max(filter(None, [item.event_time, candidate.event_time])),
            "provenance": item.provenance.model_copy(update={"turn_ids": turns}),
            "text": f"{item.text} (×{meta['count']})" if "(×" not in item.text
            else item.text.rsplit(" (×", 1)[0] + f" (×{meta['count']})"})
