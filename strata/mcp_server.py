"""Strata's memory tools over MCP (the official ``mcp`` SDK's ``MCPServer``, once FastMCP).

The server holds no memory of its own: every tool is ``strata.tools``' tool, run through
an ``AsyncClient`` against a running Strata, so the API key's tenant and role rules are
the service's. ``strata mcp`` serves it over stdio::

    STRATA_URL=http://127.0.0.1:8000 STRATA_API_KEY=dev strata mcp --user ann

``--user`` binds the user: the tools then take no ``user_id`` and the model cannot reach
another user's memory. Needs the ``mcp`` extra (``pip install 'strata-memory[mcp]'``).

The running service serves the same server over streamable HTTP at ``/mcp``
(``serve_app.mcp_http``): there each tool call gets its client from the call's context,
one per caller's API key (``ClientFor``).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Coroutine, Mapping
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Annotated, Any, cast

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from strata.client import AsyncClient, RetryPolicy
from strata.errors import StrataError
from strata.tools import TOOLS, MemoryTool, adispatch

__all__ = ["ClientFor", "build_server", "serve_stdio"]

_ANNOTATED = cast(Any, Annotated)  # subscripted at run time with a field's own type

ClientFor = Callable[[Context], AbstractAsyncContextManager[AsyncClient]]
"""The client one tool call uses, given the call's MCP context (its HTTP headers, if any)."""

INSTRUCTIONS = (
    "Long-term memory of the user. Call recall before answering anything that may depend "
    "on what the user said before; call remember when the user states a lasting fact "
    "(a preference, an allergy, where they live); call forget when asked to forget.")


def build_server(client: AsyncClient | ClientFor,
                 bound: Mapping[str, str] | None = None) -> MCPServer:
    """An MCP server with Strata's memory tools, each calling ``client``.

    ``client``: one client for every call (stdio: one user's key), or a ``ClientFor`` that
    opens the client of each call (HTTP: the caller's key). ``bound``: arguments fixed for
    every call (``user_id``, ``session_id``), left out of the tools' schemas.
    """
    fixed = dict(bound or {})
    client_for = _always(client) if isinstance(client, AsyncClient) else client
    server = MCPServer(name="strata", instructions=INSTRUCTIONS)
    for tool in TOOLS.values():
        server.add_tool(_tool_function(tool, client_for, fixed), name=tool.name,
                        description=tool.description, structured_output=False,
                        annotations=ToolAnnotations(read_only_hint=tool.read_only,
                                                    destructive_hint=tool.name == "forget",
                                                    open_world_hint=False))
    return server


def _always(client: AsyncClient) -> ClientFor:
    """``client`` for every call (closed by its owner, not per call)."""
    return lambda _: nullcontext(client)


def _tool_function(tool: MemoryTool, client_for: ClientFor, bound: dict[str, str]
                   ) -> Callable[..., Coroutine[Any, Any, dict[str, Any]]]:
    """An async function whose signature is the tool's arguments (minus the bound ones):
    the SDK derives the MCP input schema from it, and ``adispatch`` validates again. Its
    ``ctx`` parameter (typed ``Context``) is the SDK's to fill and not in the schema."""
    async def call(ctx: Context, **arguments: Any) -> dict[str, Any]:
        given = {k: v for k, v in arguments.items() if v is not None}
        try:
            async with client_for(ctx) as client:
                result = await adispatch(client, tool.name, given, **bound)
        except StrataError as exc:  # the key or the service: the MCP client should see why
            raise ToolError(f"{exc.code}: {exc.detail}") from exc
        if set(result) == {"error", "detail"}:
            raise ToolError(f"{result['error']}: {result['detail']}")
        return result

    parameters = [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)]
    for name, info in tool.arguments.model_fields.items():
        if name in bound:
            continue
        annotation = _ANNOTATED[(info.annotation, *info.metadata,
                                 Field(description=info.description))]
        default = inspect.Parameter.empty if info.is_required() else info.default
        parameters.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                            annotation=annotation, default=default))
    call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        parameters, return_annotation=dict[str, Any])
    call.__name__ = tool.name
    call.__doc__ = tool.description
    return call


def serve_stdio(url: str, api_key: str, retry: RetryPolicy | None = None,
                bound: Mapping[str, str] | None = None) -> None:
    """Serve the tools over stdin/stdout until the MCP client hangs up."""
    async def run() -> None:
        async with AsyncClient(url, api_key=api_key, retry=retry) as client:
            await build_server(client, bound).run_stdio_async()

    asyncio.run(run())
