"""A hot user's snapshot file: the same tables back, used only while nothing wrote the user,
and unreadable once a write (a forget) made it stale (``strata.stores.hot_snapshot``).

The durable store is the in-memory double (counting the scans that reach it); the marks are
in the real Redis the tests start, and the same contract runs on the in-process double.
"""

from __future__ import annotations

import base64
import marshal
import os
from pathlib import Path

import pytest

from strata.layers.memories import LongTermMemory
from strata.layers.memory_models import MemoryCreate
from strata.layers.records import memory_id, to_record
from strata.layers.summarize import RuleSummarizer
from strata.models import Collection, MemoryItem, MemoryKind, MemoryStatus, RecordFilter, Scope
from strata.recall.late import pack_tokens
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.hot import HotIndexStore
from strata.stores.hot_snapshot import HotSnapshots, MemoryMarks, RedisMarks, SnapshotMarks
from strata.stores.hot_table import HotTable, TokenSpill
from strata.stores.redis import RedisStore
from tests.unit.test_hot_index import CountingStore, hot, recall

U = Scope(tenant="t", user="u")
EMB = HashEmbedder(64)
TEXTS = ["signed up for a pottery class on Saturday", "my sister Ana moved to Lisbon",
         "the invoice export is broken again", "adopted a beagle called Toby",
         "went hiking in the alps with Ana"]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_shard(redis_store: RedisStore, durable: CountingStore, directory: Path,
               marks: SnapshotMarks, clock: Clock, identity: str = "hash/64"
               ) -> SessionShardService:
    hot = HotIndexStore(durable, 64, tokens=lambda: EMB, clock=clock, snapshot_idle_s=60,
                        snapshots=HotSnapshots(directory, marks, identity))
    lt = LongTermMemory(hot, EMB)
    return SessionShardService(0, Settings(), redis_store, RuleSummarizer(), longterm=lambda: lt)


@pytest.fixture
def durable() -> CountingStore:
    store = CountingStore()
    store.ensure_collections(64)
    return store


@pytest.fixture
def marks(redis_store: RedisStore) -> RedisMarks:
    return RedisMarks(redis_store.connection)


def sealed_shard(redis_store: RedisStore, durable: CountingStore, tmp_path: Path,
                 marks: SnapshotMarks) -> tuple[SessionShardService, Clock]:
    """A shard that wrote the user's memories, recalled them, then sealed them when idle."""
    clock = Clock()
    shard = make_shard(redis_store, durable, tmp_path, marks, clock)
    for text in TEXTS:
        shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text=text))
    shard.create_memory(U, MemoryCreate(kind=MemoryKind.FACT, key="pet.name", value="Toby"))
    assert recall(shard, "pottery class")
    assert hot(shard).seal_idle() == 0  # not idle yet
    clock.now += 61
    hot(shard).sweep()
    assert hot(shard).stats().snapshots == 1
    return shard, clock


def test_a_table_comes_back_row_for_row(tmp_path: Path) -> None:
    for spill in (None, TokenSpill(str(tmp_path))):
        table = HotTable(64, spill)
        vectors = EMB.encode(TEXTS)
        for i, (text, tokens) in enumerate(zip(TEXTS, EMB.token_vectors(TEXTS), strict=True)):
            item = MemoryItem(id=memory_id(U, "s", "episode", text), kind=MemoryKind.EPISODE,
                              text=text)
            table.put(to_record(item, vectors[i].tolist(), EMB.model_id), vectors[i],
                      base64.b64decode(pack_tokens(tokens)))
        table.delete([table.ids()[2]])  # a dead row travels too
        table.replace_fields(table.ids()[0], status=MemoryStatus.COLD)
        back = HotTable.from_state(marshal.loads(marshal.dumps(table.state())),
                                   TokenSpill(str(tmp_path)) if spill else None)
        assert back.ids() == table.ids() and back.nbytes == table.nbytes
        for rid in table.ids():
            assert back.record(rid, with_vector=True) == table.record(rid, with_vector=True)
            assert back.tokens_of(rid) == table.tokens_of(rid)
        query = EMB.encode(["Ana in Lisbon hiking"])[0].tolist()
        for flt in (None, RecordFilter(status=[MemoryStatus.ACTIVE])):
            assert ([(h.record.id, h.score, h.parts) for h in
                     back.search_hybrid(query, "Ana Lisbon hiking", 5, flt)]
                    == [(h.record.id, h.score, h.parts) for h in
                        table.search_hybrid(query, "Ana Lisbon hiking", 5, flt)])
        assert back.speakers == table.speakers


