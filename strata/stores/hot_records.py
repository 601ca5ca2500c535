"""The records of a ``HotTable``, held as columns and built again when one is read.

A held pydantic ``StoredRecord`` with its payload dicts cost ~1.9 KB of a hot memory's
~4.2 KB (a LoCoMo episode: the model, its ``__dict__``, 21 payload keys, the provenance and
metadata dicts, their lists; ``bench/hot_index_bytes.py``). ``RecordColumns`` keeps each
column of a row instead: the id, text, status and embedding model's name as references
(shared with the table's indexes, interned), the three float columns in one float64 array,
and the payload as its ``marshal`` bytes (~0.46 KB). A read builds the record again: the
same field values, bit for bit (``marshal`` writes only exact builtin types and reads them
back as they were; a payload it cannot write, e.g. one holding an enum member or a
datetime, is held as the dict itself, and copied when read). Every read gets payload dicts
of its own, so a caller that changes one changes nothing in the table.

What a read costs: ~3–4 µs a row (decoding the payload ~2.5 µs of it), paid by a search for
its hits only, by ``query`` for the rows it returns, and by a filter's mask (every row, once
per filter between writes).
"""

from __future__ import annotations

import copy
import marshal
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from strata.models import MemoryStatus, StoredRecord

__all__ = ["COLUMNS", "RecordColumns", "built"]

# the fields a row holds; ``vector`` and ``tokens`` are the table's (matrix, token vectors)
COLUMNS = ("id", "text", "status", "created_at", "updated_at", "confidence", "embed_model",
           "payload")
_FLOATS = ("created_at", "updated_at", "confidence")
# Every record read shares one set of field names as pydantic's "fields set" (a record from
# the store has all of them set; its own set is ~730 B). Nothing here dumps with
# ``exclude_unset``; a copy (``model_copy``) gets a set of its own.
_ALL_FIELDS = set(StoredRecord.model_fields)
_INTERN_MAX = 64  # payload strings up to this long are interned (kinds, sources, names)


