"""The HTTP guards without Ray: strict JSON, the body limit, one error shape (a catch-all
included), and the id and role rules they stand in front of."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel

from serve_app.guards import MAX_JSON_DEPTH, install, parse_json
from strata.auth import Principal
from strata.errors import Forbidden
from strata.models import MemoryKind, Source, check_id, check_name


def nested(depth: int) -> bytes:
    return ("[" * depth + "]" * depth).encode()


def test_parse_json_takes_what_can_be_stored_and_sent_back() -> None:
    assert parse_json(b'{"a": "\\ud83d\\ude00", "b": [1, 2.5, null]}') == {
        "a": "😀", "b": [1, 2.5, None]}  # a surrogate pair is one character
    assert parse_json(nested(MAX_JSON_DEPTH)) is not None


@pytest.mark.parametrize(("body", "reason"), [
    (b'{"a": "x\\ud800"}', "lone surrogate"),
    (b'{"k\\udfff": 1}', "lone surrogate"),
    ('{"a": "x\ud800"}'.encode("utf-8", "surrogatepass"), "lone surrogate"),  # raw bytes too
    (nested(MAX_JSON_DEPTH + 1), "nested deeper"),
    (nested(5000), "nested deeper"),  # past the parser's own recursion limit
    (b'{"a": NaN}', "not a JSON number"),
    (b'{"a": -Infinity}', "not a JSON number"),
    (b'{"a": ' + b"9" * 5000 + b"}", "too many digits"),
    (b'{"a": "\xff"}', "not UTF-8"),
    (b'{"a": ', "Expecting value"),
])
def test_parse_json_refuses_what_it_cannot_keep(body: bytes, reason: str) -> None:
    with pytest.raises(json.JSONDecodeError, match=reason):
        parse_json(body)


class Echo(BaseModel):
    text: str


@pytest.fixture
def client() -> Iterator[TestClient]:
    api = FastAPI()
    install(api, body_limit=lambda: 1024)

    @api.post("/echo")
    async def echo(body: Echo) -> dict[str, Any]:
        return {"text": body.text}

    @api.get("/boom")
    async def boom() -> None:
        raise RuntimeError("password=hunter2 in /srv/secret.py")

    with TestClient(api, raise_server_exceptions=False) as test_client:
        yield test_client


def error_of(resp: Any, status: int) -> dict[str, str]:
    assert resp.status_code == status, resp.text
    body: dict[str, str] = resp.json()
    assert set(body) == {"error", "detail"}, body
    return body


def test_an_unexpected_exception_is_a_500_in_the_one_shape_naming_nothing(
        client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    body = error_of(client.get("/boom"), 500)
    assert body["error"] == "internal_error"
    assert "hunter2" not in body["detail"] and "RuntimeError" not in body["detail"]
    assert any("RuntimeError" in r.getMessage() for r in caplog.records)  # but it is logged


def test_strict_json_and_the_framework_errors_share_the_shape(client: TestClient) -> None:
    assert client.post("/echo", json={"text": "hi"}).json() == {"text": "hi"}
    bad = error_of(client.post("/echo", content=b'{"text": "\\ud800"}',
                               headers={"content-type": "application/json"}), 422)
    assert bad["error"] == "invalid_input" and "lone surrogate" in bad["detail"]
    assert error_of(client.post("/echo", json={}), 422)["detail"].startswith("text:")
    assert error_of(client.get("/nowhere"), 404)["error"] == "not_found"
    assert error_of(client.put("/echo", json={"text": "hi"}), 405)["error"] == (
        "method_not_allowed")


def test_the_body_limit_counts_declared_and_streamed_bodies(client: TestClient) -> None:
    big = {"text": "x" * 2000}
    assert error_of(client.post("/echo", json=big), 413)["error"] == "payload_too_large"
    streamed = client.post("/echo", content=iter([json.dumps(big).encode()[i:i + 100]
                                                  for i in range(0, 2020, 100)]),
                           headers={"content-type": "application/json"})
    assert error_of(streamed, 413)["error"] == "payload_too_large"
    assert client.post("/echo", json={"text": "x" * 900}).status_code == 200


@pytest.mark.parametrize("value", ["s1\n", "s1\r\n", "\ns1", "s\x001", ""])
def test_an_id_is_the_whole_string(value: str) -> None:
    with pytest.raises(ValueError, match="session_id"):
        check_id("session_id", value)


def test_a_name_may_be_any_text_but_control_characters() -> None:
    assert check_name("key", "饮食偏好 / seat:window") == "饮食偏好 / seat:window"
    for bad in ("a\x00b", "a\nb", "a\x7f", "a\x85", "x" * 201, ""):
        with pytest.raises(ValueError, match="key"):
            check_name("key", bad)


def test_only_an_admin_writes_procedures_and_admin_sourced_memories() -> None:
    admin, agent = Principal(tenant="t", role="admin"), Principal(tenant="t", role="agent")
    for kind, source in ((MemoryKind.PROCEDURE, Source.ADMIN),
                         (MemoryKind.PROCEDURE, Source.USER_STATED),
                         (MemoryKind.FACT, Source.ADMIN), (MemoryKind.EPISODE, Source.ADMIN)):
        admin.require_may_write(kind, source)
        with pytest.raises(Forbidden):
            agent.require_may_write(kind, source)
    agent.require_may_write(MemoryKind.FACT, Source.USER_STATED)
    agent.require_may_write(MemoryKind.EPISODE, Source.INFERRED)
