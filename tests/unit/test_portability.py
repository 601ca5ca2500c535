"""Export and import of a user's long-term memory (issue #17): the JSON Lines format, its
checks, idempotent re-import and the SDK's chunking, with the in-package doubles."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from strata import AsyncClient, Client
from strata.auth import Principal
from strata.cli import main
from strata.errors import Forbidden, InvalidInput, LimitExceeded
from strata.layers.memories import LongTermMemory
from strata.layers.memory_models import MemoryCreate
from strata.layers.summarize import RuleSummarizer
from strata.layers.transfer import read_scope
from strata.models import (
    Collection,
    MemoryItem,
    MemoryKind,
    MemoryStatus,
    RecallRequest,
    Scope,
    Source,
    StoredRecord,
)
from strata.portability import (
    ExportHeader,
    by_user,
    export_lines,
    float32_decimal,
    parse_export,
    split_export,
)
from strata.recall.service import RecallService
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.redis import RedisStore
from strata.testing.fake_vectors import FakeVectorStore

ANN = Scope(tenant="t", user="ann")
EMB = HashEmbedder(64)
ADMIN = Principal(tenant="t", role="admin")
AGENT = Principal(tenant="t", role="agent")


class CountingStore(FakeVectorStore):
    """The in-memory store, counting the rows written (to prove a re-import writes none)."""

    def __init__(self) -> None:
        super().__init__()
        self.written = 0

    def upsert(self, collection: Collection, scope: Scope,
               records: Sequence[StoredRecord]) -> None:
        self.written += len(records)
        super().upsert(collection, scope, records)

    def insert(self, collection: Collection, scope: Scope,
               records: Sequence[StoredRecord]) -> None:
        self.written += len(records)
        super().insert(collection, scope, records)


@pytest.fixture
def vectors() -> CountingStore:
    store = CountingStore()
    store.ensure_collections(64)
    return store


@pytest.fixture
def shard(redis_store: RedisStore, vectors: CountingStore) -> SessionShardService:
    lt = LongTermMemory(vectors, EMB)
    return SessionShardService(0, Settings(), redis_store, RuleSummarizer(), longterm=lambda: lt)


def populate(shard: SessionShardService) -> None:
    """A fact with history (superseded), an explicit fact from a turn, an episode, an
    exchange, a procedure, and an access count."""
    create = shard.create_memory
    create(ANN, MemoryCreate(kind=MemoryKind.FACT, key="home.city", value="Berlin"))
    create(ANN, MemoryCreate(kind=MemoryKind.FACT, key="home.city", value="Lisbon"))
    create(ANN, MemoryCreate(kind=MemoryKind.FACT, key="seat", value="window",
                             scope_tags=["travel"]))
    shard.append_turn(ANN, "s1", "user", "Remember that I'm allergic to peanuts.")
    episode = create(ANN, MemoryCreate(kind=MemoryKind.EPISODE, session_id="s1",
                                       text="Ann asked to move the Lisbon offsite to May"))
    create(ANN, MemoryCreate(kind=MemoryKind.EPISODE, metadata={"type": "exchange"},
                             text="Q: which seat? A: Ann always takes the window seat"))
    create(ANN, MemoryCreate(kind=MemoryKind.PROCEDURE, key="refunds", metadata={
        "keywords": ["refund"], "steps": ["check the order", "refund to the card"]}))
    shard.reinforce(ANN, [episode["memory"]["id"]])


def export_of(vectors: FakeVectorStore, scope: Scope = ANN) -> str:
    header = ExportHeader(embed_model=EMB.model_id, exported_at=datetime.now(timezone.utc),
                          tenant=scope.tenant, users=[scope.user])
    return "".join(export_lines(header, [(scope.user, read_scope(vectors, scope))]))


def snapshot(vectors: FakeVectorStore, scope: Scope = ANN) -> list[dict[str, Any]]:
    return sorted((i.model_dump(mode="json") for i in read_scope(vectors, scope)),
                  key=lambda d: d["id"])


def recalled(vectors: FakeVectorStore, query: str,
             scope: Scope = ANN) -> list[tuple[str, float]]:
    request = RecallRequest(user_id=scope.user, query=query, top_k=10)
    response = RecallService(vectors).recall(scope, request, EMB.encode([query])[0].tolist())
    return [(i.id, round(i.score, 6)) for i in response.items]


def test_export_delete_import_gives_back_the_same_memories_and_recall(
        shard: SessionShardService, vectors: CountingStore) -> None:
    populate(shard)
    before, recall_before = snapshot(vectors), recalled(vectors, "where does Ann live?")
    statuses = {d["status"] for d in before}
    assert {"active", "superseded"} <= statuses and len(before) == 7
    assert {d["kind"] for d in before} == {"fact", "episode", "procedure"}
    export = export_of(vectors)
    header = json.loads(export.splitlines()[0])
    assert header["format"] == "strata.memories" and header["users"] == ["ann"]
    assert "vector" not in export

    shard.delete_user(ANN)
    assert snapshot(vectors) == []
    counts = shard.import_memories(ANN, parse_export(export).one_user(), admin=True)
    assert counts.model_dump() == {"created": 7, "updated": 0, "unchanged": 0}
    assert snapshot(vectors) == before  # ids, values, statuses, history, times, counts
    old = next(d for d in before if d["status"] == "superseded")
    assert old["superseded_by"] in {d["id"] for d in before} and old["valid_to"]
    assert recalled(vectors, "where does Ann live?") == recall_before


def test_a_second_import_of_the_same_file_writes_nothing(
        shard: SessionShardService, vectors: CountingStore) -> None:
    populate(shard)
    export = export_of(vectors)
    shard.delete_user(ANN)
    items = parse_export(export).one_user()
    shard.import_memories(ANN, items, admin=True)
    written, before = vectors.written, snapshot(vectors)
    again = shard.import_memories(ANN, items, admin=True)
    assert again.model_dump() == {"created": 0, "updated": 0, "unchanged": 7}
    assert vectors.written == written and snapshot(vectors) == before


class Float32Store(CountingStore):
    """The in-memory store keeping confidence as float32, as Milvus's FLOAT column does."""

    def _single(self, records: Sequence[StoredRecord]) -> list[StoredRecord]:
        return [r.model_copy(update={"confidence": float(np.float32(r.confidence))})
                for r in records]

    def upsert(self, collection: Collection, scope: Scope,
               records: Sequence[StoredRecord]) -> None:
        super().upsert(collection, scope, self._single(records))

    def insert(self, collection: Collection, scope: Scope,
               records: Sequence[StoredRecord]) -> None:
        super().insert(collection, scope, self._single(records))


