"""A real Ray cluster of several nodes on this machine, started with the ``ray`` CLI as
docs/deploy.md does (``ray start --head``, ``ray start --address``), each node with its own
ports and temp dir; and a turn load that measures an outage. Used by
tests/integration/test_cluster.py and bench/cluster_scaling.py. Nothing here joins Ray: the
probe runs in a child process.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import server
from strata import Client, RetryPolicy
from strata.stores.redis_server import free_port

__all__ = ["RayCluster", "TurnLoad", "cluster_env", "start_process", "stop_process",
           "wait_ready"]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PROBE = """
import json, sys, ray
from ray.util.state import list_actors
ray.init(address=sys.argv[1], namespace="strata", log_to_driver=False)
nodes = {n["NodeID"]: ("worker" if n["Resources"].get("worker_node") else "head")
         for n in ray.nodes() if n["Alive"]}
actors = {a.name: nodes.get(a.node_id, a.node_id) for a in list_actors(
    address=sys.argv[1], filters=[("state", "=", "ALIVE")], limit=1000) if a.name}
print(json.dumps({"nodes": sorted(nodes.values()), "actors": actors}))
"""


def cluster_env(strata: dict[str, str]) -> dict[str, str]:
    """The environment of every node, driver and client, as docs/deploy.md sets it: this
    venv first on PATH, one Ray token for the whole cluster, the same STRATA_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STRATA_", "RAY_"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", RAY_AUTH_MODE="token",
               RAY_AUTH_TOKEN=secrets.token_hex(32), **strata)
    return env


def start_process(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=ROOT)


def stop_process(proc: subprocess.Popen[bytes], grace_s: float = 20) -> None:
    """SIGTERM to the process group we started, then SIGKILL (never a bare `ray stop`)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace_s)
    # children of `ray start --block` (raylet, GCS, workers) share its group
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@dataclass
class RayCluster:
    """A head and at most one worker node (resource ``worker_node``), each `ray start --block`
    in a process group of its own so that stopping it stops exactly its processes."""

    tmp: Path
    env: dict[str, str]
    gcs_port: int
    dashboard_port: int
    head: subprocess.Popen[bytes] | None = None
    worker: subprocess.Popen[bytes] | None = None
    others: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def dashboard(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    def start_head(self) -> None:
        self.head = start_process(
            [str(BIN / "ray"), "start", "--head", f"--port={self.gcs_port}", "--num-cpus=2",
             "--dashboard-host=127.0.0.1", f"--dashboard-port={self.dashboard_port}",
             f"--temp-dir={self.tmp / 'head'}", *self._agent_ports(head=True), "--block"],
            self.env, self.tmp / "head.log")

    def start_worker(self) -> None:
        self.worker = start_process(
            [str(BIN / "ray"), "start", f"--address={self.address}", "--num-cpus=2",
             '--resources={"worker_node": 1}', f"--temp-dir={self.tmp / 'worker'}",
             *self._agent_ports(), "--block"], self.env, self.tmp / "worker.log")

    def lose_worker(self) -> None:
        """The worker node gone at once (SIGKILL to its whole process group)."""
        if self.worker is not None:
            os.killpg(self.worker.pid, signal.SIGKILL)
            self.worker.wait()

    def stop(self) -> None:
        for proc in [*self.others, self.worker, self.head]:
            if proc is not None:
                stop_process(proc)

    @staticmethod
    def _agent_ports(head: bool = False) -> list[str]:
        # two nodes on one machine: every per-node port must differ
        ports = [f"--dashboard-agent-listen-port={free_port()}",
                 f"--runtime-env-agent-port={free_port()}",
                 f"--metrics-export-port={free_port()}"]
        return [*ports, f"--ray-client-server-port={free_port()}"] if head else ports

    def probe(self) -> dict[str, object]:
        out = subprocess.run([sys.executable, "-c", PROBE, self.address], env=self.env,
                             capture_output=True, text=True, timeout=120, cwd=ROOT)
        if out.returncode != 0:
            raise RuntimeError(f"probe failed: {out.stderr[-3000:]}")
        # Ray may print after the JSON line (a lost node's warnings)
        result: dict[str, object] = json.loads(
            [line for line in out.stdout.splitlines() if line.startswith("{")][-1])
        return result

    def wait_nodes(self, expected: list[str], timeout_s: float = 120) -> dict[str, object]:
        deadline = time.monotonic() + timeout_s
        while True:
            state = self.probe()
            if state["nodes"] == expected:
                return state
            if time.monotonic() > deadline:
                raise RuntimeError(f"expected nodes {expected}, have {state}")
            time.sleep(2)

    def shell(self, command: str, extra: dict[str, str], timeout_s: float = 300) -> str:
        """A command from docs/deploy.md, run as written (from the repository)."""
        out = subprocess.run(command, shell=True, env={**self.env, **extra}, cwd=ROOT,
                             capture_output=True, text=True, timeout=timeout_s)
        if out.returncode != 0:
            raise RuntimeError(f"{command}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        return out.stdout + out.stderr


def wait_ready(base: str, proc: subprocess.Popen[bytes] | None, timeout_s: float = 300) -> None:
    """``GET /readyz`` answers 200 (``bench.common.server.wait_ready``, ``proc`` alive)."""
    server.wait_ready(base, timeout_s, alive=proc)


class TurnLoad:
    """Writers appending turns (the SDK retries each with its turn_id until acknowledged),
    noting every acknowledgement and the longest gap between two of them per user."""

    def __init__(self, base: str, api_key: str, users: list[str], session: str = "load"
                 ) -> None:
        self.base, self.api_key, self.users, self.session = base, api_key, users, session
        self.acked: dict[str, int] = dict.fromkeys(users, 0)
        self.last_ack: dict[str, float] = {}
        self.longest_gap: dict[str, float] = dict.fromkeys(users, 0.0)
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._write, args=(u,)) for u in users]

    @property
    def outage_s(self) -> float:
        """The longest time any user went without an acknowledged turn."""
        return max(self.longest_gap.values(), default=0.0)

    def _write(self, user: str) -> None:
        client = Client(self.base, api_key=self.api_key, timeout_s=20,
                        retry=RetryPolicy(attempts=40, backoff_s=0.25, max_wait_s=2.0))
        while not self._stop.is_set():
            try:
                client.add_turn(self.session, user, "user", f"turn {self.acked[user]} of {user}")
            except Exception as exc:  # a turn given up on: reported, the writer stops
                self.failed.append(f"{user}: {exc!r}")
                return
            now = time.monotonic()
            if user in self.last_ack:
                self.longest_gap[user] = max(self.longest_gap[user], now - self.last_ack[user])
            self.last_ack[user] = now
            self.acked[user] += 1
            time.sleep(0.05)

    def __enter__(self) -> TurnLoad:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=120)


