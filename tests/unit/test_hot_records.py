"""A hot table's records held by column (``hot_records.RecordColumns``): every row reads back
as it was put, field for field and type for type, each read's payload is the caller's own,
and a LoCoMo-like memory costs the heap under 4 KiB, as ``HotTable.nbytes`` estimates."""

from __future__ import annotations

import enum
import gc
import tracemalloc
from datetime import datetime, timezone
from typing import Any

import pytest

from strata.layers.records import memory_id, to_record
from strata.models import (
    MemoryItem,
    MemoryKind,
    MemoryStatus,
    Provenance,
    RecordFilter,
    Scope,
    StoredRecord,
    utcnow,
)
from strata.stores.embedders import HashEmbedder
from strata.stores.hot_records import COLUMNS, built
from strata.stores.hot_table import HotTable, TokenSpill

EMB = HashEmbedder(64)
U = Scope(tenant="t", user="u")
WORDS = ("painting", "support", "group", "adoption", "agency", "camping", "beach", "pottery",
         "class", "friends", "kids", "concert", "violin", "summer", "roadtrip", "museum",
         "dinosaurs", "charity", "race", "sunrise", "lake")


def episodes(n: int, dim: int) -> list[StoredRecord]:
    """Episodes as the extraction writes them (``to_record`` of a ``MemoryItem``: 21
    payload keys, provenance, metadata with the speaker), texts of a LoCoMo turn's length."""
    out = []
    for i in range(n):
        words = [WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(14 + i % 6)]
        text = f"Hey {'Caroline' if i % 2 else 'Melanie'}, " + " ".join(words) + f" #{i}!"
        item = MemoryItem(id=memory_id(U, "s1", "episode", f"s1:{i}|{text}"),
                          kind=MemoryKind.EPISODE, text=text, event_time=utcnow(),
                          provenance=Provenance(session_id="s1", turn_ids=[f"s1:{i}"]),
                          metadata={"type": "event", "count": 1, "object": None,
                                    "sentiments": [0.0], "merged_ids": ["0" * 24],
                                    "speaker": "Caroline" if i % 2 else "Melanie"})
        vector = [((i * 31 + d * 17) % 101 - 50) / 64.0 for d in range(dim)]  # float32-exact
        out.append(to_record(item, vector, "model"))
    return out


def odd_record() -> StoredRecord:
    """Every JSON type and then some: types a round trip could change, or merge."""
    payload: dict[str, Any] = {
        "kind": "fact", "n": 3, "big": 10**30, "neg_zero": -0.0, "half": 0.5, "yes": True,
        "no": False, "none": None, "tuple": (1, "a"), "list": [1, [2, {"deep": "x"}]],
        "empty": {}, "long": "z" * 500, "unicode": "北京 — café"}
    return StoredRecord(id="odd", text="odd one", vector=[0.25] * EMB.dim, confidence=0.3,
                        status=MemoryStatus.COLD, created_at=1.5e9 + 0.1,
                        updated_at=1.5e9 + 0.7, embed_model="m", payload=payload)


def typed(value: Any) -> Any:
    """``value`` with the type of every part of it (``==`` alone takes 1 for 1.0 and True,
    and -0.0 for 0.0)."""
    if isinstance(value, dict):
        return "dict", type(value), [(typed(k), typed(v)) for k, v in value.items()]
    if isinstance(value, list | tuple):
        return type(value), [typed(v) for v in value]
    if isinstance(value, float):
        return float, value.hex()
    return type(value), value


def state(record: StoredRecord | None) -> Any:
    """Everything a record holds: its fields with their types (a held record has them all
    set, as pydantic's fields set: one from the store does)."""
    assert record is not None
    return typed(record.__dict__), record.__pydantic_extra__, record.__pydantic_private__


def test_a_row_reads_back_exactly_as_put_through_changes_and_a_compaction() -> None:
    table = HotTable(EMB.dim)
    rows = [odd_record(), *episodes(80, EMB.dim)]
    for record in rows:
        table.put(record.model_copy(deep=True), record.vector or [], None)
    changed = rows[5].model_copy(update={"status": MemoryStatus.ARCHIVED,
                                         "payload": {**rows[5].payload, "access_count": 2}})
    table.replace_fields(changed.id, status=MemoryStatus.ARCHIVED, payload=changed.payload)
    rows[5] = changed
    table.delete([r.id for r in rows[40:]])  # a third dead: the table compacts
    for record in rows[:40]:
        assert state(table.record(record.id)) == state(
            record.model_copy(update={"vector": None}))
        assert state(table.record(record.id, with_vector=True)) == state(record)
        held = table.record(record.id)
        assert held is not None and held.model_fields_set == set(StoredRecord.model_fields)
    assert [state(r) for r in table.filtered(RecordFilter(statuses=[MemoryStatus.COLD]))] \
        == [state(rows[0].model_copy(update={"vector": None}))]


