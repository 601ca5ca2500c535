"""An export reads each user through the user's shard (``SessionShardService.export_memories``)
and the route streams it, user by user, in the export format; the route takes its services as
FastAPI dependencies, so this test hands it a shard directory over a real in-process shard
(no Ray)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from serve_app import guards
from serve_app.clients import EmbedderClient
from serve_app.routes import deps, portability
from serve_app.services import UserExport
from strata.auth import Principal
from strata.layers.memory_models import MemoryCreate
from strata.layers.transfer import read_scope
from strata.models import MemoryKind, Scope
from strata.portability import parse_export
from strata.shard.service import SessionShardService
from strata.testing.fake_vectors import FakeVectorStore

U = Scope(tenant="t", user="u")
V = Scope(tenant="t", user="v")


class _Method:
    """``handle.method.remote(...)``: the call made now, its result awaited like a ref."""

    def __init__(self, call: Callable[..., Any], calls: list[str], name: str) -> None:
        self._call, self._calls, self._name = call, calls, name

    def remote(self, *args: Any) -> asyncio.Future[Any]:
        self._calls.append(self._name)
        future = asyncio.get_running_loop().create_future()
        future.set_result(self._call(*args))
        return future


class _Handle:
    def __init__(self, target: Any, calls: list[str]) -> None:
        self._target, self._calls = target, calls

    def __getattr__(self, name: str) -> _Method:
        return _Method(getattr(self._target, name), self._calls, name)


class _Shards:
    """A directory of one shard (the real service, in process)."""

    def __init__(self, shard: SessionShardService) -> None:
        self.calls: list[str] = []
        self._handle = _Handle(shard, self.calls)

    def for_scope(self, scope: Scope) -> _Handle:
        return self._handle


class _Registry:
    def all(self) -> list[Scope]:
        return [U, V, Scope(tenant="other", user="w")]


class _Redis:
    users = _Registry()


def _write(shard: SessionShardService) -> None:
    shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text="planned a trip to Oslo"))
    shard.create_memory(U, MemoryCreate(kind=MemoryKind.FACT, key="diet", value="vegetarian",
                                        text="is vegetarian"))
    shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text="a private note",
                                        agent="coach", visibility="private"))
    shard.create_memory(V, MemoryCreate(kind=MemoryKind.EPISODE, text="likes chess"))


def test_the_shard_reads_what_the_store_holds_in_order(shard: SessionShardService,
                                                       vectors: FakeVectorStore) -> None:
    _write(shard)
    items = shard.export_memories(U)
    assert [i.id for i in items] == [i.id for i in read_scope(vectors, U)]
    assert [i.kind for i in items] == [MemoryKind.FACT, MemoryKind.EPISODE, MemoryKind.EPISODE]
    seen = [i.text for i in shard.export_memories(U, viewer="other-agent")]
    assert "a private note" not in seen and "planned a trip to Oslo" in seen


def _app(shards: _Shards, principal: Principal) -> TestClient:
    info = {"dim": 64, "model_id": "hash-64"}
    embedder = EmbedderClient(_Handle(type("Info", (), {"info": lambda self: info})(), []))
    api = FastAPI()
    guards.install(api, body_limit=lambda: 1_000_000)
    api.include_router(portability.router)
    api.dependency_overrides[deps.caller] = lambda: principal
    api.dependency_overrides[deps.export] = lambda: UserExport(shards, embedder)  # type: ignore[arg-type]
    api.dependency_overrides[deps.redis] = lambda: _Redis()
    return TestClient(api)


def test_the_export_route_streams_each_user_read_by_its_shard(
        shard: SessionShardService) -> None:
    _write(shard)
    shards = _Shards(shard)
    client = _app(shards, Principal(tenant="t", role="admin"))
    resp = client.get("/v1/export")
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("application/x-ndjson")
    header, *lines = [json.loads(line) for line in resp.text.splitlines()]
    assert header["users"] == ["u", "v"] and header["embed_model"] == "hash-64"
    assert [(line["user_id"], line["text"]) for line in lines] == [
        ("u", "is vegetarian"), ("u", "planned a trip to Oslo"), ("u", "a private note"),
        ("v", "likes chess")]
    # per user, one read of its memories and one of its entity view edits (none here)
    assert shards.calls == ["export_memories", "export_entity_edits"] * 2
    assert len(parse_export(resp.text).lines) == 4  # what an import reads back


def test_an_agent_key_exports_what_its_agent_may_see(shard: SessionShardService) -> None:
    _write(shard)
    client = _app(_Shards(shard), Principal(tenant="t", role="agent", agent="planner"))
    resp = client.get("/v1/users/u/export")
    assert resp.status_code == 200, resp.text
    texts = [json.loads(line).get("text") for line in resp.text.splitlines()[1:]]
    assert texts == ["is vegetarian", "planned a trip to Oslo"]
