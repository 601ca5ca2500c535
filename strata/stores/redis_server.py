"""An embedded Redis: a real ``redis-server`` process that Strata starts and stops itself.

Used when ``STRATA_REDIS_URL`` is unset, and by the tests. AOF is on, and by default with
``appendfsync always`` (``STRATA_REDIS_APPENDFSYNC``): Redis fsyncs the AOF before it sends
the replies of an event-loop iteration, so an acknowledged write is on disk and survives a
``kill -9`` of Redis (and of the machine). One fsync covers every client's writes of the
iteration, so concurrent writers share its cost. ``everysec`` fsyncs once a second in the
background; while a slow fsync is still running Redis postpones the AOF write (up to 2 s) and
keeps replying, so a ``kill -9`` then loses writes it has acknowledged
(``bench/redis_durability.py`` measures both).
"""

from __future__ import annotations

import ctypes
import logging
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Literal

import redis

from strata.errors import QueueStoreError

__all__ = ["AppendFsync", "EmbeddedRedis", "free_port", "stop_with_parent"]

logger = logging.getLogger(__name__)


AppendFsync = Literal["always", "everysec"]
"""When Redis fsyncs its AOF: before replying (``always``) or once a second (``everysec``)."""

_ABOVE_RAY_WORKERS = 20_000  # Ray's default worker ports end at 19999


def _ephemeral_ports() -> tuple[int, int]:
    """The kernel's range of local ports for outgoing connections."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now, between Ray's worker ports
    (10002–19999, which ``ray start`` refuses to see another component use) and the kernel's
    range for outgoing connections when it can be: a port from that range (what binding
    port 0 gives) can be taken as the local end of any process's next connection before the
    caller binds it — under a busy Ray, a server then fails with "address in use"."""
    low, _ = _ephemeral_ports()
    if low > _ABOVE_RAY_WORKERS + 1000:
        for _ in range(50):
            port = random.randint(_ABOVE_RAY_WORKERS, low - 1)
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_with_parent() -> None:
    """``preexec_fn`` of a child in a session of its own: SIGTERM it when the process that
    started it dies (Linux; strictly, the thread that started it), so a killed ``strata
    serve`` leaves no server behind. A session
    of its own keeps a terminal's Ctrl-C or a group SIGTERM away from it: the parent stops
    it, after the state that needs it is saved."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG


class EmbeddedRedis:
    """A ``redis-server`` child process bound to 127.0.0.1 with its data under ``data_dir``,
    its AOF fsynced per ``appendfsync``."""

    def __init__(self, data_dir: Path, port: int | None = None, binary: str | None = None,
                 appendfsync: AppendFsync = "always") -> None:
        if appendfsync not in ("always", "everysec"):
            raise ValueError(f"appendfsync must be 'always' or 'everysec'; got {appendfsync!r}")
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.appendfsync = appendfsync
        self._binary = binary or shutil.which("redis-server") or "/usr/bin/redis-server"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> EmbeddedRedis:
        if not Path(self._binary).exists():
            raise QueueStoreError(
                "redis-server not found: install it (apt-get install redis-server) "
                "or set STRATA_REDIS_URL to a running Redis"
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [
            self._binary, "--port", str(self.port), "--bind", "127.0.0.1",
            "--dir", str(self.data_dir), "--appendonly", "yes", "--appendfsync", self.appendfsync,
            "--save", "", "--daemonize", "no", "--protected-mode", "yes",
            "--logfile", str(self.data_dir / "redis.log"),
        ]
        self._proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      start_new_session=True, preexec_fn=stop_with_parent)
        deadline = time.monotonic() + timeout_s
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5)
        try:
            while True:
                if self._proc.poll() is not None:
                    err = self._proc.stderr.read().decode() if self._proc.stderr else ""
                    raise QueueStoreError(f"redis-server exited at start: {err.strip()}")
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    if time.monotonic() > deadline:
                        self.stop()
                        raise QueueStoreError("redis-server did not answer in time") from None
                    time.sleep(0.05)
        finally:
            client.close()
        logger.info("embedded redis on %s (data %s)", self.url, self.data_dir)
        return self

    @property
    def pid(self) -> int | None:
        """The redis-server's process id while it runs."""
        return self._proc.pid if self._proc is not None else None

    def kill(self) -> None:
        """SIGKILL (fault injection in tests and benches): no shutdown save, like a crash."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None

    def stop(self) -> None:
        if self._proc is None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._proc = None

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
