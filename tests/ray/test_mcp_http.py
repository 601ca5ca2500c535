"""Issue #17 over streamable HTTP: the MCP SDK's own client against ``/mcp`` of the real
Serve app. The caller's API key decides the tenant; no key, or a wrong one, gets 401."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from live import live_app
from mcp import MCPError
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from strata.tools import TOOLS

ACME = "acme-key"
GLOBEX = "globex-key"
MAX_BODY = 64 * 1024


@pytest.fixture(scope="module")
def base(ray_session: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with live_app(tmp_path_factory.mktemp("mcp-http"), embedder="hash", hash_dim=64,
                  session_shards=2, extractors=0, max_body_bytes=MAX_BODY,
                  api_keys={ACME: {"tenant": "acme", "role": "agent"},
                            GLOBEX: {"tenant": "globex", "role": "agent"}}) as (url, _):
        yield url


@asynccontextmanager
async def mcp_session(base: str, key: str) -> AsyncIterator[ClientSession]:
    """An initialised MCP session over streamable HTTP, presenting ``key``."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http,
        streamable_http_client(f"{base}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> Any:
    result = await session.call_tool(tool, arguments)
    text = result.content[0].text  # type: ignore[union-attr]
    assert not result.is_error, text
    return json.loads(text)


def test_memory_tools_over_http_in_the_key_s_tenant_only(base: str) -> None:
    async def run() -> tuple[Any, ...]:
        async with mcp_session(base, ACME) as acme:
            listed = await acme.list_tools()
            for role, content in (("user", "Hi, I'm Ann."),
                                  ("user", "I always book a window seat.")):
                await call(acme, "add_turn", {"user_id": "ann", "session_id": "s1",
                                              "role": role, "content": content})
            remembered = await call(acme, "remember", {
                "user_id": "ann", "key": "preference.seat", "value": "window"})
            found = await call(acme, "search_memories", {"user_id": "ann", "query": "window"})
            recalled = await call(acme, "recall", {"user_id": "ann", "session_id": "s1",
                                                   "query": "which seat does Ann like?"})
        async with mcp_session(base, GLOBEX) as globex:
            theirs = await call(globex, "list_memories", {"user_id": "ann"})
            their_recall = await call(globex, "recall", {"user_id": "ann", "session_id": "s1",
                                                         "query": "which seat?"})
            missing = await globex.call_tool("forget", {
                "user_id": "ann", "memory_id": remembered["memory"]["id"]})
        return listed, found, recalled, theirs, their_recall, missing

    listed, found, recalled, theirs, their_recall, missing = asyncio.run(run())
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == set(TOOLS)
    assert tools["recall"].description == TOOLS["recall"].description
    assert "user_id" in tools["recall"].input_schema["required"]  # nothing bound over HTTP
    assert [m["key"] for m in found["memories"]] == ["preference.seat"]
    assert "window" in recalled["context"]
    assert "window seat" in recalled["context"]  # the session's turns, from working memory
    # the other tenant's key: same user id, nothing of acme's
    assert theirs["memories"] == []
    assert "window" not in their_recall["context"]
    assert missing.is_error and "not_found" in missing.content[0].text


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-key"},
                                     {"Authorization": "Basic YWNtZS1rZXk="}])
def test_no_key_or_a_wrong_one_is_refused_before_the_mcp_server(
        base: str, headers: dict[str, str]) -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}}
    resp = httpx.post(f"{base}/mcp", json=initialize, timeout=30, headers={
        **headers, "Accept": "application/json, text/event-stream"})
    assert resp.status_code == 401, resp.text
    body = resp.json()  # a JSON-RPC error, which the MCP client reads; Strata's shape in data
    assert (body["jsonrpc"], body["id"], body["error"]["code"]) == ("2.0", None, -32600)
    assert body["error"]["message"].startswith("unauthorized: ")
    assert body["error"]["data"]["error"] == "unauthorized"
    assert resp.headers["www-authenticate"].startswith('Bearer error="invalid_token"')


def test_the_body_limit_holds_for_mcp_too(base: str) -> None:
    call_ = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "remember", "arguments": {"user_id": "ann", "kind": "episode",
                                          "text": "x" * MAX_BODY}}}
    resp = httpx.post(f"{base}/mcp", json=call_, timeout=30, headers={
        "Authorization": f"Bearer {ACME}", "Accept": "application/json, text/event-stream"})
    assert resp.status_code == 413, resp.text
    assert resp.json()["error"] == "payload_too_large"


def test_the_sdk_client_with_a_wrong_key_is_told_why(base: str) -> None:
    async def run() -> None:
        async with mcp_session(base, "wrong-key"):
            pass

    with pytest.raises(Exception) as caught:  # an ExceptionGroup: the SDK's task groups wrap it
        asyncio.run(run())
    # what stdio says too, not the SDK's "Server returned an error response"
    assert caught.group_contains(MCPError, match=r"^unauthorized: unknown API key$")