def test_each_read_gets_a_payload_of_its_own() -> None:
    table = HotTable(EMB.dim)
    record = episodes(1, EMB.dim)[0]
    table.put(record, record.vector or [], None)
    read = table.record(record.id)
    assert read is not None
    read.payload["metadata"]["speaker"] = "Mallory"
    read.payload["provenance"]["turn_ids"].append("s9:9")
    read.payload["access_count"] = 99
    hit = table.search_dense(record.vector or [], 1, None)[0].record
    assert hit.payload == record.payload != read.payload


class Mood(enum.StrEnum):
    CALM = "calm"


def test_a_payload_marshal_cannot_write_is_held_as_it_is() -> None:
    table = HotTable(EMB.dim)
    when = datetime(2026, 12, 4, tzinfo=timezone.utc)
    record = StoredRecord(id="e", text="an enum", vector=[0.5] * EMB.dim,
                          payload={"mood": Mood.CALM, "at": when, "tags": ["a"]})
    table.put(record, record.vector or [], None)
    read = table.record("e")
    assert read is not None and read.payload == record.payload
    assert type(read.payload["mood"]) is Mood and read.payload["at"] == when
    read.payload["tags"].append("b")  # a copy: the table's stays as it was
    again = table.record("e")
    assert again is not None and again.payload == record.payload


def test_the_columns_hold_every_field_of_a_stored_record() -> None:
    """A field added to ``StoredRecord`` must be given a column (or it reads back lost)."""
    assert {*COLUMNS, "vector", "tokens"} == set(StoredRecord.model_fields)


def test_a_built_record_is_what_model_construct_gives() -> None:
    fields = odd_record().model_dump()
    fields_set = set(StoredRecord.model_fields)
    want = StoredRecord.model_construct(_fields_set=fields_set, **fields)
    got = built(dict(fields))
    assert got.__getstate__().keys() == want.__getstate__().keys()
    assert state(got) == state(want) and got.model_fields_set == want.model_fields_set


@pytest.mark.parametrize("spill", [True, False])
def test_a_loco_mo_memory_costs_the_heap_under_3_5_kib_as_estimated(spill: bool) -> None:
    """What ``bench/hot_index_bytes.py`` measures (LoCoMo: 3.1 KB a memory; 4.2 KB with
    held pydantic records and payload dicts), on 300 synthetic episodes with 384-d vectors
    (2.9 KB; 4.0 KB with held records)."""
    dim, n = 384, 300
    rows = episodes(n, dim)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    table = HotTable(dim, spill=TokenSpill() if spill else None)
    for i, record in enumerate(rows):  # token vectors: in the spill file or counted exactly
        table.put(record.model_copy(deep=True), record.vector or [], bytes([i % 256]) * 1024,
                  record.text.lower().split())
    table.trim()
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    measured = sum(s.size_diff for s in after.compare_to(before, "filename"))
    tokens = 0 if spill else 1024
    assert (measured / n) - tokens <= 3584
    assert table.nbytes == pytest.approx(measured, rel=0.1)


def test_a_filter_on_dates_reads_the_event_time_column_as_the_row_filter_does() -> None:
    from datetime import timedelta

    from strata.stores.row_filter import matches

    table = HotTable(EMB.dim)
    records = episodes(40, EMB.dim)
    start = datetime(2023, 5, 1, tzinfo=timezone.utc)
    for i, record in enumerate(records):
        payload = dict(record.payload)
        if i % 9 == 0:
            payload.pop("event_time")  # no event time: never within a date filter
        else:
            payload["event_time"] = (start + timedelta(days=i)).isoformat()
        table.put(record.model_copy(update={"payload": payload}), record.vector or [], None)
    table.delete([records[3].id])
    moved = table.record(records[4].id)
    assert moved is not None
    table.replace_fields(records[4].id, payload={**moved.payload, "event_time": "2024-01-01"})
    base = RecordFilter(statuses=[MemoryStatus.ACTIVE], visible_to="",
                        payload_not_equals={"metadata.type": "exchange"})
    for lo, hi in (("2023-05-10", "2023-05-20"), (None, "2023-05-15"), ("2023-06-01", None),
                   ("2024-01-01", "2024-01-02")):
        flt = base.model_copy(update={"event_from": lo, "event_before": hi})
        want = [r.id for r in records if (got := table.record(r.id)) is not None
                and matches(got, flt)]
        assert [r.id for r in table.filtered(flt)] == want
    # the dates are not cached: only the filter without them is
    assert list(table._masks) == [base.model_dump_json()]
