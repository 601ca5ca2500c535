"""SDK and CLI against a fake HTTP transport: the wire format and error mapping."""

from __future__ import annotations

import asyncio
import json
import shlex
from pathlib import Path

import httpx
import pytest

from strata import AsyncClient, Client
from strata.cli import build_parser, main
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


def test_cli_recall_prints_context(capsys: pytest.CaptureFixture[str]) -> None:
    fake = httpx.MockTransport(handler)
    assert main(["--url", "http://x", "--key", "k", "recall", "u", "dinner?"],
                transport=fake) == 0
    assert capsys.readouterr().out.strip() == "ctx"
    assert main(["--url", "http://x", "--key", "k", "recall", "u", ""], transport=fake) == 1


def test_cli_import_reads_a_folder(tmp_path: Path) -> None:
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "setup.md").write_text("# Setup\n\nInstall it with make run.")
    (tmp_path / "empty.txt").write_text("  ")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    SEEN.clear()
    assert main(["--url", "http://x", "--key", "k", "import", str(tmp_path)],
                transport=httpx.MockTransport(handler)) == 0
    method, path, body = SEEN[0]
    assert (method, path) == ("POST", "/v1/knowledge/documents")
    assert [d["doc_id"] for d in body["documents"]] == ["guide/setup"]  # type: ignore[index]


README = Path(__file__).resolve().parents[2] / "README.md"


def readme_cli_commands() -> list[list[str]]:
    """Every ``.venv/bin/strata …`` line of the README that talks HTTP, as argv (placeholders
    filled in); the `strata job` lines run against a live service in
    tests/integration/test_strata_serve.py."""
    lines = [line.strip() for line in README.read_text().splitlines()
             if line.strip().startswith(".venv/bin/strata ")
             and not line.strip().startswith(".venv/bin/strata job ")]
    return [shlex.split(line.replace("<memory id>", "m1").replace("<job id>", "7-0"),
                        comments=True)[1:]
            for line in lines]


class Recorder:
    """A fake server that answers 200 and keeps the requests the CLI sent it."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self.transport = httpx.MockTransport(self.answer)

    def answer(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(200, json={"context": "ctx", "memories": []})

    def main(self, argv: list[str]) -> int:
        """``strata ARGV`` with its requests sent to this fake server."""
        return main(argv, transport=self.transport)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    """The CLI with the URL and API key from the environment, as the README runs it."""
    monkeypatch.setenv("STRATA_URL", "http://x")
    monkeypatch.setenv("STRATA_API_KEY", "k")
    return Recorder()


def test_the_readme_cli_commands_send_what_they_say(recorded: Recorder) -> None:
    commands = readme_cli_commands()
    assert [c[0] for c in commands] == ["recall", "remember", "memories", "forget", "close",
                                        "job-status", "eval"]
    for argv in commands[:-1]:  # eval needs a LoCoMo folder; its arguments are parsed below
        assert recorded.main(argv) == 0, argv
    assert recorded.main(["forget", "ann", "--all"]) == 0
    sent = [(r.method, r.url.raw_path.decode(), r.headers["authorization"],
             json.loads(r.content) if r.content else None) for r in recorded.requests]
    assert sent == [
        ("POST", "/v1/recall", "Bearer k", {"user_id": "ann", "budget_tokens": 500,
                                            "query": "what should I cook for dinner?",
                                            "debug": False}),
        # the fact's --key is not the API key (it was: 401 with "Bearer preference.seat")
        ("POST", "/v1/users/ann/memories", "Bearer k", {
            "kind": "fact", "text": "prefers window seats", "key": "preference.seat",
            "value": "window"}),
        ("GET", "/v1/users/ann/memories?kind=fact&limit=100", "Bearer k", None),
        ("DELETE", "/v1/users/ann/memories/m1", "Bearer k", None),
        # the recorder's ack names no extraction job: --wait has nothing to wait for
        ("POST", "/v1/sessions/s1/close", "Bearer k", {"user_id": "ann"}),
        ("GET", "/v1/jobs/7-0", "Bearer k", None),
        ("DELETE", "/v1/users/ann", "Bearer k", None)]
    evaluation = build_parser().parse_args(commands[-1])
    assert (evaluation.suite, evaluation.k) == ("locomo", "5,10,20")


def test_the_api_key_option_and_its_old_spelling(recorded: Recorder) -> None:
    assert recorded.main(["--api-key", "k1", "remember", "ann", "likes tea",
                          "--key", "drink"]) == 0
    assert recorded.main(["--key", "k2", "remember", "ann", "likes tea", "--key", "drink"]) == 0
    assert recorded.main(["--key", "k3", "whoami"]) == 0
    assert [r.headers["authorization"] for r in recorded.requests] == [
        "Bearer k1", "Bearer k2", "Bearer k3"]
    assert [json.loads(r.content)["key"] for r in recorded.requests[:2]] == ["drink", "drink"]


def test_a_dot_id_is_refused_by_the_cli(recorded: Recorder,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert recorded.main(["forget", "ann", "--id", ".."]) == 2
    assert recorded.requests == [] and "not a valid id" in capsys.readouterr().err
