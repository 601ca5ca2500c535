"""Strata's MCP tools over streamable HTTP at ``/mcp`` of the ingress (``strata mcp`` serves
the same tools over stdio).

Hop by hop, one MCP request::

    MCP client --POST /mcp, Authorization: Bearer <key>--> ingress (body limit, counting)
      -> McpEndpoint: the key is checked as every route checks it (401 otherwise)
      -> the SDK's session manager (stateless: any replica answers any request)
      -> the tool (strata.mcp_server) -> strata.AsyncClient with the caller's key
      -> this replica's own FastAPI app, in process (httpx.ASGITransport): the REST route

So a tool call is the REST call it names, made with the caller's key: the same tenant,
role rules, validation and strict JSON, and no port to know (under ``serve deploy`` the
proxy's port is the config's, not ``STRATA_HTTP_PORT``). Stateless, because the replicas
share nothing: each request builds its own transport and answers as JSON (no SSE stream,
no server-to-client requests).

A request refused before the SDK (no key or a wrong one: 401; the endpoint not running:
503) is answered in the protocol the client speaks: the HTTP status with a JSON-RPC error
body, ``{"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message":
"unauthorized: unknown API key", "data": {"error": ..., "detail": ...}}}``, which the SDK's
client raises as ``MCPError`` with that message (a body in Strata's REST shape reaches the
client only as "Server returned an error response"). A 401 also carries
``WWW-Authenticate: Bearer error="invalid_token"`` (RFC 6750), as the SDK's own bearer
check sends. The id is null: the body of a refused request is not read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
from mcp.server.mcpserver import Context
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import INTERNAL_ERROR, INVALID_REQUEST
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from strata.auth import Principal
from strata.client import AsyncClient
from strata.errors import BackendUnavailable, StrataError, Unauthorized
from strata.mcp_server import build_server

__all__ = ["McpEndpoint", "jsonrpc_refusal"]

_IN_PROCESS = "http://strata.in-process"  # the tools' requests never leave the replica
# Host and Origin are not checked (the SDK's DNS-rebinding guard would accept localhost
# only): /mcp needs an API key like every other route, and is reached through whatever
# name the deployment gives the service.
_ANY_HOST = TransportSecuritySettings(enable_dns_rebinding_protection=False)


class McpEndpoint:
    """The ASGI app at ``/mcp``: authenticates, then hands the request to the MCP SDK.

    ``authenticate``: the ingress's own check of a request's key (raises ``Unauthorized``,
    which the ingress answers as 401). ``lifespan`` must run around the app's life (the
    SDK's session manager holds a task group); the ingress passes it to ``FastAPI``.
    """

    def __init__(self, authenticate: Callable[[Request], Principal]) -> None:
        self._authenticate = authenticate
        # set per replica by ``lifespan``: the app is pickled into each replica first
        self._manager: StreamableHTTPSessionManager | None = None
        self._app: ASGIApp | None = None

    @asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        """Run the MCP session manager while ``app`` (the ingress's FastAPI app) runs."""
        self._app = app
        server = build_server(self._client_for)
        server.streamable_http_app(stateless_http=True, json_response=True,
                                   transport_security=_ANY_HOST)  # creates the manager
        manager = server.session_manager
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            if self._manager is None:
                raise BackendUnavailable("the MCP endpoint is not running in this replica")
            self._authenticate(Request(scope))  # before the SDK reads anything
        except StrataError as exc:  # answered to the MCP client in its own protocol
            await jsonrpc_refusal(exc)(scope, receive, send)
            return
        await self._manager.handle_request(scope, receive, send)

    def _client_for(self, ctx: Context) -> AsyncClient:
        """The client of one tool call: the caller's key, this replica's app."""
        header = (ctx.headers or {}).get("authorization", "")
        key = header[7:].strip() if header.lower().startswith("bearer ") else ""
        assert self._app is not None, "tools run only while the lifespan runs"
        return AsyncClient(_IN_PROCESS, api_key=key,
                           transport=httpx.ASGITransport(app=self._app))


def jsonrpc_refusal(exc: StrataError) -> JSONResponse:
    """The answer to a request refused before the SDK: the error's HTTP status, a JSON-RPC
    error naming it (see the module docstring)."""
    code = INVALID_REQUEST if exc.status_code < 500 else INTERNAL_ERROR
    headers = {}
    if isinstance(exc, Unauthorized):
        description = exc.detail.replace('"', "'")
        headers["WWW-Authenticate"] = (f'Bearer error="invalid_token", '
                                       f'error_description="{description}"')
    return JSONResponse(status_code=exc.status_code, headers=headers, content={
        "jsonrpc": "2.0", "id": None,
        "error": {"code": code, "message": f"{exc.code}: {exc.detail}", "data": exc.to_dict()}})
