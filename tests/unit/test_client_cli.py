"""SDK and CLI against a fake HTTP transport: the wire format and error mapping."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from strata import AsyncClient, Client
from strata.cli import main
from strata.errors import InvalidInput, NotFound

SEEN: list[tuple[str, str, dict[str, object] | None]] = []


def handler(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content) if request.content else None
    SEEN.append((request.method, request.url.path, body))
    assert request.headers["authorization"] == "Bearer k"
    if request.url.path.endswith("/missing/history"):
        return httpx.Response(404, json={"error": "not_found", "detail": "no memory"})
    if request.url.path == "/v1/recall" and body and body["query"] == "":
        return httpx.Response(422, json={"error": "invalid_input", "detail": "query"})
    return httpx.Response(200, json={"ok": True, "context": "ctx"})


def test_sync_client_wire_format_and_errors() -> None:
    SEEN.clear()
    client = Client("http://x", api_key="k", transport=httpx.MockTransport(handler))
    client.add_turn("s1", "u", "user", "hi", turn_id="t1")
    client.recall("u", "q", session_id="s1", budget_tokens=300)
    assert SEEN[0] == ("POST", "/v1/sessions/s1/turns",
                       {"user_id": "u", "role": "user", "content": "hi", "turn_id": "t1"})
    assert SEEN[1][2] == {"user_id": "u", "query": "q", "session_id": "s1",
                          "budget_tokens": 300}
    with pytest.raises(NotFound):
        client.history("u", "missing")
    with pytest.raises(InvalidInput):
        client.recall("u", "")


def test_async_client_shares_the_surface() -> None:
    SEEN.clear()

    async def run() -> object:
        async with AsyncClient("http://x", api_key="k",
                               transport=httpx.MockTransport(handler)) as client:
            return await client.forget_user("u")

    assert asyncio.run(run()) == {"ok": True, "context": "ctx"}
    assert SEEN == [("DELETE", "/v1/users/u", None)]


def test_cli_recall_prints_context(monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    real = httpx.Client.__init__

    def fake_init(self: httpx.Client, *a: object, **kw: object) -> None:
        kw["transport"] = httpx.MockTransport(handler)
        real(self, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(httpx.Client, "__init__", fake_init)
    assert main(["--url", "http://x", "--key", "k", "recall", "u", "dinner?"]) == 0
    assert capsys.readouterr().out.strip() == "ctx"
    assert main(["--url", "http://x", "--key", "k", "recall", "u", ""]) == 1


def test_cli_import_reads_a_folder(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "setup.md").write_text("# Setup\n\nInstall it with make run.")
    (tmp_path / "empty.txt").write_text("  ")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    real = httpx.Client.__init__

    def fake_init(self: httpx.Client, *a: object, **kw: object) -> None:
        kw["transport"] = httpx.MockTransport(handler)
        real(self, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(httpx.Client, "__init__", fake_init)
    SEEN.clear()
    assert main(["--url", "http://x", "--key", "k", "import", str(tmp_path)]) == 0
    method, path, body = SEEN[0]
    assert (method, path) == ("POST", "/v1/knowledge/documents")
    assert [d["doc_id"] for d in body["documents"]] == ["guide/setup"]  # type: ignore[index]