def test_export_writes_a_float32_confidence_as_the_decimal_it_was(
        redis_store: RedisStore) -> None:
    vectors = Float32Store()
    vectors.ensure_collections(64)
    lt = LongTermMemory(vectors, EMB)
    shard = SessionShardService(0, Settings(), redis_store, RuleSummarizer(),
                                longterm=lambda: lt)
    shard.create_memory(ANN, MemoryCreate(kind=MemoryKind.FACT, key="seat", value="window",
                                          confidence=0.9))
    shard.create_memory(ANN, MemoryCreate(kind=MemoryKind.FACT, key="diet", value="vegan",
                                          confidence=0.123456789))
    stored = {i.key: i.confidence for i in read_scope(vectors, ANN)}
    assert stored["seat"] == 0.8999999761581421  # what the store gives back
    export = export_of(vectors)
    assert '"confidence": 0.9,' in export and "0.89999" not in export
    written = {m["key"]: m["confidence"] for m in map(json.loads, export.splitlines()[1:])}
    assert written == {"seat": 0.9, "diet": 0.12345679}

    shard.delete_user(ANN)
    shard.import_memories(ANN, parse_export(export).one_user(), admin=True)
    assert {i.key: i.confidence for i in read_scope(vectors, ANN)} == stored  # same float32
    again = shard.import_memories(ANN, parse_export(export).one_user(), admin=True)
    assert again.model_dump() == {"created": 0, "updated": 0, "unchanged": 2}


