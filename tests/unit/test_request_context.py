"""serve_app.request_context: the request id of a request (the client's when valid, else a
new one), on its log records and its span; the proxy's half drops an invalid one."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient
from starlette.types import Receive, Scope, Send

from serve_app.request_context import (
    ProxyRequestIds,
    RequestContext,
    current_request_id,
    install_log_records,
    proxy_middlewares,
    valid_request_id,
)
from strata import tracing

logger = logging.getLogger("tests.request_context")


async def _echo(request: Request) -> JSONResponse:
    logger.warning("answering")
    return JSONResponse({"id": current_request_id()})


async def _boom(request: Request) -> JSONResponse:
    return JSONResponse({"error": "invalid_input", "detail": "no"}, status_code=422)


@pytest.fixture
def client() -> Iterator[TestClient]:
    app = Starlette(routes=[Route("/v1/echo", _echo), Route("/v1/bad", _boom)])
    with TestClient(RequestContext(app)) as c:
        yield c


@pytest.fixture
def log_records() -> Iterator[None]:
    factory = logging.getLogRecordFactory()
    install_log_records()
    install_log_records()  # idempotent: one wrapper
    yield
    logging.setLogRecordFactory(factory)


@pytest.mark.parametrize("value", ["abc", "0f9a1c2e-1b2c-4d5e-8f90-123456789abc",
                                   "req.1:2_3-4", "x" * 64])
def test_valid_ids(value: str) -> None:
    assert valid_request_id(value) and valid_request_id(value.encode())


@pytest.mark.parametrize("value", ["", "x" * 65, "a b", "a\tb", "<script>", "é", "a;b",
                                   "a\nb", None])
def test_invalid_ids(value: str | None) -> None:
    assert not valid_request_id(value)


def test_a_request_without_an_id_gets_one(client: TestClient) -> None:
    first, second = client.get("/v1/echo"), client.get("/v1/echo")
    assert valid_request_id(first.headers["x-request-id"])
    assert first.json()["id"] == first.headers["x-request-id"]
    assert first.headers["x-request-id"] != second.headers["x-request-id"]


def test_an_error_answer_carries_it(client: TestClient) -> None:
    for resp in (client.get("/v1/bad"), client.get("/nowhere")):
        assert resp.status_code >= 400 and valid_request_id(resp.headers["x-request-id"])


def test_a_valid_id_is_used_an_invalid_one_replaced(client: TestClient) -> None:
    resp = client.get("/v1/echo", headers={"X-Request-ID": "client-7"})
    assert resp.json()["id"] == "client-7"
    # echoing the request's own header is the proxy's (Ray Serve's) part; this one
    # sets the header only when it chose another id
    assert "x-request-id" not in resp.headers
    bad = client.get("/v1/echo", headers={"X-Request-ID": "a" * 200})
    assert bad.headers["x-request-id"] == bad.json()["id"] != "a" * 200
    assert valid_request_id(bad.json()["id"])


def test_log_records_carry_the_id(client: TestClient, log_records: None,
                                  caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tests.request_context"):
        client.get("/v1/echo", headers={"X-Request-ID": "client-8"})
        logger.warning("outside a request")
        # Ray Serve's access log names request_id in extra: no clash with Strata's attribute
        logger.warning("serve's access log", extra={"request_id": "serve-1"})
    inside, outside, serve = caplog.records
    assert inside.strata_request_id == "client-8"  # type: ignore[attr-defined]
    assert outside.strata_request_id == "-"  # type: ignore[attr-defined]
    assert serve.request_id == "serve-1"  # type: ignore[attr-defined]


def test_the_request_span_names_route_status_and_id(client: TestClient) -> None:
    exporter = InMemorySpanExporter()
    tracing.use_processor(SimpleSpanProcessor(exporter))
    try:
        client.get("/v1/echo", headers={"X-Request-ID": "client-9"})
    finally:
        tracing.reset()
    (span,) = exporter.get_finished_spans()
    assert span.name == "HTTP GET /v1/echo"
    assert span.attributes == {"strata.request_id": "client-9", "http.request.method": "GET",
                               "http.response.status_code": 200, "http.route": "/v1/echo"}


def test_the_proxy_half_drops_an_invalid_id() -> None:
    seen: list[list[tuple[bytes, bytes]]] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["headers"])

    (middleware,) = proxy_middlewares()
    assert middleware.cls is ProxyRequestIds
    proxy = ProxyRequestIds(app)
    other = (b"accept", b"*/*")
    for headers in ([(b"x-request-id", b"ok-1"), other], [(b"x-request-id", b"no way"), other],
                    [(b"x-request-id", b"a"), (b"X-Request-ID", b"b"), other], [other]):
        asyncio.run(proxy({"type": "http", "headers": headers}, _never, _never))
    assert seen == [[(b"x-request-id", b"ok-1"), other], [other], [other], [other]]


async def _never(*_: object) -> None:
    raise AssertionError("not called")
