"""The MCP server in process (the SDK's in-memory client), against a fake Strata."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from mcp import Client as McpClient

from strata import AsyncClient
from strata.client import NO_RETRY
from strata.mcp_server import build_server
from strata.tools import TOOLS


def fake_strata(sent: list[tuple[str, str, Any]]) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        sent.append((request.method, request.url.raw_path.decode(), body))
        if request.url.path == "/v1/recall":
            return httpx.Response(200, json={"context": "[facts] seat: window", "items": [],
                                             "route": "personal"})
        if request.method == "DELETE":
            return httpx.Response(404, json={"error": "not_found", "detail": "no memory"})
        return httpx.Response(200, json={"memory": {"id": "m1"}})

    return httpx.MockTransport(answer)


def test_tools_are_listed_with_the_bound_user_left_out_and_call_strata() -> None:
    sent: list[tuple[str, str, Any]] = []

    async def run() -> tuple[Any, Any, Any, Any]:
        strata = AsyncClient("http://x", api_key="k", transport=fake_strata(sent),
                             retry=NO_RETRY)
        async with strata, McpClient(build_server(strata, {"user_id": "ann"})) as mcp:
            listed = await mcp.list_tools()
            recalled = await mcp.call_tool("recall", {"query": "which seat?"})
            missing = await mcp.call_tool("forget", {"memory_id": "m9"})
            invalid = await mcp.call_tool("remember", {"key": "preference.seat"})
            return listed, recalled, missing, invalid

    listed, recalled, missing, invalid = asyncio.run(run())
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == set(TOOLS)
    assert all("user_id" not in t.input_schema["properties"] for t in tools.values())
    assert tools["recall"].input_schema["required"] == ["query"]
    assert tools["recall"].annotations.read_only_hint is True
    assert tools["forget"].annotations.destructive_hint is True
    assert not recalled.is_error
    assert json.loads(recalled.content[0].text)["context"] == "[facts] seat: window"
    assert missing.is_error and "not_found" in missing.content[0].text
    assert invalid.is_error and "key and value" in invalid.content[0].text
    assert sent == [
        ("POST", "/v1/recall", {"user_id": "ann", "query": "which seat?",
                                "budget_tokens": 500}),
        ("DELETE", "/v1/users/ann/memories/m9", None)]