@pytest.mark.parametrize("value", [0.0, 1e-7, 0.0123456, 0.3333333, 0.8, 0.9, 1.0])
def test_float32_decimal_is_short_and_the_same_float32(value: float) -> None:
    single = float(np.float32(value))
    assert float32_decimal(single) == value
    assert np.float32(float32_decimal(single)) == np.float32(single)


def test_a_changed_line_is_updated_and_only_its_text_re_embedded(
        shard: SessionShardService, vectors: CountingStore) -> None:
    populate(shard)
    export = export_of(vectors)
    lines = export.splitlines()
    episode = next(n for n, line in enumerate(lines) if "offsite" in line)
    edited = json.loads(lines[episode]) | {"text": "Ann moved the Lisbon offsite to June"}
    lines[episode] = json.dumps(edited)
    written = vectors.written
    counts = shard.import_memories(ANN, parse_export("\n".join(lines)).one_user(), admin=True)
    assert counts.model_dump() == {"created": 0, "updated": 1, "unchanged": 6}
    assert vectors.written == written + 1
    row = vectors.get(Collection.EPISODES, ANN, [edited["id"]])[0]
    assert row.vector == EMB.encode([edited["text"]])[0].tolist()


def test_import_into_another_user_keeps_ids_and_leaves_the_source_alone(
        shard: SessionShardService, vectors: CountingStore) -> None:
    populate(shard)
    export = export_of(vectors)
    bob = Scope(tenant="t", user="bob")
    shard.import_memories(bob, parse_export(export).one_user(), admin=True)
    assert [d["id"] for d in snapshot(vectors, bob)] == [d["id"] for d in snapshot(vectors)]
    assert snapshot(vectors, bob) == snapshot(vectors)


@pytest.mark.parametrize(("change", "named"), [
    (lambda lines: lines.insert(2, "{not json"), "line 3: not JSON"),
    (lambda lines: lines.__setitem__(2, json.dumps(json.loads(lines[2]) | {"status": "gone"})),
     "line 3: not a memory: status"),
    (lambda lines: lines.__setitem__(2, json.dumps(json.loads(lines[2]) | {"extra": 1})),
     "line 3: not a memory: extra"),
    (lambda lines: lines.__setitem__(2, json.dumps(json.loads(lines[2]) | {"id": "../x"})),
     "line 3: not a memory: id"),
    (lambda lines: lines.__setitem__(2, lines[3]), r"line 4: id .* again \(first on line 3\)"),
    (lambda lines: lines.__setitem__(0, json.dumps(json.loads(lines[0]) | {"version": 9})),
     "line 1: not the header"),
    (lambda lines: lines.__setitem__(2, json.dumps(json.loads(lines[2]) | {
        "text": "my password is hunter2hunter2"})), "line 3: text contains sensitive data"),
    (lambda lines: lines.__setitem__(2, "[1, 2]"), "line 3: not a JSON object"),
])
def test_a_bad_line_is_named_and_nothing_is_written(
        shard: SessionShardService, vectors: CountingStore, change: Any, named: str) -> None:
    populate(shard)
    lines = export_of(vectors).splitlines()
    shard.delete_user(ANN)
    change(lines)
    with pytest.raises(InvalidInput, match=named):
        parse_export("\n".join(lines))
    assert snapshot(vectors) == []


def test_an_empty_body_is_refused() -> None:
    with pytest.raises(InvalidInput, match="line 1: empty"):
        parse_export(b"\n\n")


