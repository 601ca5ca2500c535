"""A hot user's entity index (#38): the people, places and things their episode turns
mention (``strata.entities.EntityIndex``), next to the user's ``HotTable``s.

Built from the episodes table when the user's hot index loads and kept current by every
write that reaches the table: a turn added or replaced is indexed again, and a turn deleted,
forgotten (weight 0) or no longer active or cold leaves the index at once, so recall never
reaches a forgotten turn through an entity. Exchanges (two neighbouring turns, indexed as
their turns already are) are not indexed. Extraction is deterministic (the gazetteer and the
category lexicon that ship as data, ``strata.entities``), ~2 ms a turn; a recall asks
``reach`` for the turns a question's entities and asked-for kinds lead to.

Thread safety: one lock per user's index, held while it is read or changed (the hot
index's own locks cover its tables, not this).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Collection, Iterable

from strata.entities import CategoryLexicon, EntityIndex, Gazetteer, Reach, reach
from strata.extract.exchanges import EXCHANGE
from strata.models import MemoryStatus, StoredRecord

__all__ = ["ENTITY_BYTES_PER_TURN", "EntityReach", "UserEntities", "indexable"]

# the heap an indexed turn adds (its mentions, speaker entry and its share of the entities
# and links): tracemalloc over the LoCoMo dev conversations' turns, bench/entity_index_bytes.py
# (2026-12-03); what the hot index's byte cap counts per indexed turn
ENTITY_BYTES_PER_TURN = 500
_LIVE = (MemoryStatus.ACTIVE, MemoryStatus.COLD)

_CJK = re.compile(r"[\u3400-\u9fff]")

# what recall asks: a question → the reached memories and why (``strata.entities.Reach``)
EntityReach = Callable[[str], Reach]


def indexable(record: StoredRecord) -> bool:
    """Whether a record of the episodes collection belongs in the entity index: a turn
    (not an exchange), active or cold, not forgotten."""
    metadata = record.payload.get("metadata") or {}
    return (metadata.get("type") != EXCHANGE and record.status in _LIVE
            and float(record.payload.get("weight", 1.0)) > 0)


def _speaker(record: StoredRecord) -> str | None:
    speaker = (record.payload.get("metadata") or {}).get("speaker")
    return speaker if isinstance(speaker, str) and speaker.strip() else None


class UserEntities:
    """One user's entity index over their episode turns (see the module docstring)."""

    def __init__(self, gazetteer: Gazetteer, lexicon: CategoryLexicon) -> None:
        self._index = EntityIndex(gazetteer, lexicon)
        self._held: dict[str, int] = {}  # an indexed turn → the hash of its text
        self._lock = threading.Lock()

    @property
    def turns(self) -> int:
        """How many turns it indexes."""
        return len(self._held)

    @property
    def nbytes(self) -> int:
        """The heap it takes, estimated (``ENTITY_BYTES_PER_TURN`` per indexed turn)."""
        return ENTITY_BYTES_PER_TURN * len(self._held)

    def load(self, records: Iterable[StoredRecord], speakers: Collection[str]) -> None:
        """Index a loaded user's turns (those that are ``indexable``)."""
        with self._lock:
            for record in records:
                self._add(record, speakers)

    def apply(self, records: Iterable[StoredRecord], speakers: Collection[str]) -> None:
        """Records written (added or replaced): each is indexed again, or leaves the index
        when it is no longer ``indexable`` (forgotten, archived, an exchange); one whose
        text did not change (a payload rewritten) keeps its entities."""
        with self._lock:
            for record in records:
                held = self._held.get(record.id)
                if held is not None and held == hash(record.text) and indexable(record):
                    continue
                if held is not None:
                    self._drop([record.id])
                self._add(record, speakers)

    def forget(self, ids: Iterable[str]) -> None:
        """Memories deleted: they leave the index."""
        with self._lock:
            self._drop([i for i in ids if i in self._held])

    def reach(self, question: str, speakers: Collection[str]) -> Reach:
        """The indexed turns the question's entities and asked-for kinds lead to."""
        with self._lock:
            return reach(self._index, question, _lang(question), speakers)

    def _add(self, record: StoredRecord, speakers: Collection[str]) -> None:
        if not indexable(record):
            return
        speaker = _speaker(record)
        people = {*speakers, speaker} if speaker else set(speakers)
        self._index.add(record.id, record.text, _lang(record.text), speaker=speaker,
                        speakers=people)
        self._held[record.id] = hash(record.text)

    def _drop(self, ids: list[str]) -> None:
        if ids:
            self._index.forget(ids)
            for i in ids:
                self._held.pop(i, None)


def _lang(text: str) -> str:
    return "zh" if _CJK.search(text) else "en"
