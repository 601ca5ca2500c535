"""End to end: the real ``strata serve`` command (MiniLM, milvus-lite, embedded Redis)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from strata.stores.redis_server import free_port

# the tiers it needs: `strata serve`: its own Ray and embedded Redis
pytestmark = [pytest.mark.ray, pytest.mark.redis]

ROOT = Path(__file__).resolve().parents[2]


def test_strata_serve_becomes_ready_and_stops_cleanly(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STRATA_", "RAY_"))}
    env.update(STRATA_DATA_DIR=str(tmp_path / "data"), STRATA_HTTP_PORT=str(port))
    strata = Path(sys.executable).parent / "strata"
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen([str(strata), "serve"], env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    started = time.monotonic()
    try:
        ready = None
        while time.monotonic() - started < 240 and proc.poll() is None:
            try:
                resp = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=30)
                # another local process (a Ray metrics agent) can hold the port for a moment
                # before Strata's proxy binds it: only Strata's JSON answer counts
                if resp.status_code == 200 and resp.headers.get(
                        "content-type", "").startswith("application/json"):
                    ready = resp.json()
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        assert ready == {"ready": True,
                         "checks": {"milvus": "ok", "redis": "ok", "embedder": "ok"}}, (
            (tmp_path / "serve.log").read_text()[-3000:])
        print(f"/readyz answered 200 after {time.monotonic() - started:.1f}s")
        assert (tmp_path / "data" / "milvus.db").exists()
        assert (tmp_path / "data" / "redis" / "appendonlydir").exists()

        while "Ctrl-C stops it" not in (tmp_path / "serve.log").read_text():
            assert time.monotonic() - started < 240 and proc.poll() is None
            time.sleep(0.5)
        _run_the_readmes_jobs(env, port)
        # to the whole process group, as a terminal, systemd or a container runtime sends
        # it: Ray's own processes get it too (tests/integration/test_faults.py signals the
        # strata process alone)
        stopping = time.monotonic()
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=90) == 0, (tmp_path / "serve.log").read_text()[-3000:]
        took = time.monotonic() - stopping
        print(f"SIGTERM to the process group: stopped in {took:.1f}s")
        assert took <= 10, ((tmp_path / "serve.log").read_text()[-3000:]
                            + (tmp_path / "data" / "redis" / "redis.log").read_text()[-1500:])
        leftover = subprocess.run(["pgrep", "-f", str(tmp_path / "data" / "redis")],
                                  capture_output=True, text=True).stdout
        assert leftover == "", "the embedded redis-server must stop with the service"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def _run_the_readmes_jobs(env: dict[str, str], port: int) -> None:
    """The README's three `strata job` lines, as written, against this running service: they
    find its Ray through <data_dir>/ray.json and run as Ray jobs on it."""
    readme = (ROOT / "README.md").read_text()
    lines = [line.strip() for line in readme.splitlines()
             if line.startswith(".venv/bin/strata job ")]
    assert [line.split()[2] for line in lines] == ["knowledge_import", "decay_sweep", "reembed"]
    outputs = {}
    for line in lines:
        command = [str(Path(sys.executable).parent / "strata"), *line.split()[1:]]
        done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, f"{line}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        assert "succeeded" in done.stdout + done.stderr  # a Ray job, not a local run
        outputs[line.split()[2]] = done.stdout + done.stderr
    assert '"ok": true' in outputs["knowledge_import"]
    assert '"dry_run": true' in outputs["decay_sweep"]
    assert '"rows"' in outputs["reembed"]
    found = httpx.post(f"http://127.0.0.1:{port}/v1/knowledge/search", timeout=60,
                       headers={"Authorization": "Bearer dev"},
                       json={"query": "How does Strata forget?"}).json()["results"]
    # the demo base is seeded at start as demo/…; the job's copies are skipped as duplicates
    assert found and found[0]["doc_id"].endswith("strata-forgetting"), found