def test_an_agent_key_imports_no_procedure_and_no_admin_memory(
        shard: SessionShardService, vectors: CountingStore) -> None:
    populate(shard)
    export = export_of(vectors)
    parse_export(export).require_may_write(ADMIN)
    with pytest.raises(Forbidden, match=r"line \d+: only an admin key may .* procedures"):
        parse_export(export).require_may_write(AGENT)
    without = "\n".join(line for line in export.splitlines() if '"procedure"' not in line)
    parse_export(without).require_may_write(AGENT)  # facts and episodes are an agent's
    admin_source = [json.loads(line) for line in without.splitlines()]
    admin_source[1]["source"] = "admin"
    with pytest.raises(Forbidden, match=r"line 2: .*source is admin"):
        parse_export("\n".join(map(json.dumps, admin_source))).require_may_write(AGENT)


def test_an_agent_import_may_not_overwrite_an_admin_memory(
        shard: SessionShardService, vectors: CountingStore) -> None:
    populate(shard)
    items = [i for i in read_scope(vectors, ANN) if i.kind is MemoryKind.FACT]
    shard.import_memories(ANN, [items[0].model_copy(update={"source": Source.ADMIN})], admin=True)
    written, before = vectors.written, snapshot(vectors)
    with pytest.raises(Forbidden, match="admin"):
        shard.import_memories(ANN, items, admin=False)  # the same id, back to user_stated
    assert vectors.written == written and snapshot(vectors) == before


def test_the_procedure_cap_holds_for_imports(redis_store: RedisStore,
                                             vectors: CountingStore) -> None:
    lt = LongTermMemory(vectors, EMB, procedure_cap=2)
    shard = SessionShardService(0, Settings(), redis_store, RuleSummarizer(), longterm=lambda: lt)
    procedures = [MemoryItem(id=f"p{n}", kind=MemoryKind.PROCEDURE, key=f"rule {n}",
                             text=f"rule {n} — when: always", source=Source.ADMIN)
                  for n in range(3)]
    with pytest.raises(LimitExceeded, match="cap is 2"):
        shard.import_memories(ANN, procedures, admin=True)
    assert vectors.written == 0
    retired = procedures[2].model_copy(update={"status": MemoryStatus.DEPRECATED})
    assert shard.import_memories(ANN, [*procedures[:2], retired], admin=True).created == 3


def test_a_tenant_export_is_one_user_per_import(shard: SessionShardService,
                                                vectors: CountingStore) -> None:
    populate(shard)
    bob = Scope(tenant="t", user="bob")
    shard.create_memory(bob, MemoryCreate(kind=MemoryKind.FACT, key="pet", value="a cat"))
    header = ExportHeader(embed_model=EMB.model_id, exported_at=datetime.now(timezone.utc),
                          tenant="t", users=["ann", "bob"])
    export = "".join(export_lines(header, [(s.user, read_scope(vectors, s)) for s in (ANN, bob)]))
    with pytest.raises(InvalidInput, match="line 9: user 'bob' after 'ann'"):
        parse_export(export).one_user()
    parts = by_user(export)
    assert sorted(parts) == ["ann", "bob"]
    assert len(parse_export(parts["bob"]).one_user()) == 1
    assert len(parse_export(parts["ann"]).one_user()) == 7


def test_split_export_makes_valid_chunks_under_the_size(shard: SessionShardService,
                                                        vectors: CountingStore) -> None:
    populate(shard)
    export = export_of(vectors)
    size = max(len(line.encode()) for line in export.splitlines()) * 3
    chunks = split_export(export, size)
    assert len(chunks) > 1 and all(len(c.encode()) <= size for c in chunks)
    ids = [line.id for c in chunks for _, line in parse_export(c).lines]
    assert ids == [line.id for _, line in parse_export(export).lines]
    with pytest.raises(ValueError, match="over the chunk size"):
        split_export(export, 100)