def test_a_restarted_shard_loads_the_user_from_the_snapshot(
        redis_store: RedisStore, durable: CountingStore, tmp_path: Path,
        marks: RedisMarks) -> None:
    shard, _ = sealed_shard(redis_store, durable, tmp_path, marks)
    before = recall(shard, "who is Ana and where did she move")
    scans = durable.calls["scan_scope"]
    fresh = make_shard(redis_store, durable, tmp_path, marks, Clock())  # a restart
    assert recall(fresh, "who is Ana and where did she move") == before
    assert hot(fresh).stats().restored == 1 and durable.calls["scan_scope"] == scans
    assert [m.text for m in fresh.longterm.list_items(U, status="active")] == \
        [m.text for m in shard.longterm.list_items(U, status="active")]


def test_a_forget_makes_every_copy_unreadable(
        redis_store: RedisStore, durable: CountingStore, tmp_path: Path,
        marks: RedisMarks) -> None:
    shard, _ = sealed_shard(redis_store, durable, tmp_path, marks)
    [path] = tmp_path.glob("*.snap")
    copy = path.read_bytes()
    assert b"invoice" not in copy and b"Lisbon" not in copy  # encrypted at rest
    doomed = next(m for m in shard.longterm.list_items(U) if "invoice" in m.text)
    shard.delete_memory(U, doomed.id)
    assert not path.exists()  # this node's file goes with the write
    path.write_bytes(copy)  # a copy kept elsewhere (another node, a backup)
    scans = durable.calls["scan_scope"]
    fresh = make_shard(redis_store, durable, tmp_path, marks, Clock())
    assert not any("invoice" in t for t in recall(fresh, "invoice export broken"))
    assert hot(fresh).stats().restored == 0 and durable.calls["scan_scope"] == scans + 3
    assert not path.exists()  # the stale copy was unlinked when the user loaded


def test_a_write_elsewhere_while_the_user_is_hot_stops_the_snapshot(
        redis_store: RedisStore, durable: CountingStore, tmp_path: Path,
        marks: RedisMarks) -> None:
    clock = Clock()
    shard = make_shard(redis_store, durable, tmp_path, marks, clock)
    shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text=TEXTS[0]))
    other = make_shard(redis_store, durable, tmp_path / "other", marks, Clock())
    other.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text=TEXTS[1]))
    shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text=TEXTS[2]))
    clock.now += 61
    assert hot(shard).seal_idle() == 0  # its tables may lack the other's write
    assert not list(tmp_path.glob("*.snap"))


def test_reinforcement_persisted_after_the_seal_makes_it_stale(
        redis_store: RedisStore, durable: CountingStore, tmp_path: Path,
        marks: RedisMarks) -> None:
    shard, clock = sealed_shard(redis_store, durable, tmp_path, marks)
    beagle = next(m for m in shard.longterm.list_items(U) if "beagle" in m.text)
    shard.reinforce(U, [beagle.id])
    assert hot(shard).persist_access() > 0  # the access counts are written: a write
    assert not list(tmp_path.glob("*.snap"))
    clock.now += 61
    assert hot(shard).seal_idle() == 1
    fresh = make_shard(redis_store, durable, tmp_path, marks, Clock())
    assert recall(fresh, "beagle called Toby") and hot(fresh).stats().restored == 1


