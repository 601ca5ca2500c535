"""Verifiable forgetting: after a delete and its purge, the text is in no file on disk.

Real stores in a directory of the test's own: an embedded redis-server (AOF on) under
``<dir>/redis`` and milvus-lite at ``<dir>/milvus.db``, as ``strata serve`` lays them out.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from strata.layers.forgetting import (
    FORGET_BOUND_S,
    FilePurge,
    data_files,
    find_residue,
    wait_forgotten,
)
from strata.layers.memories import LongTermMemory
from strata.layers.memory_models import MemoryCreate
from strata.layers.summarize import RuleSummarizer
from strata.models import Collection, MemoryKind, Scope, StoredRecord
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.hot import HotIndexStore
from strata.stores.keys import SessionRef, parse_scope_key
from strata.stores.milvus import FlushPolicy, MilvusVectorStore
from strata.stores.ports import PurgeReport
from strata.stores.redis import RedisStore
from strata.stores.redis_server import EmbeddedRedis

EMB = HashEmbedder(64)
U = Scope(tenant="t", user="u")
KEEP = Scope(tenant="t", user="keep")
PHRASE = "Quokkaplum7731"
CONTROL = "Wombatberry5519"


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path


@pytest.fixture
def redis(data_dir: Path) -> Iterator[RedisStore]:
    with EmbeddedRedis(data_dir / "redis") as server:
        store = RedisStore(server.url)
        yield store
        store.close()


@pytest.fixture
def milvus(data_dir: Path) -> Iterator[MilvusVectorStore]:
    store = MilvusVectorStore(str(data_dir / "milvus.db"), prefix="c_",
                              flush_policy=FlushPolicy(max_unflushed_rows=10_000))
    store.ensure_collections(EMB.dim)
    yield store
    store.close()


@pytest.fixture
def shard(redis: RedisStore, milvus: MilvusVectorStore) -> SessionShardService:
    lt = LongTermMemory(HotIndexStore(milvus, EMB.dim, tokens=lambda: EMB), EMB)
    return SessionShardService(0, Settings(), redis, RuleSummarizer(), longterm=lambda: lt)


def rec(rid: str, text: str) -> StoredRecord:
    return StoredRecord(id=rid, text=text, vector=EMB.encode([text])[0].tolist(),
                        status="active", created_at=1.0, updated_at=1.0, confidence=0.9,
                        embed_model=EMB.model_id, payload={"note": text})


def on_disk(data_dir: Path, phrase: str, timeout_s: float = 3.0) -> int:
    """Copies of the phrase in the files, once the AOF's once-a-second fsync has run."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = sum(r.count for r in find_residue(data_dir, phrase))
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def remember(shard: SessionShardService, scope: Scope, session: str, word: str) -> None:
    shard.append_turn(scope, session, "user", f"Remember that my codename is {word}.")
    shard.create_memory(scope, MemoryCreate(kind=MemoryKind.EPISODE, session_id=session,
                                            text=f"talked about the codename {word} at length"))
    shard.append_turn(scope, session, "user", f"{word} is also my wifi name")


@pytest.mark.redis  # its own redis-server, in the test's data dir
def test_a_deleted_user_leaves_no_copy_in_the_aof_or_the_milvus_files(
        shard: SessionShardService, milvus: MilvusVectorStore, data_dir: Path) -> None:
    remember(shard, U, "s1", PHRASE)
    shard.close(U, "s1")
    remember(shard, KEEP, "s9", CONTROL)
    shard.flush_snapshots()
    milvus.flush()
    assert on_disk(data_dir, PHRASE) > 0 and on_disk(data_dir, CONTROL) > 0

    shard.delete_user(U)
    assert shard.file_purge.wait_idle(FORGET_BOUND_S)

    assert find_residue(data_dir, PHRASE) == []
    assert on_disk(data_dir, CONTROL) > 0  # the grep still sees what was kept
    assert all(milvus.count(c, U) == 0 for c in Collection)
    assert milvus.count(Collection.FACTS, KEEP) == 1  # the rewrite kept the live rows
    assert shard.file_purge.purges == 1


@pytest.mark.redis  # its own redis-server, in the test's data dir
def test_a_deleted_memory_leaves_no_copy_of_its_turns_or_text(
        shard: SessionShardService, milvus: MilvusVectorStore, data_dir: Path) -> None:
    shard.append_turn(U, "s1", "user", f"Remember that my codename is {PHRASE}.")
    shard.append_turn(U, "s1", "user", f"Remember that my dog is called {CONTROL}.")
    shard.flush_snapshots()
    milvus.flush()
    fact = next(m for m in shard.list_memories(U, MemoryKind.FACT, None, None, 10)
                if PHRASE in m.text)
    assert on_disk(data_dir, PHRASE) > 0

    shard.delete_memory(U, fact.id)
    check = wait_forgotten(data_dir, PHRASE, bound_s=FORGET_BOUND_S, poll_s=0.1)

    assert check.forgotten, check.remaining
    assert check.waited_s < FORGET_BOUND_S
    assert shard.file_purge.wait_idle(FORGET_BOUND_S)  # done before the stores stop
    assert on_disk(data_dir, CONTROL) > 0


