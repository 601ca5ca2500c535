"""Knowing when memory is ready: a close's ``extraction_job`` is a resource
(``GET /v1/jobs/{id}``) that goes queued → running → done with what it wrote, and every face
— HTTP, both SDKs, the CLI, the MCP tools and the README's first example — can wait for it,
against the real Serve app with a real extractor."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from live import live_app
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from strata.client import AsyncClient, Client

ROOT = Path(__file__).resolve().parents[2]
ACME = "dev"  # the README's example key
GLOBEX = "globex-key"
KEYS = {ACME: {"tenant": "acme", "role": "admin"},
        GLOBEX: {"tenant": "globex", "role": "admin"}}


@pytest.fixture(scope="module")
def base(ray_session: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with live_app(tmp_path_factory.mktemp("jobs"), embedder="hash", hash_dim=64,
                  session_shards=1, extractors=1, api_keys=KEYS) as (url, _):
        yield url


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_a_close_s_job_is_done_with_what_it_wrote_and_only_its_tenant_sees_it(
        base: str) -> None:
    http = httpx.Client(base_url=base, timeout=60, headers=_auth(ACME))
    for text in ("I'm allergic to shellfish.", "I live in Lisbon now."):
        resp = http.post("/v1/sessions/j1/turns",
                         json={"user_id": "jo", "role": "user", "content": text})
        assert resp.status_code == 200, resp.text
    ack = http.post("/v1/sessions/j1/close", json={"user_id": "jo"}).json()
    job_id = ack["extraction_job"]
    assert re.fullmatch(r"\d+-\d+", job_id)
    seen = set()
    with Client(base, api_key=ACME) as sdk:
        record = sdk.wait_for(job_id, timeout_s=60, interval_s=0.05)
        seen.add(record["status"])
    assert record["status"] == "done", record
    assert record["user_id"] == "jo" and record["session_id"] == "j1"
    assert record["attempts"] >= 1 and record["error"] is None
    assert sum(v for k, v in record["written"].items() if k.startswith("facts.")) >= 1, record
    assert http.get(f"/v1/jobs/{job_id}", params={"user_id": "jo"}).json()["status"] == "done"
    # another tenant, another user of the same tenant, an unknown id: not found; junk: 422
    assert http.get(f"/v1/jobs/{job_id}", headers=_auth(GLOBEX)).status_code == 404
    assert http.get(f"/v1/jobs/{job_id}", params={"user_id": "someone"}).status_code == 404
    assert http.get("/v1/jobs/1-1").status_code == 404
    bad = http.get("/v1/jobs/not-a-job")
    assert bad.status_code == 422 and bad.json()["error"], bad.text


def test_close_with_wait_makes_the_next_recall_see_the_fact(base: str) -> None:
    with Client(base, api_key=ACME) as sdk:
        sdk.add_turn("w1", "wes", "user", "I'm vegetarian, no meat at all please.")
        ack = sdk.close_session("w1", "wes", wait=True, timeout_s=60)
        assert ack["job"]["status"] == "done", ack
        facts = sdk.memories("wes", kind="fact")["memories"]
        assert any(f.get("key") == "constraint.diet" for f in facts), facts
        context = sdk.recall("wes", "what can I eat?", layers=["facts"])["context"]
        assert "vegetarian" in context.lower(), context
        # nothing new to extract: no job, and waiting for none returns at once
        again = sdk.close_session("w1", "wes", wait=True)
        assert again.get("extraction_job") is None and again["job"] is None


def test_the_async_client_waits_for_a_job_too(base: str) -> None:
    async def run() -> dict[str, Any]:
        async with AsyncClient(base, api_key=ACME) as sdk:
            await sdk.add_turn("a1", "ava", "user", "My daughter is called Mia.")
            ack = await sdk.close_session("a1", "ava")
            return await sdk.wait_for(ack, timeout_s=60, user_id="ava")  # type: ignore[no-any-return]

    record = asyncio.run(run())
    assert record["status"] == "done" and record["user_id"] == "ava", record


def _cli(base: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STRATA_URL": base, "STRATA_API_KEY": ACME}
    return subprocess.run([sys.executable, "-m", "strata.cli", *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_cli_closes_with_wait_and_reads_a_job_s_status(base: str) -> None:
    with Client(base, api_key=ACME) as sdk:
        sdk.add_turn("c1", "cy", "user", "I work as a nurse.")
    closed = _cli(base, "close", "c1", "cy", "--wait", "--timeout", "60")
    assert closed.returncode == 0, closed.stderr
    ack = json.loads(closed.stdout)
    assert ack["job"]["status"] == "done", ack
    status = _cli(base, "job-status", ack["extraction_job"])
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["status"] == "done"
    missing = _cli(base, "job-status", "1-1")
    assert missing.returncode != 0 and "1-1" in missing.stderr + missing.stdout


def test_the_mcp_tools_close_and_report_the_job(base: str) -> None:
    async def run() -> tuple[Any, Any]:
        async with (
            httpx2.AsyncClient(headers=_auth(ACME), timeout=60) as http,
            streamable_http_client(f"{base}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            names = {t.name for t in (await session.list_tools()).tools}
            assert {"close_session", "job_status"} <= names, names
            await session.call_tool("add_turn", {"user_id": "mo", "session_id": "m1",
                                                 "role": "user",
                                                 "content": "I play the cello."})
            closed = await session.call_tool("close_session",
                                             {"user_id": "mo", "session_id": "m1"})
            ack = json.loads(closed.content[0].text)  # type: ignore[union-attr]
            status = await session.call_tool("job_status", {
                "user_id": "mo", "job_id": ack["extraction_job"]})
            return ack, json.loads(status.content[0].text)  # type: ignore[union-attr]

    ack, status = asyncio.run(run())
    assert ack["job"]["status"] == "done", ack
    assert status["status"] == "done" and status["user_id"] == "mo", status


def test_the_readme_s_first_example_prints_the_fact_it_stored(base: str) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Using it", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert 'Client("http://127.0.0.1:8000", api_key="dev")' in code
    code = code.replace("http://127.0.0.1:8000", base)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    assert "peanut" in run.stdout.lower(), run.stdout
