"""What stands between the wire and the routes: one size limit on request bodies, strict
JSON, and one error shape for every failure.

- ``BodyLimit`` refuses a body over ``STRATA_MAX_BODY_BYTES`` with 413 before anything reads
  it: by its ``Content-Length``, or as it streams in.
- ``StrictJSONRoute`` parses request JSON with ``parse_json``, which refuses what Strata could
  neither store nor send back: lone surrogates (not encodable as UTF-8), nesting deeper than
  ``MAX_JSON_DEPTH``, NaN and Infinity, and integers too long to convert.
- ``install`` sets both up and answers every error as ``{"error": code, "detail": text}``:
  Strata's own, FastAPI's validation and JSON errors, Starlette's 404 and 405, and any
  unexpected exception (logged; the answer names no internals). The OpenAPI document says
  so: every operation lists the client errors of ``strata.errors`` with ``ErrorBody`` (in
  place of FastAPI's default 422 body, which Strata never sends).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from serve_app.request_context import SCOPE_KEY
from strata.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    LimitExceeded,
    NotFound,
    PayloadTooLarge,
    StrataError,
    Unauthorized,
)

__all__ = ["ERROR_RESPONSES", "MAX_JSON_DEPTH", "BodyLimit", "ErrorBody", "StrictJSONRoute",
           "api_router", "install", "parse_json"]

logger = logging.getLogger(__name__)

MAX_JSON_DEPTH = 32  # objects and arrays inside one another; task states and metadata need few
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_HTTP_CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed",
               413: PayloadTooLarge.code}


# -- strict JSON ------------------------------------------------------------------------------
def _invalid(reason: str) -> json.JSONDecodeError:
    """FastAPI answers a ``JSONDecodeError`` from the body parser as a validation error."""
    return json.JSONDecodeError(reason, "", 0)


def _reject_constant(name: str) -> Any:
    raise _invalid(f"{name} is not a JSON number")


def parse_json(body: bytes) -> Any:
    """Parse a request body, refusing JSON that Strata could not store or return as sent."""
    try:
        value = json.loads(body, parse_constant=_reject_constant)
    except json.JSONDecodeError:
        raise
    except UnicodeDecodeError:
        raise _invalid("the body is not UTF-8 text") from None
    except RecursionError:
        raise _invalid(f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError:  # an integer past Python's conversion limit
        raise _invalid("a number has too many digits") from None
    _check_tree(value)
    return value


def _check_tree(value: Any) -> None:
    """Depth and text of every node, iteratively (the tree may be as deep as the parser
    allowed)."""
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(value, 0, ())]
    while stack:
        node, depth, path = stack.pop()
        if isinstance(node, str):
            _check_text(node, path)
        elif isinstance(node, dict | list):
            if depth >= MAX_JSON_DEPTH:
                raise _invalid(f"nested deeper than {MAX_JSON_DEPTH} levels at {_where(path)}")
            children = node.items() if isinstance(node, dict) else enumerate(node)
            for key, child in children:
                if isinstance(key, str):
                    _check_text(key, path)
                stack.append((child, depth + 1, (*path, key)))


def _check_text(text: str, path: tuple[str | int, ...]) -> None:
    if (bad := _SURROGATE.search(text)) is not None:
        raise _invalid(f"a lone surrogate \\u{ord(bad.group()):04x} at {_where(path)} is not "
                       "text (send a character as one code point or a surrogate pair)")


def _where(path: tuple[str | int, ...]) -> str:
    shown = ".".join(map(str, path[:8])) + (".…" if len(path) > 8 else "")
    return shown or "the top level"


class StrictJSONRequest(Request):
    """A request whose ``json()`` is ``parse_json``."""

    async def json(self) -> Any:
        if not hasattr(self, "_strict_json"):
            self._strict_json = parse_json(await self.body())
        return self._strict_json


class StrictJSONRoute(APIRoute):
    """A route that parses its JSON body strictly."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(StrictJSONRequest(request.scope, request.receive))

        return strict


