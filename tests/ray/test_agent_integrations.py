"""Where agents live, against the real Serve app: the SDK, the LLM tools, and ``strata mcp``
launched as a subprocess and driven by the official MCP client over stdio."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live import wait_status
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from serve_app import main
from strata import Client
from strata.errors import InvalidInput, NotFound
from strata.settings import Settings
from strata.stores.redis_server import EmbeddedRedis, free_port
from strata.tools import dispatch

KEYS = {"key-acme": {"tenant": "acme", "role": "admin"},
        "key-globex": {"tenant": "globex", "role": "admin"}}
STRATA = Path(sys.executable).parent / "strata"


@pytest.fixture(scope="module")
def base(ray_session: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("agents")
    redis_server = EmbeddedRedis(tmp / "redis").start()
    settings = Settings(data_dir=tmp, embedder="hash", hash_dim=64, http_port=free_port(),
                        redis_url=redis_server.url, api_keys=KEYS)  # type: ignore[arg-type]
    main.start(settings)
    url = f"http://127.0.0.1:{settings.http_port}"
    wait_status(f"{url}/readyz", 200, timeout_s=120)
    try:
        yield url
    finally:
        main.stop(settings, shutdown_ray=False)
        redis_server.stop()


def test_the_sdk_reaches_every_endpoint_it_names(base: str) -> None:
    acme = Client(base, api_key="key-acme")
    assert acme.whoami() == {"tenant": "acme", "role": "admin", "agent": None}
    assert acme.health() == {"status": "ok"} and acme.ready()["ready"]
    ack = acme.add_turn("s1", "ann", "user", "I prefer window seats.")
    assert re.fullmatch(r"c-[0-9a-f]{32}", ack["turn_id"])
    retried = acme.add_turn("s1", "ann", "user", "I prefer window seats.",
                            turn_id=ack["turn_id"])
    assert retried["duplicate"] and retried["turn_count"] == 1
    acks = acme.add_turns("s1", "ann", [{"role": "assistant", "content": "Noted."}])["acks"]
    assert acks[0]["turn_count"] == 2 and acks[0]["turn_id"].startswith("c-")

    made = acme.remember("ann", key="preference.seat", value="window")
    memory_id = made["memory"]["id"]
    assert [m["id"] for m in acme.memories("ann", kind="fact")["memories"]] == [memory_id]
    assert acme.history("ann", memory_id)["versions"][0]["id"] == memory_id
    assert "ann" in acme.users()["users"] and acme.queues()["tenant"] == "acme"
    assert Client(base, api_key="key-globex").memories("ann")["memories"] == []

    acme.import_documents([{"doc_id": "guide/setup", "title": "Setup",
                            "text": "Install Strata with make run, then open the inspector."}])
    assert acme.document("guide/setup")["chunks"]  # a folder id: %2F reaches the :path route
    assert [d["doc_id"] for d in acme.documents()["documents"]] == ["guide/setup"]
    with pytest.raises(ValueError):
        acme.forget("ann", "..")
    with pytest.raises(InvalidInput, match=r"got 'no such id\?'"):  # one segment, intact
        acme.history("ann", "no such id?")
    with pytest.raises(NotFound):
        acme.history("ann", "m-404")
    assert "strata_" in acme.metrics()


def test_a_dispatched_tool_call_reaches_the_users_memory(base: str) -> None:
    acme = Client(base, api_key="key-acme")
    stored = dispatch(acme, "remember", '{"key": "diet.allergy", "value": "peanuts"}',
                      user_id="bea")
    assert stored["memory"]["text"] and "error" not in stored
    found = dispatch(acme, "search_memories", {"query": "peanuts"}, user_id="bea")
    assert [m["id"] for m in found["memories"]] == [stored["memory"]["id"]]
    recalled = dispatch(acme, "recall", {"query": "do I have a diet allergy, to peanuts?"},
                        user_id="bea")
    assert "peanuts" in recalled["context"]
    gone = dispatch(acme, "forget", {"memory_id": stored["memory"]["id"]}, user_id="bea")
    assert gone["deleted"] == stored["memory"]["id"]
    assert dispatch(acme, "list_memories", {}, user_id="bea")["memories"] == []


async def _mcp_session(base: str, key: str, *calls: tuple[str, dict[str, Any]]
                       ) -> tuple[list[str], list[Any]]:
    server = StdioServerParameters(command=str(STRATA), args=[
        "--url", base, "--api-key", key, "mcp", "--user", "cy"])
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = [t.name for t in (await session.list_tools()).tools]
        results = [await session.call_tool(name, arguments) for name, arguments in calls]
    return tools, results


def test_strata_mcp_over_stdio_with_the_services_keys(base: str) -> None:
    tools, (remembered, recalled, listed) = asyncio.run(_mcp_session(
        base, "key-acme",
        ("remember", {"key": "preference.seat", "value": "aisle"}),
        ("recall", {"query": "which seat does cy prefer? aisle or window"}),
        ("list_memories", {"kind": "fact"})))
    assert sorted(tools) == ["add_turn", "close_session", "forget", "job_status",
                             "list_memories", "recall", "remember", "search_knowledge",
                             "search_memories"]
    assert not remembered.is_error and not recalled.is_error
    assert "aisle" in json.loads(recalled.content[0].text)["context"]
    assert [m["text"] for m in json.loads(listed.content[0].text)["memories"]] == [
        json.loads(remembered.content[0].text)["memory"]["text"]]
    # another tenant's key sees nothing of it; a wrong key is an error the client sees
    _, (other,) = asyncio.run(_mcp_session(base, "key-globex", ("list_memories", {})))
    assert json.loads(other.content[0].text)["memories"] == []
    _, (refused,) = asyncio.run(_mcp_session(base, "nope", ("list_memories", {})))
    assert refused.is_error and "unauthorized: 401" in refused.content[0].text
