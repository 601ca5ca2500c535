"""The local Ray of ``strata serve``: a head node started with Ray's own CLI.

``ray start --head --block`` in a process group of its own, with every per-node port chosen
free (a machine that already runs another Ray keeps its 52365 dashboard-agent port, and the
job API would have no agent), the job API on ``STRATA_RAY_DASHBOARD_PORT``, workers at normal
priority and this environment's ``python`` on PATH for submitted jobs. Other processes reach
it the usual ways (``ray job submit``, ``ray.init(address=...)``); a signal sent to the
terminal's process group does not reach it, so ``strata serve`` always stops it itself.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from serve_app.request_context import PROXY_CALLBACK
from strata.runtime import RayEndpoint
from strata.settings import Settings
from strata.stores.redis_server import free_port, stop_with_parent

__all__ = ["PROXY_READY_TIMEOUT_S", "LocalRay"]

PROXY_READY_TIMEOUT_S = 60  # Serve's default is 5 s

logger = logging.getLogger(__name__)


def _free_or_any(port: int) -> int:
    """``port`` when it can be bound on 127.0.0.1, else a free one (tests run several)."""
    if port:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
                return port
            except OSError:
                logger.warning("Ray dashboard port %s is taken; using a free port", port)
    return free_port()


GCS_TASK_EVENTS = 10_000  # task events the local GCS keeps (RAY_task_events_max_num_task_in_gcs)


class LocalRay:
    """Starts and stops one local Ray head for this process."""

    def __init__(self, settings: Settings, namespace: str) -> None:
        self._settings = settings
        self._namespace = namespace
        self._proc: subprocess.Popen[bytes] | None = None
        self.endpoint: RayEndpoint | None = None  # once started

    def start(self, timeout_s: float = 120.0) -> RayEndpoint:
        bindir = Path(sys.executable).parent
        gcs, dashboard = free_port(), _free_or_any(self._settings.ray_dashboard_port)
        env = dict(os.environ)
        # jobs submitted to this Ray run `python …`: make it the environment Strata is in;
        # Ray's default (nice 15) would let any other process delay every recall
        env.update(PATH=os.pathsep.join([str(bindir), env.get("PATH", "")]),
                   RAY_worker_niceness="0")
        env.setdefault("RAY_AUTH_MODE", "token")
        # the GCS keeps the events of the last N tasks for the dashboard (Ray's default
        # 100,000): every actor call is a task, so a busy service grew the GCS ~3 MB a
        # minute until the cap; 10,000 keeps minutes of history at a tenth of the memory
        env.setdefault("RAY_task_events_max_num_task_in_gcs", str(GCS_TASK_EVENTS))
        # Serve's proxy echoes X-Request-ID: this drops a client's invalid one first
        env.setdefault("RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH", PROXY_CALLBACK)
        # Serve kills a proxy not ready in 5 s and `serve.start` fails: on a busy machine
        # (the shards and extractors loading their models, mpnet's twice) that was seen
        env.setdefault("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", str(PROXY_READY_TIMEOUT_S))
        if env["RAY_AUTH_MODE"] == "token":
            self._ensure_token(bindir, env)
        log = self._settings.data_dir / "ray-head.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        command = [str(bindir / "ray"), "start", "--head", f"--port={gcs}",
                   "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard}",
                   f"--dashboard-agent-listen-port={free_port()}",
                   f"--runtime-env-agent-port={free_port()}",
                   f"--metrics-export-port={free_port()}",
                   f"--ray-client-server-port={free_port()}", "--block"]
        with log.open("ab") as out:
            self._proc = subprocess.Popen(command, env=env, stdout=out,
                                          stderr=subprocess.STDOUT, start_new_session=True,
                                          preexec_fn=stop_with_parent)
        endpoint = RayEndpoint(gcs_address=f"127.0.0.1:{gcs}",
                               dashboard_url=f"http://127.0.0.1:{dashboard}",
                               namespace=self._namespace, auth_mode=env["RAY_AUTH_MODE"],
                               pid=os.getpid())
        self._wait(endpoint, timeout_s, log)
        self.endpoint = endpoint
        return endpoint

    @staticmethod
    def _ensure_token(bindir: Path, env: dict[str, str]) -> None:
        """A token for this machine's Ray clients (~/.ray/auth_token), as ``ray.init``
        makes one for a new local cluster."""
        if env.get("RAY_AUTH_TOKEN") or env.get("RAY_AUTH_TOKEN_PATH") or (
                Path.home() / ".ray" / "auth_token").exists():
            return
        subprocess.run([str(bindir / "ray"), "get-auth-token", "--generate"], env=env,
                       check=True, capture_output=True)

    def _wait(self, endpoint: RayEndpoint, timeout_s: float, log: Path) -> None:
        """Until the dashboard answers (it starts after the GCS and the raylet)."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self._proc is not None and self._proc.poll() is not None:
                raise RuntimeError(f"`ray start --head` exited ({self._proc.returncode}); "
                                   f"see {log}")
            try:
                # any answer will do: with token authentication it is a 401
                if httpx.get(f"{endpoint.dashboard_url}/api/version", timeout=2).status_code < 500:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the local Ray did not start in {timeout_s:.0f}s; see {log}")
            time.sleep(0.5)

    def stop(self, grace_s: float = 1.0) -> None:
        """SIGTERM to the head's process group (its GCS, raylet, workers), then SIGKILL.

        Called once Strata's actors are stopped and flushed: nothing in this Ray needs to be
        kept, and `ray start --block` would otherwise drain for up to 30 s (a grace of 3 s
        ran out every time, so it is 1 s)."""
        if self._proc is None:
            return
        try:
            os.killpg(self._proc.pid, signal.SIGTERM)
            self._proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
        except ProcessLookupError:
            pass
        self._proc = None