# -- the size limit ---------------------------------------------------------------------------
class BodyLimit:
    """ASGI middleware: a request body over ``limit()`` bytes gets 413 and is never parsed.

    The body is read here (FastAPI reads all of it anyway) and handed on whole.
    """

    def __init__(self, app: ASGIApp, limit: Callable[[], int]) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit()
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            await _too_large(int(declared), limit, scope, receive, send)
            return
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > limit:
                await _too_large(size, limit, scope, receive, send)
                return
            more = message.get("more_body", False)
        await self.app(scope, _replay(b"".join(chunks), receive), send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the buffered body once, then waits on the client as before."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        return pending.pop() if pending else await receive()

    return replayed


async def _too_large(size: int, limit: int, scope: Scope, receive: Receive, send: Send) -> None:
    error = PayloadTooLarge(f"the request body is over {limit} bytes (at least {size}); "
                            "send less per request (STRATA_MAX_BODY_BYTES)")
    await JSONResponse(status_code=error.status_code, content=error.to_dict(),
                       headers={"Connection": "close"})(scope, receive, send)


# -- one error shape --------------------------------------------------------------------------
class ErrorBody(BaseModel):
    """The body of every error answer (a failed knowledge import adds its report beside)."""

    error: str = Field(description="a stable code: invalid_input, not_found, forbidden, …")
    detail: str = Field(description="what went wrong, for a person to read")


# what any operation may answer besides its own result, as the OpenAPI document shows it
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    error.status_code: {"model": ErrorBody, "description": description}
    for error, description in (
        (Unauthorized, "no API key, or an unknown one"),
        (Forbidden, "the key's role may not do this"),
        (NotFound, "no such route, session, memory or document"),
        (Conflict, "the write contradicts what is stored"),
        (PayloadTooLarge, "the body is over STRATA_MAX_BODY_BYTES; it was not read"),
        (InvalidInput, "invalid input; nothing was written"),
        (LimitExceeded, "a per-scope cap or a queue bound was reached, or the key's or "
                        "tenant's rate limit (rate_limited: retry after Retry-After)"))}


async def _strata_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StrataError)
    return JSONResponse(status_code=exc.status_code, content=exc.to_dict())


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = []
    for err in exc.errors():
        if err.get("type") == "json_invalid":
            reason, at = err.get("ctx", {}).get("error", err["msg"]), err["loc"][-1]
            problems.append(f"the body is not valid JSON: {reason}"
                            + (f" (at character {at})" if at else ""))
        else:
            where = ".".join(str(p) for p in err["loc"] if p != "body")
            problems.append(f"{where}: {err['msg']}")
    error = InvalidInput("; ".join(problems))
    return JSONResponse(status_code=error.status_code, content=error.to_dict())


async def _http_error(_: Request, exc: Exception) -> JSONResponse:
    """Starlette's own answers (unknown route, method not allowed, …) in Strata's shape."""
    assert isinstance(exc, HTTPException)
    code = _HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
    return JSONResponse(status_code=exc.status_code, headers=exc.headers,
                        content={"error": code, "detail": str(exc.detail)})


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    """A bug: logged with its traceback; the client learns only that it happened."""
    logger.error("unhandled %s on %s %s (request %s)", type(exc).__name__, request.method,
                 request.url.path, request.scope.get(SCOPE_KEY, "-"), exc_info=exc)
    error = StrataError("an unexpected error; it was logged, and nothing more can be said here")
    return JSONResponse(status_code=error.status_code, content=error.to_dict())


def api_router() -> APIRouter:
    """A router of a group of routes: strict JSON bodies, the error answers documented."""
    return APIRouter(route_class=StrictJSONRoute, responses=ERROR_RESPONSES)


def install(api: FastAPI, body_limit: Callable[[], int]) -> None:
    """Guard ``api``: call before its routes are declared (they take the strict route class)."""
    api.router.route_class = StrictJSONRoute
    api.router.responses = {**ERROR_RESPONSES, **api.router.responses}
    api.add_middleware(BodyLimit, limit=body_limit)
    api.add_exception_handler(StrataError, _strata_error)
    api.add_exception_handler(RequestValidationError, _validation_error)
    api.add_exception_handler(HTTPException, _http_error)
    api.add_exception_handler(Exception, _unexpected)
