"""``/mcp`` refuses a request before the MCP SDK in the protocol the client speaks (#40):
the MCP SDK's own streamable HTTP client, in process (httpx2's ASGI transport), against
``McpEndpoint`` in a small app whose key check is Strata's ``Unauthorized``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp import MCPError
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from serve_app.mcp_http import McpEndpoint, jsonrpc_refusal
from strata.auth import Principal
from strata.errors import BackendUnavailable, Unauthorized


def authenticate(request: Request) -> Principal:
    if request.headers.get("authorization") != "Bearer good-key":
        raise Unauthorized("unknown API key")
    return Principal(tenant="t", role="agent")


async def initialise(key: str, *, running: bool = True) -> Any:
    """Initialise an MCP session presenting ``key``; returns the server's result."""
    endpoint = McpEndpoint(authenticate)
    app = Starlette(routes=[Route("/mcp", endpoint, methods=["GET", "POST", "DELETE"])])

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        if not running:
            yield
            return
        async with endpoint.lifespan(app):
            yield

    async with (
        lifespan(),
        httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://t",
                           headers={"Authorization": f"Bearer {key}"}) as http,
        streamable_http_client("http://t/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        return await session.initialize()


def test_the_sdk_client_with_a_wrong_key_reads_why() -> None:
    with pytest.raises(Exception) as caught:  # an ExceptionGroup: the SDK's task groups
        asyncio.run(initialise("wrong-key"))
    assert caught.group_contains(MCPError, match=r"^unauthorized: unknown API key$")


def test_a_good_key_reaches_the_mcp_server() -> None:
    result = asyncio.run(initialise("good-key"))
    assert result.server_info.name == "strata"


def test_an_endpoint_not_running_says_so() -> None:
    with pytest.raises(Exception) as caught:
        asyncio.run(initialise("good-key", running=False))
    assert caught.group_contains(
        MCPError, match=r"^backend_unavailable: the MCP endpoint is not running")


def test_the_refusal_is_a_json_rpc_error_with_the_http_status() -> None:
    unauthorized = jsonrpc_refusal(Unauthorized("unknown API key"))
    assert unauthorized.status_code == 401
    assert unauthorized.headers["www-authenticate"] == (
        'Bearer error="invalid_token", error_description="unknown API key"')
    assert unauthorized.body == (
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"unauthorized: '
        b'unknown API key","data":{"error":"unauthorized","detail":"unknown API key"}}}')
    down = jsonrpc_refusal(BackendUnavailable("down"))
    assert down.status_code == 503 and b'"code":-32603' in down.body
    assert "www-authenticate" not in down.headers
