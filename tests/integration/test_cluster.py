"""Strata on a real 2-node Ray cluster started with the ``ray`` CLI, the way docs/deploy.md
says: ``ray start --head``, ``ray start --address`` for a second node (its own resources and
temp dir), then ``strata serve`` joining the cluster with ``RAY_ADDRESS``; the three batch
jobs by ``ray job submit`` exactly as the guide writes them; the worker node lost under load;
then the Serve app deployed alone with ``serve deploy``.

Both nodes run on this machine (so the ports differ from the guide's 6379/8265 and the HTTP
proxy is on the head only). Everything runs in child processes: this test never joins Ray.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import yaml

from strata import Client, RetryPolicy
from strata.layers.sessions import ShardRing
from strata.models import Scope
from strata.stores.redis_server import EmbeddedRedis, free_port

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
KEY = "cluster-admin-key"
PROBE = """
import json, sys, ray
from ray.util.state import list_actors
ray.init(address=sys.argv[1], namespace="strata", log_to_driver=False)
nodes = {n["NodeID"]: ("worker" if n["Resources"].get("worker_node") else "head")
         for n in ray.nodes() if n["Alive"]}
actors = {a.name: nodes.get(a.node_id, a.node_id) for a in list_actors(
    filters=[("state", "=", "ALIVE")], limit=1000) if a.name}