class RecordColumns:
    """The records of a table's rows by column (see the module docstring). A row is
    appended, changed in status or payload, or killed (its id gone: dead), never moved."""

    def __init__(self) -> None:
        self._ids: list[str | None] = []  # None: a dead row
        self._texts: list[str] = []
        self._statuses: list[MemoryStatus] = []
        self._models: list[str] = []
        self._payloads: list[bytes | dict[str, Any]] = []
        # the payload's event time apart: what a filter on a query's dates reads, per row,
        # without decoding every payload (``within``)
        self._events: list[str | None] = []
        self._floats: npt.NDArray[np.float64] = np.zeros((16, len(_FLOATS)), dtype=np.float64)

    def __len__(self) -> int:
        return len(self._ids)

    def append(self, record: StoredRecord) -> int:
        """Hold ``record``'s columns (not its vector or token vectors) in a new row."""
        row = len(self._ids)
        if row == len(self._floats):
            self._floats = np.concatenate([self._floats, np.zeros_like(self._floats)])
        self._ids.append(record.id)
        self._texts.append(record.text)
        self._statuses.append(record.status)
        self._models.append(sys.intern(record.embed_model))
        self._payloads.append(_encoded(record.payload))
        self._events.append(_event_time(record.payload))
        self._floats[row] = (record.created_at, record.updated_at, record.confidence)
        return row

    def replace(self, row: int, status: MemoryStatus | None = None,
                payload: dict[str, Any] | None = None) -> None:
        if status is not None:
            self._statuses[row] = status
        if payload is not None:
            self._payloads[row] = _encoded(payload)
            self._events[row] = _event_time(payload)

    def kill(self, row: int) -> None:
        """The row is dead: its id goes, and its payload (the bulk of its bytes)."""
        self._ids[row] = None
        self._texts[row] = ""
        self._payloads[row] = b""
        self._events[row] = None

    def within(self, start: str | None, before: str | None) -> npt.NDArray[np.bool_]:
        """Per row, whether its payload's event time (ISO text, compared as text, as
        ``row_filter.matches`` and Milvus do) is at or after ``start`` and before
        ``before`` (either None: unbounded); a row without one is not."""
        return np.fromiter((isinstance(when, str) and (start is None or when >= start)
                            and (before is None or when < before) for when in self._events),
                           dtype=bool, count=len(self._events))

    def text(self, row: int) -> str:
        return self._texts[row]

    def record(self, row: int, vector: list[float] | None = None,
               tokens: str | None = None) -> StoredRecord | None:
        """The row's record as it was put (None: dead), with ``vector`` and ``tokens``."""
        record_id = self._ids[row]
        if record_id is None:
            return None
        created_at, updated_at, confidence = self._floats[row].tolist()
        return built({"id": record_id, "text": self._texts[row], "vector": vector,
                      "status": self._statuses[row], "created_at": created_at,
                      "updated_at": updated_at, "confidence": confidence,
                      "embed_model": self._models[row],
                      "payload": _decoded(self._payloads[row]), "tokens": tokens})

    def records(self) -> Iterator[StoredRecord | None]:
        """Every row's record in row order (None: dead)."""
        return (self.record(row) for row in range(len(self._ids)))

    def trim(self) -> None:
        """Drop the float array's spare capacity (a loaded table's rows are all in)."""
        self._floats = self._floats[:max(16, len(self._ids))].copy()

    def state(self) -> dict[str, Any] | None:
        """Every column as ``marshal`` can write it (``strata.stores.hot_snapshot``); None
        if a payload is held as a dict (one marshal cannot write)."""
        if any(type(p) is not bytes for p in self._payloads):
            return None
        n = len(self._ids)
        return {"ids": list(self._ids), "texts": list(self._texts),
                "statuses": [str(s) for s in self._statuses], "models": list(self._models),
                "payloads": list(self._payloads), "events": list(self._events),
                "floats": self._floats[:n].tobytes()}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> RecordColumns:
        """The columns ``state`` gave, row for row."""
        columns = cls()
        columns._ids, columns._texts = state["ids"], state["texts"]
        columns._statuses = [MemoryStatus(s) for s in state["statuses"]]
        columns._models = [sys.intern(m) for m in state["models"]]
        columns._payloads, columns._events = state["payloads"], state["events"]
        floats = np.frombuffer(state["floats"], dtype=np.float64).reshape(-1, len(_FLOATS))
        columns._floats = np.zeros((max(16, len(floats)), len(_FLOATS)), dtype=np.float64)
        columns._floats[:len(floats)] = floats
        return columns


def built(fields: dict[str, Any]) -> StoredRecord:
    """``StoredRecord.model_construct(_fields_set=_ALL_FIELDS, **fields)`` of every field
    (what it sets, without its loop over the fields for aliases and defaults, which a
    ``StoredRecord`` given all of them does not use): ~0.6 µs instead of ~3.5, paid per row
    by a filter's mask."""
    record = StoredRecord.__new__(StoredRecord)
    object.__setattr__(record, "__dict__", fields)
    object.__setattr__(record, "__pydantic_fields_set__", _ALL_FIELDS)
    object.__setattr__(record, "__pydantic_extra__", None)
    object.__setattr__(record, "__pydantic_private__", None)
    return record


def _event_time(payload: dict[str, Any]) -> str | None:
    when = payload.get("event_time")
    return sys.intern(when) if isinstance(when, str) else None


def _encoded(payload: dict[str, Any]) -> bytes | dict[str, Any]:
    interned = _interned(payload)
    try:
        return marshal.dumps(interned)
    except ValueError:  # a value marshal cannot write (an enum member, a datetime...)
        return interned  # type: ignore[no-any-return]


def _decoded(held: bytes | dict[str, Any]) -> dict[str, Any]:
    if isinstance(held, bytes):
        return marshal.loads(held)  # type: ignore[no-any-return]
    return copy.deepcopy(held)  # (rare: the store's and writers' payloads are JSON's types)


def _interned(value: Any) -> Any:
    """``value`` (a payload) with its short strings interned: the same values, one string
    object for all rows' "episode", "user_stated", "shared", a speaker's name... (``marshal``
    writes them as interned, and reads them back so)."""
    if type(value) is str:
        return sys.intern(value) if len(value) <= _INTERN_MAX else value
    if type(value) is dict:
        return {sys.intern(k) if type(k) is str else k: _interned(v)
                for k, v in value.items()}
    if type(value) is list:
        return [_interned(v) for v in value]
    return value
