"""What every request carries through the ingress: its request id and its trace.

The request id is the ``X-Request-ID`` header: the client's when it is a valid id (1–64
characters of ``A-Z a-z 0-9 . _ : -``), else a new one. Ray Serve's proxy already echoes the
request's header on every response — errors and its own 404/503 too — and generates one when
there is none; two pieces make that Strata's rule:

- ``ProxyRequestIds`` runs in the proxy, outside Serve's own middleware (installed through
  ``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH=serve_app.request_context:proxy_middlewares``,
  which ``strata serve`` sets for the Ray it starts): it drops an invalid header, so Serve
  generates the id and echoes that one, never what the client sent;
- ``RequestContext`` runs in the ingress replica: it puts the id on every log record of
  the process (``record.strata_request_id``, from a context variable) and on the request's span
  (``strata.tracing``: ``HTTP <method> <route>``, the parent of the request's other spans),
  and sets the response header itself only when it chose an id the request did not carry
  (no proxy in front: a test, or a proxy without the callback).
"""

from __future__ import annotations

import logging
import re
import uuid
from contextvars import ContextVar
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from strata import tracing

__all__ = ["HEADER", "PROXY_CALLBACK", "SCOPE_KEY", "ProxyRequestIds", "RequestContext",
           "current_request_id", "install_log_records", "proxy_middlewares", "valid_request_id"]

HEADER = "x-request-id"
SCOPE_KEY = "strata.request_id"  # the id in the ASGI scope, for the error handlers
PROXY_CALLBACK = "serve_app.request_context:proxy_middlewares"
_VALID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
_request_id: ContextVar[str | None] = ContextVar("strata_request_id", default=None)


def valid_request_id(value: str | bytes | None) -> bool:
    """Whether ``value`` may be used as a request id as it is."""
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    return value is not None and _VALID.fullmatch(value) is not None


def current_request_id() -> str | None:
    """The id of the request this code runs for, if any."""
    return _request_id.get()


def _incoming(scope: Scope) -> list[bytes]:
    return [v for k, v in scope.get("headers", []) if k.lower() == HEADER.encode()]


class RequestContext:
    """ASGI middleware of the ingress: the request's id and span (see the module)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = _incoming(scope)
        given = sent[0].decode("latin-1") if len(sent) == 1 else None
        request_id = given if valid_request_id(given) and given else uuid.uuid4().hex
        scope[SCOPE_KEY] = request_id
        token = _request_id.set(request_id)
        method = scope.get("method", "")
        try:
            with tracing.span(f"HTTP {method}", request_id=request_id,
                              http_method=method) as span:

                async def send_with_id(message: Message) -> None:
                    if message["type"] == "http.response.start":
                        span.set(http_status=message["status"])
                        if request_id != given:
                            MutableHeaders(scope=message)[HEADER] = request_id
                    await send(message)

                try:
                    await self.app(scope, receive, send_with_id)
                finally:
                    route = getattr(scope.get("route"), "path", None)
                    if route is not None:
                        span.rename(f"HTTP {method} {route}")
                        span.set(http_route=route)
        finally:
            _request_id.reset(token)


class ProxyRequestIds:
    """ASGI middleware of Ray Serve's proxy: a request's ``X-Request-ID`` is kept only when
    it is one valid id; otherwise it is dropped, and Serve generates (and echoes) one."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sent = _incoming(scope) if scope["type"] in ("http", "websocket") else []
        if sent and not (len(sent) == 1 and valid_request_id(sent[0])):
            scope = {**scope, "headers": [(k, v) for k, v in scope["headers"]
                                          if k.lower() != HEADER.encode()]}
        await self.app(scope, receive, send)


def proxy_middlewares() -> list[Middleware]:
    """What ``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH`` names: the proxy's middleware."""
    return [Middleware(ProxyRequestIds)]


def install_log_records() -> None:
    """Give every log record of this process a ``strata_request_id`` attribute (``-``
    outside a request), for a log format's ``%(strata_request_id)s``. Idempotent. Not
    ``request_id``: Ray Serve passes that in ``extra`` of its access log, and a record that
    already has an attribute ``extra`` names is refused (``KeyError``)."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, "strata_request_ids", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        record.strata_request_id = _request_id.get() or "-"
        return record

    factory.strata_request_ids = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)