def test_a_snapshot_made_with_another_model_is_not_used(
        redis_store: RedisStore, durable: CountingStore, tmp_path: Path,
        marks: RedisMarks) -> None:
    sealed_shard(redis_store, durable, tmp_path, marks)
    other = make_shard(redis_store, durable, tmp_path, marks, Clock(), identity="mpnet/768")
    assert recall(other, "pottery class")
    assert hot(other).stats().restored == 0 and not list(tmp_path.glob("*.snap"))


@pytest.mark.parametrize("kind", ["memory", "redis"])
def test_the_marks_contract(kind: str, redis_store: RedisStore) -> None:
    marks: SnapshotMarks = MemoryMarks() if kind == "memory" else RedisMarks(
        redis_store.connection)
    assert marks.current("t:a") == (0, None)
    assert marks.invalidate(["t:a", "t:b", "t:a"]) == {"t:a": 1, "t:b": 1}
    assert not marks.seal("t:a", 0, b"k" * 32)  # a write came after generation 0
    assert marks.seal("t:a", 1, b"k" * 32)
    assert marks.current("t:a") == (1, b"k" * 32)
    assert marks.invalidate(["t:a"]) == {"t:a": 2}
    assert marks.current("t:a") == (2, None)


def test_the_forgetting_audit_reads_the_marks(redis_store: RedisStore) -> None:
    marks = RedisMarks(redis_store.connection)
    marks.invalidate(["t:a"])
    assert marks.seal("t:a", 1, bytes(range(32)))
    dumped = dict(redis_store.connection.dump_values())  # a hash the audit can decode
    assert any(key.endswith("hotsnap:t:a") for key in dumped)


def test_the_directory_keeps_under_its_cap(tmp_path: Path) -> None:
    clock = Clock()
    snapshots = HotSnapshots(tmp_path, MemoryMarks(), "hash/64", max_bytes=0,
                             prune_every_s=300, clock=clock)
    table = HotTable(64)
    vector = EMB.encode([TEXTS[0]])[0]
    table.put(to_record(MemoryItem(id="m1", kind=MemoryKind.EPISODE, text=TEXTS[0]),
                        vector.tolist(), EMB.model_id), vector, None)
    dumped = snapshots.dump({Collection.EPISODES: table})
    assert dumped is not None
    for user in ("t:a", "t:b", "t:c"):
        generation = snapshots.marks.invalidate([user])[user]
        assert snapshots.write(user, generation, dumped)
    size = next(tmp_path.glob("*.snap")).stat().st_size
    snapshots._max_bytes = 2 * size
    (tmp_path / "crash.tmp").write_bytes(b"x")
    os.utime(tmp_path / "crash.tmp", (0, 0))
    assert snapshots.prune() == 2  # the oldest snapshot and the crash's leftover
    assert len(list(tmp_path.glob("*.snap"))) == 2 and not (tmp_path / "crash.tmp").exists()
    snapshots._max_bytes = 0
    assert snapshots.prune() == 0  # listed at most every 5 minutes
    clock.now += 301
    assert snapshots.prune() == 2


def test_a_stopping_shard_seals_its_users_within_a_budget(
        redis_store: RedisStore, durable: CountingStore, tmp_path: Path,
        marks: RedisMarks) -> None:
    shard = make_shard(redis_store, durable, tmp_path, marks, Clock())
    for user in ("a", "b"):
        shard.create_memory(Scope(tenant="t", user=user),
                            MemoryCreate(kind=MemoryKind.EPISODE, text=TEXTS[0]))
    assert hot(shard).seal_all(budget_s=0) == 0  # no time: nothing written
    assert hot(shard).seal_all(budget_s=5) == 2  # not idle, but stopping
    assert hot(shard).seal_all(budget_s=5) == 0  # current already
