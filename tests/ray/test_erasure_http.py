"""Verified erasure that cannot lie: the server deletes, then scans its own files (the
embedded Redis's AOF, milvus-lite) for the phrase and says what it scanned; a phrase that is
not in what is forgotten is refused before anything is deleted, so the check is no probe of
other users' data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from live import live_app

ADMIN = {"Authorization": "Bearer admin-key"}
AGENT = {"Authorization": "Bearer agent-key"}
KEYS = {"admin-key": {"tenant": "acme", "role": "admin"},
        "agent-key": {"tenant": "acme", "role": "agent"}}


@pytest.fixture(scope="module")
def http(ray_session: None, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[httpx.Client]:
    with (live_app(tmp_path_factory.mktemp("erasure"), embedder="hash", hash_dim=64,
                   session_shards=1, extractors=0, api_keys=KEYS) as (url, _),
          httpx.Client(base_url=url, timeout=180) as client):
        yield client


def _remember(http: httpx.Client, user: str, text: str) -> dict[str, Any]:
    resp = http.post(f"/v1/users/{user}/memories", headers=ADMIN,
                     json={"kind": "episode", "text": text})
    assert resp.status_code == 200, resp.text
    return resp.json()["memory"]  # type: ignore[no-any-return]


def test_a_forgotten_memory_is_verified_gone_from_the_server_s_files(
        http: httpx.Client) -> None:
    kept = _remember(http, "eve", "My gym locker is number 12.")
    gone = _remember(http, "eve", "The alarm code is quokka-zanzibar-7781.")
    resp = http.post("/v1/users/eve/erasure", headers=ADMIN, json={
        "phrase": "quokka-zanzibar-7781", "memory_id": gone["id"]})
    assert resp.status_code == 200, resp.text
    verify = resp.json()["verify"]
    assert verify["forgotten"] is True, verify
    assert verify["files_scanned"] > 0 and verify["bytes_scanned"] > 0
    assert verify["remaining"] == [] and set(verify["roots"]) == {"redis", "milvus.db"}
    listed = http.get("/v1/users/eve/memories", headers=ADMIN).json()["memories"]
    assert [m["id"] for m in listed] == [kept["id"]]


def test_a_phrase_not_in_what_is_forgotten_is_refused_and_nothing_is_deleted(
        http: httpx.Client) -> None:
    mine = _remember(http, "fay", "I keep bees on the roof.")
    _remember(http, "gus", "My passport number is X-ORCHID-5521.")
    for body in ({"phrase": "X-ORCHID-5521"},  # another user's text: no probe
                 {"phrase": "X-ORCHID-5521", "memory_id": mine["id"]}):
        resp = http.post("/v1/users/fay/erasure", headers=ADMIN, json=body)
        assert resp.status_code == 422, resp.text
        assert resp.json()["error"] and "nothing was deleted" in resp.json()["detail"]
    assert len(http.get("/v1/users/fay/memories", headers=ADMIN).json()["memories"]) == 1
    assert len(http.get("/v1/users/gus/memories", headers=ADMIN).json()["memories"]) == 1
    # erasing a whole user is an admin's; bad bodies are 422 too
    assert http.post("/v1/users/fay/erasure", headers=AGENT,
                     json={"phrase": "keep bees"}).status_code == 403
    for bad in ({"phrase": ""}, {"phrase": "keep bees", "bound_s": 0},
                {"phrase": "keep bees", "extra": 1}):
        assert http.post("/v1/users/fay/erasure", headers=ADMIN,
                         json=bad).status_code == 422, bad


def test_the_cli_s_verify_asks_the_server(http: httpx.Client) -> None:
    _remember(http, "hal", "My bike lock combination is 4-9-1-pelican.")
    env = {**os.environ, "STRATA_URL": str(http.base_url).rstrip("/"),
           "STRATA_API_KEY": "admin-key"}
    run = subprocess.run([sys.executable, "-m", "strata.cli", "forget", "hal", "--all",
                          "--verify", "4-9-1-pelican"], env=env, capture_output=True,
                         text=True, timeout=200, check=False)
    assert run.returncode == 0, run.stderr + run.stdout
    report = json.loads(run.stdout)
    assert report["deleted_user"] == "hal" and report["verify"]["forgotten"] is True
    assert report["verify"]["files_scanned"] > 0
    assert http.get("/v1/users/hal/memories", headers=ADMIN).json()["memories"] == []
