"""A Strata server for a benchmark: ``strata serve`` as a subprocess, readiness, revision.

The server is started with its own data directory, its own local Ray and embedded Redis
(what ``strata serve`` does), and stopped with SIGTERM to its pid only: ``serve_forever``
then tears down Serve, the actors, Ray and Redis itself.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

import httpx

from bench.common.process_cpu import process_tree, tree_cpu_seconds

__all__ = ["StrataServer", "free_port", "port_in_use", "revision", "wait_ready"]

REPO = Path(__file__).resolve().parents[2]


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(base: str, timeout_s: float = 900,
               alive: subprocess.Popen[bytes] | None = None) -> float:
    """Poll ``GET /readyz`` until 200; seconds waited. Raises if ``alive`` exits first."""
    started = time.monotonic()
    last = ""
    while time.monotonic() - started < timeout_s:
        if alive is not None and alive.poll() is not None:
            raise RuntimeError(f"the server exited with {alive.returncode} before it was ready")
        try:
            resp = httpx.get(f"{base}/readyz", timeout=60)
            if resp.status_code == 200:
                return time.monotonic() - started
            last = f"{resp.status_code} {resp.text[:300]}"
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(1.0)
    raise RuntimeError(f"the app never became ready in {timeout_s:.0f} s: {last}")


def revision(root: Path = REPO) -> str:
    """Short HEAD, plus a mark when the server packages have uncommitted changes."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "strata",
                                "actors", "serve_app"], capture_output=True, text=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "(unknown revision)"
    return f"{head}{' + uncommitted changes' if dirty else ''}"


def wait_quiet(root: int, cores: float = 0.15, window_s: float = 10.0,
               timeout_s: float = 1800.0) -> dict[str, float]:
    """Wait until the process tree under ``root`` uses less than ``cores`` of CPU over a
    ``window_s`` window (a server finishing background work after a bulk load: milvus-lite
    compacts segments and builds HNSW indexes for minutes after 100k rows), at most
    ``timeout_s``; returns the seconds waited and the last window's CPU share."""
    started = time.monotonic()
    share = float("inf")
    while time.monotonic() - started < timeout_s:
        pids = process_tree(root)
        before = tree_cpu_seconds(pids)
        time.sleep(window_s)
        share = (tree_cpu_seconds(pids) - before) / window_s
        if share < cores:
            break
    return {"waited_s": round(time.monotonic() - started, 1), "last_cores": round(share, 3)}


class StrataServer:
    """``<strata_bin> serve`` with ``STRATA_DATA_DIR``/``STRATA_HTTP_PORT`` and ``env`` on top
    of ``base_env`` (default: this process's environment); its output goes to
    ``<data_dir>/server.log``."""

    def __init__(self, strata_bin: Path, data_dir: Path, port: int,
                 env: dict[str, str] | None = None,
                 base_env: dict[str, str] | None = None) -> None:
        self.strata_bin = strata_bin
        self.data_dir = data_dir
        self.port = port
        self.env = dict(env or {})
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.base = f"http://127.0.0.1:{port}"
        self.log_path = data_dir / "server.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self, ready_timeout_s: float = 900) -> float:
        """Start and wait until ready; returns the seconds it took."""
        env = {**self.base_env, "STRATA_DATA_DIR": str(self.data_dir),
               "STRATA_HTTP_PORT": str(self.port), **self.env}
        env.pop("RAY_ADDRESS", None)  # always a local Ray of its own
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            # a session of its own: a Ctrl-C in the terminal reaches the benchmark, which
            # then stops the server through ``stop`` (SIGTERM to this pid)
            self._proc = subprocess.Popen([str(self.strata_bin), "serve"], env=env,
                                          cwd=str(REPO), stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True)
        started = time.monotonic()
        try:
            wait_ready(self.base, ready_timeout_s, alive=self._proc)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}\n--- last lines of {self.log_path} ---\n"
                               f"{self.log_tail()}") from exc
        return time.monotonic() - started

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self, timeout_s: float = 180) -> None:
        """SIGTERM to the server's pid; SIGKILL to the same pid if it hangs."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            print(f"warning: strata serve (pid {proc.pid}) ignored SIGTERM for {timeout_s:.0f} s;"
                  " sending SIGKILL to that pid", flush=True)
            proc.kill()
            proc.wait(timeout=30)

    def __enter__(self) -> StrataServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
