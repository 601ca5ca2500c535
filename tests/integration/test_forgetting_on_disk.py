"""End to end: after ``DELETE /v1/users/{uid}`` the user's words leave every file of the
data dir within the documented bound, and stay gone across a restart (issue #15)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from strata.client import Client
from strata.layers.forgetting import FORGET_BOUND_S, find_residue, wait_forgotten
from strata.stores.redis_server import free_port

# the tiers it needs: `strata serve`: its own Ray and embedded Redis
pytestmark = [pytest.mark.ray, pytest.mark.redis]

PHRASE = "Quokkaplum7731"
CONTROL = "Wombatberry5519"
EVERYTHING = (".",)  # the whole data dir, Ray's files included


def _start(tmp_path: Path, env: dict[str, str], port: int, run: int) -> subprocess.Popen[bytes]:
    log = (tmp_path / f"serve{run}.log").open("w")
    proc = subprocess.Popen([str(Path(sys.executable).parent / "strata"), "serve"], env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    started = time.monotonic()
    while time.monotonic() - started < 240 and proc.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=30).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise AssertionError((tmp_path / f"serve{run}.log").read_text()[-3000:])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _talk(client: Client, user: str, word: str) -> None:
    session = f"{user}-s1"
    for text in (f"Remember that my codename is {word}.",
                 f"I named my boat {word} after the codename.",
                 f"My wifi network is also called {word}."):
        client.add_turn(session, user, "user", text)
        client.add_turn(session, user, "assistant", "Noted.")
    client.close_session(session, user)


def _extracted(client: Client, user: str, word: str, timeout_s: float = 120) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [m for m in client.memories(user)["memories"] if word in m["text"]]
        if len(found) >= 2:  # the explicit fact and what the session's extraction wrote
            return len(found)
        time.sleep(1)
    raise AssertionError(f"no extraction for {user}")


def test_a_deleted_users_words_leave_the_data_dir_and_stay_gone(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STRATA_", "RAY_"))}
    env.update(STRATA_DATA_DIR=str(data), STRATA_HTTP_PORT=str(port), STRATA_EMBEDDER="hash",
               STRATA_RAY_DASHBOARD_PORT="0")
    proc = _start(tmp_path, env, port, 1)
    try:
        client = Client(f"http://127.0.0.1:{port}", api_key="dev")
        _talk(client, "alice", PHRASE)
        _talk(client, "keep", CONTROL)
        memories = _extracted(client, "alice", PHRASE)
        _extracted(client, "keep", CONTROL)
        time.sleep(3)  # the AOF's once-a-second fsync and milvus-lite's 2 s flush policy
        before = find_residue(data, PHRASE, EVERYTHING)
        print(f"before the delete: {memories} memories; on disk {before}")
        assert before

        deleted_at = time.monotonic()
        print(client.forget_user("alice"))
        check = wait_forgotten(data, PHRASE, bound_s=FORGET_BOUND_S, poll_s=0.2,
                               roots=EVERYTHING)
        print(f"gone from every file {time.monotonic() - deleted_at:.1f}s after the reply "
              f"(bound {FORGET_BOUND_S}s): {check.remaining}")
        assert check.forgotten, check.remaining
        assert find_residue(data, CONTROL, EVERYTHING)  # the grep still sees kept words
        assert client.memories("alice")["memories"] == []
        assert any(CONTROL in m["text"] for m in client.memories("keep")["memories"])
        client.close()
    finally:
        _stop(proc)

    proc = _start(tmp_path, env, port, 2)
    try:
        client = Client(f"http://127.0.0.1:{port}", api_key="dev")
        assert client.memories("alice")["memories"] == []
        assert any(CONTROL in m["text"] for m in client.memories("keep")["memories"])
        client.close()
        assert find_residue(data, PHRASE, EVERYTHING) == []
    finally:
        _stop(proc)
    assert find_residue(data, PHRASE, EVERYTHING) == []