def test_without_a_purge_the_deleted_rows_stay_in_the_milvus_files(
        milvus: MilvusVectorStore, data_dir: Path) -> None:
    """The finding of #15: delete and flush leave the row in its segment file."""
    milvus.insert(Collection.FACTS, U, [rec(f"a{i}", f"{PHRASE} number {i}") for i in range(5)])
    milvus.insert(Collection.FACTS, KEEP, [rec("k", f"{CONTROL} stays")])
    milvus.flush()
    milvus.delete_scope(Collection.FACTS, U)
    milvus.flush()
    assert on_disk(data_dir, PHRASE) > 0

    report = milvus.purge_deleted()

    assert report == PurgeReport(collections=["facts"], files_rewritten=report.files_rewritten)
    assert report.files_rewritten >= 1 and report.complete
    assert find_residue(data_dir, PHRASE) == []
    assert [r.text for r in milvus.query(Collection.FACTS, KEEP)] == [f"{CONTROL} stays"]
    assert milvus.purge_deleted() == PurgeReport()  # nothing deleted since: nothing to do


@pytest.mark.redis  # its own redis-server, in the test's data dir
def test_without_a_rewrite_deleted_keys_stay_in_the_aof(redis: RedisStore,
                                                        data_dir: Path) -> None:
    for key, said in (("t:u:s1", PHRASE), ("t:keep:s1", CONTROL)):
        record = {"op": "turn", "turn": {"content": f"I am {said}"}}
        redis.sessions.append(SessionRef.parse(key), record)
    redis.sessions.delete_user(parse_scope_key("t:u"))
    assert on_disk(data_dir, PHRASE) > 0  # deleted, but the AOF still has the XADD

    FilePurge(redis.aof, None).purge_now()

    assert find_residue(data_dir, PHRASE) == []
    assert on_disk(data_dir, CONTROL) > 0


class _SlowVectors:
    """A ``Purging`` store whose first purge blocks until the test lets it go."""

    def __init__(self) -> None:
        self.calls = 0
        self.entered = threading.Event()
        self.release = threading.Event()

    def purge_deleted(self) -> PurgeReport:
        self.calls += 1
        self.entered.set()
        self.release.wait(10)
        return PurgeReport()


def test_requests_during_a_purge_coalesce_into_one_more_purge(redis_store: RedisStore) -> None:
    vectors = _SlowVectors()
    purge = FilePurge(redis_store.aof, vectors)
    purge.request()
    assert vectors.entered.wait(10)  # the first purge runs (and blocks)
    for _ in range(5):  # deletes that happen meanwhile
        purge.request()
    assert not purge.wait_idle(0.1)
    vectors.release.set()
    assert purge.wait_idle(FORGET_BOUND_S)
    assert vectors.calls == 2  # one for the first delete, one after the five others


def test_a_copy_across_two_read_chunks_is_found_once(tmp_path: Path) -> None:
    (tmp_path / "redis").mkdir()
    blob = b"x" * ((1 << 20) - 5) + PHRASE.encode() + b"y" * 10 + PHRASE.encode()
    (tmp_path / "redis" / "f.aof").write_bytes(blob)
    [residue] = find_residue(tmp_path, PHRASE)
    assert (residue.path, residue.count) == ("redis/f.aof", 2)
    with pytest.raises(ValueError):
        find_residue(tmp_path, "")


def test_a_check_that_scanned_no_file_is_not_a_success(tmp_path: Path) -> None:
    """The finding of #40: ``--verify`` said forgotten for a data dir that held nothing."""
    assert data_files(tmp_path / "missing") == []
    check = wait_forgotten(tmp_path / "missing", PHRASE, bound_s=0.1, poll_s=0.05)
    assert check.remaining == [] and check.files_scanned == 0
    assert not check.forgotten
    (tmp_path / "redis").mkdir()
    (tmp_path / "redis" / "appendonly.aof").write_bytes(b"SET k v\n")
    check = wait_forgotten(tmp_path, PHRASE, bound_s=0.1, poll_s=0.05)
    assert check.forgotten and (check.files_scanned, check.bytes_scanned) == (1, 8)