print(json.dumps({"nodes": sorted(nodes.values()), "actors": actors}))
"""


def _start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=ROOT)


def _stop(proc: subprocess.Popen[bytes], grace_s: float = 20) -> None:
    """SIGTERM to the process group this test started, then SIGKILL."""
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
    tmp: Path
    env: dict[str, str]
    gcs_port: int
    dashboard_port: int
    head: subprocess.Popen[bytes] | None = None
    worker: subprocess.Popen[bytes] | None = None
    others: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    def start_head(self) -> None:
        self.head = _start([str(BIN / "ray"), "start", "--head", f"--port={self.gcs_port}",
                            "--num-cpus=2", "--dashboard-host=127.0.0.1",
                            f"--dashboard-port={self.dashboard_port}",
                            f"--temp-dir={self.tmp / 'head'}", *self._agent_ports(head=True),
                            "--block"], self.env, self.tmp / "head.log")

    def start_worker(self) -> None:
        self.worker = _start([str(BIN / "ray"), "start", f"--address={self.address}",
                              "--num-cpus=2", '--resources={"worker_node": 1}',
                              f"--temp-dir={self.tmp / 'worker'}", *self._agent_ports(),
                              "--block"], self.env, self.tmp / "worker.log")

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
        assert out.returncode == 0, out.stderr[-3000:]
        result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
        return result

    def wait_nodes(self, expected: list[str], timeout_s: float = 120) -> dict[str, object]:
        deadline = time.monotonic() + timeout_s
        while True:
            state = self.probe()
            if state["nodes"] == expected or time.monotonic() > deadline:
                assert state["nodes"] == expected, state
                return state
            time.sleep(2)

    def shell(self, command: str, extra: dict[str, str], timeout_s: float = 300) -> str:
        """A command from docs/deploy.md, run as written (from the repository)."""
        out = subprocess.run(command, shell=True, env={**self.env, **extra}, cwd=ROOT,
                             capture_output=True, text=True, timeout=timeout_s)
        assert out.returncode == 0, f"{command}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        return out.stdout + out.stderr


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    tmp = Path(tempfile.mkdtemp(prefix="sc-", dir="/tmp"))  # short: Ray's socket paths
    redis = EmbeddedRedis(tmp / "redis").start()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STRATA_", "RAY_"))}
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        # the guide: one token for the whole cluster, in every node's and client's env
        RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32),
        STRATA_DATA_DIR=str(tmp / "data"), STRATA_REDIS_URL=redis.url,
        STRATA_API_KEYS=json.dumps({KEY: {"tenant": "acme", "role": "admin"}}),
        STRATA_SESSION_SHARDS="2", STRATA_HOT_PERSIST_EVERY_S="1")
    ray_cluster = RayCluster(tmp, env, free_port(), free_port())
    try:
        ray_cluster.start_head()
        ray_cluster.wait_nodes(["head"])
        ray_cluster.start_worker()
        ray_cluster.wait_nodes(["head", "worker"])
        yield ray_cluster
    finally:
        for proc in [*ray_cluster.others, ray_cluster.worker, ray_cluster.head]:
            if proc is not None:
                _stop(proc)
        redis.stop()
        for log in sorted(tmp.glob("*.log")):  # kept with the test's output when it fails
            print(f"--- {log.name}\n{log.read_text(errors='replace')[-2000:]}")
        shutil.rmtree(tmp, ignore_errors=True)


def _wait_ready(base: str, proc: subprocess.Popen[bytes] | None, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc is None or proc.poll() is None, "the server exited"
        try:
            if httpx.get(f"{base}/readyz", timeout=30).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(2)
    raise AssertionError(f"{base} never became ready")


def _users_on_each_shard(count: int, prefix: str = "user") -> list[str]:
    ring, users = ShardRing(2), []
    for shard in (0, 1):
        users += [u for u in (f"{prefix}-{i}" for i in range(200))
                  if ring.shard_for(Scope(tenant="acme", user=u)) == shard][:count]
    return users


def _remember_and_recall(client: Client, user: str) -> None:
    """A session closed, its fact extracted in the background, then recalled."""
    client.add_turn("intro", user, "user", "I live in Lisbon and I work as a nurse.")
    client.add_turn("intro", user, "assistant", "Nice to meet you!")
    client.close_session("intro", user)
    deadline = time.monotonic() + 180
    while not client.memories(user)["memories"]:
        assert time.monotonic() < deadline, "extraction never wrote the session's memories"
        time.sleep(1)
    answer = client.recall(user, "Where do I live?")
    assert "Lisbon" in answer["context"], answer


class TurnLoad:
    """Writers appending turns (the SDK retries each with its turn_id until acknowledged),
    noting every acknowledgement and the longest gap between two of them per user."""

    def __init__(self, base: str, users: list[str]) -> None:
        self.base, self.users = base, users
        self.acked: dict[str, int] = dict.fromkeys(users, 0)
        self.last_ack: dict[str, float] = {}
        self.longest_gap: dict[str, float] = dict.fromkeys(users, 0.0)
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._write, args=(u,)) for u in users]

    def _write(self, user: str) -> None:
        client = Client(self.base, api_key=KEY, timeout_s=20,
                        retry=RetryPolicy(attempts=40, backoff_s=0.25, max_wait_s=2.0))
        while not self._stop.is_set():
            try:
                client.add_turn("load", user, "user", f"turn {self.acked[user]} of {user}")
            except Exception as exc:  # a turn given up on is a failure of the test
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


def test_strata_serve_on_two_nodes_jobs_and_a_lost_node(cluster: RayCluster) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    serve_proc = _start([str(BIN / "strata"), "serve"],
                        {**cluster.env, "RAY_ADDRESS": cluster.address,
                         "STRATA_HTTP_PORT": str(port)}, cluster.tmp / "strata-serve.log")
    cluster.others.append(serve_proc)
    _wait_ready(base, serve_proc)
    placed = cluster.probe()["actors"]
    assert isinstance(placed, dict)
    shards = {name: node for name, node in placed.items() if name.startswith("strata-shard-")}
    assert sorted(shards.values()) == ["head", "worker"], placed  # SPREAD over the nodes
    assert placed["strata-store-owner"] == "head"  # the milvus-lite file is the head's

    client = Client(base, api_key=KEY, timeout_s=60)
    for user in _users_on_each_shard(1):  # one user on each node's shard
        _remember_and_recall(client, user)

    # the three jobs, exactly as docs/deploy.md writes them
    guide = (ROOT / "docs" / "deploy.md").read_text()
    jobs = [line.strip() for line in guide.splitlines() if line.startswith("ray job submit")]
    assert len(jobs) == 3, jobs
    dashboard = {"RAY_ADDRESS": f"http://127.0.0.1:{cluster.dashboard_port}"}
    outputs = {job.split("jobs.")[1].split()[0]: cluster.shell(job, dashboard) for job in jobs}
    assert '"ok": true' in outputs["knowledge_import"], outputs["knowledge_import"][-2000:]
    assert '"dry_run": true' in outputs["decay_sweep"]
    assert '"model_id": "sentence-transformers/all-MiniLM-L6-v2"' in outputs["reembed"] or (
        "all-MiniLM-L6-v2" in outputs["reembed"]), outputs["reembed"][-2000:]
    found = client.search_knowledge("How does Strata forget?")["results"]
    assert found and found[0]["doc_id"].startswith("strata-"), found

    # the worker node lost under load: its shard restarts on the head from snapshot + WAL
    users = _users_on_each_shard(2)
    with TurnLoad(base, users) as load:
        time.sleep(10)
        assert cluster.worker is not None
        lost_at = time.monotonic()
        os.killpg(cluster.worker.pid, signal.SIGKILL)  # the node is gone, nothing graceful
        cluster.worker.wait()
        deadline = lost_at + 240
        # serving again: every user acknowledged turns after the loss
        while not all(load.last_ack.get(u, 0) > lost_at + 5 for u in users):
            assert not load.failed, load.failed
            assert time.monotonic() < deadline, (load.acked, load.last_ack)
            time.sleep(1)
        time.sleep(5)
    assert not load.failed, load.failed
    outage_s = max(load.longest_gap.values())
    print(f"worker node lost: longest time without an acknowledged turn {outage_s:.1f}s; "
          f"turns acknowledged {sum(load.acked.values())}")
    state = cluster.wait_nodes(["head"])
    assert isinstance(state["actors"], dict)
    assert all(state["actors"][f"strata-shard-{i}"] == "head" for i in (0, 1)), state
    for user in users:  # no acknowledged turn lost, none stored twice
        memory = client.working_memory("load", user)
        assert memory["turn_count"] == load.acked[user], (user, memory["turn_count"],
                                                          load.acked[user])
        last = memory["window"][-1]["content"]
        assert last == f"turn {load.acked[user] - 1} of {user}", last
    (cluster.tmp / "failover.json").write_text(json.dumps(
        {"outage_s": outage_s, "acked": load.acked, "gaps": load.longest_gap}))

    _stop(serve_proc, grace_s=120)
    assert serve_proc.returncode in (0, -signal.SIGKILL), serve_proc.returncode
    cluster.start_worker()  # the node comes back for the next scenario
    cluster.wait_nodes(["head", "worker"])


def test_serve_deploy_alone_starts_its_actors(cluster: RayCluster) -> None:
    """`serve deploy serve_config.yaml`: the app creates its shards, extractors and store
    owner itself, and long-term extraction runs."""
    port = free_port()
    config = yaml.safe_load((ROOT / "serve_config.yaml").read_text())
    # the one change: two nodes on one machine cannot both bind the proxy's port
    config["proxy_location"] = "HeadOnly"
    config["http_options"]["port"] = port
    path = cluster.tmp / "serve_config.yaml"
    path.write_text(yaml.safe_dump(config))
    dashboard = f"http://127.0.0.1:{cluster.dashboard_port}"
    cluster.shell(f"serve deploy {path} --address {dashboard}", {})
    base = f"http://127.0.0.1:{port}"
    _wait_ready(base, None)
    placed = cluster.probe()["actors"]
    assert isinstance(placed, dict)
    assert sorted(v for k, v in placed.items() if k.startswith("strata-shard-")) == [
        "head", "worker"], placed
    assert "strata-extractor-0" in placed and "strata-store-owner" in placed, placed
    client = Client(base, api_key=KEY, timeout_s=60)
    for user in _users_on_each_shard(1, prefix="deployed"):
        _remember_and_recall(client, user)
    metrics = httpx.get(f"{base}/metrics", timeout=30).text
    assert 'strata_requests_total{method="POST",route="/v1/recall",status="200"}' in metrics
    cluster.shell(f"serve shutdown -y --address {dashboard}", {})