def serving(shard: SessionShardService, seen: list[httpx.Request]) -> httpx.MockTransport:
    """The import route's work (parse whole, then import into the path's user) in-process."""
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.method == "GET":  # /v1/export: the tenant's users, as the route does
            users = [u.user for u in shard._redis.users.all()]
            header = ExportHeader(embed_model=EMB.model_id, tenant="t", users=users,
                                  exported_at=datetime.now(timezone.utc))
            vectors = shard.longterm.vectors
            return httpx.Response(200, text="".join(export_lines(header, [
                (u, read_scope(vectors, Scope(tenant="t", user=u))) for u in users])))
        user = request.url.path.split("/")[3]
        try:
            items = parse_export(request.content).one_user()
        except InvalidInput as exc:
            return httpx.Response(422, json=exc.to_dict())
        counts = shard.import_memories(Scope(tenant="t", user=user), items, admin=True)
        return httpx.Response(200, json={"lines": len(items), **counts.model_dump()})

    return httpx.MockTransport(handle)


def test_the_sdk_imports_in_chunks_sync_and_async(shard: SessionShardService,
                                                  vectors: CountingStore) -> None:
    populate(shard)
    export = export_of(vectors)
    before = snapshot(vectors)
    shard.delete_user(ANN)
    seen: list[httpx.Request] = []
    size = max(len(line.encode()) for line in export.splitlines()) * 3
    client = Client("http://x", api_key="k", transport=serving(shard, seen))
    first = client.import_user("ann", export, chunk_bytes=size)
    assert first["chunks"] == len(seen) > 1
    assert {k: first[k] for k in ("lines", "created", "unchanged")} == {
        "lines": 7, "created": 7, "unchanged": 0}
    assert all(r.headers["content-type"] == "application/x-ndjson" for r in seen)
    assert snapshot(vectors) == before

    async def again() -> Any:
        async with AsyncClient("http://x", api_key="k",
                               transport=serving(shard, seen)) as aclient:
            return await aclient.import_user("ann", export, chunk_bytes=size)

    second = asyncio.run(again())
    assert (second["created"], second["updated"], second["unchanged"]) == (0, 0, 7)


def test_the_sdk_sends_nothing_of_a_bad_file(shard: SessionShardService) -> None:
    seen: list[httpx.Request] = []
    client = Client("http://x", api_key="k", transport=serving(shard, seen))
    good = json.dumps({"format": "strata.memories", "version": 1, "embed_model": "m",
                       "exported_at": "2026-01-01T00:00:00Z", "tenant": "t", "users": ["ann"]})
    line = json.dumps({"user_id": "ann", "id": "m1", "kind": "fact", "text": "a: b"})
    with pytest.raises(InvalidInput, match="line 3"):
        client.import_user("ann", "\n".join([good, line, "{"]), chunk_bytes=len(good) + 200)
    assert seen == []


def test_the_cli_exports_a_tenant_and_imports_one_user_of_it(
        shard: SessionShardService, vectors: CountingStore, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    populate(shard)
    bob = Scope(tenant="t", user="bob")
    shard.create_memory(bob, MemoryCreate(kind=MemoryKind.FACT, key="pet", value="a cat"))
    before = snapshot(vectors, bob)
    seen: list[httpx.Request] = []
    server = serving(shard, seen)
    out = tmp_path / "t.jsonl"
    assert main(["--url", "http://x", "--api-key", "k", "export", "-o", str(out)],
                transport=server) == 0
    assert (seen[0].method, seen[0].url.path) == ("GET", "/v1/export")
    shard.delete_user(bob)
    assert main(["--url", "http://x", "--api-key", "k", "import", "bob", str(out),
                 "--from-user", "bob", "--chunk-bytes", "4096"], transport=server) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["lines"], printed["created"]) == (1, 1)
    assert snapshot(vectors, bob) == before
    assert main(["--url", "http://x", "--api-key", "k", "import", "bob", str(out)],
                transport=server) == 1
    assert "user 'bob' after 'ann'" in capsys.readouterr().err  # one user per import
