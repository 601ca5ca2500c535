"""Strata on a real 2-node Ray cluster started with the ``ray`` CLI, the way docs/deploy.md
says: ``ray start --head``, ``ray start --address`` for a second node (its own resources and
temp dir), then ``strata serve`` joining the cluster with ``RAY_ADDRESS``; the three batch
jobs by ``ray job submit`` exactly as the guide writes them; the worker node lost under load,
then back (the placement keeper moves a shard onto it); then the Serve app deployed alone
with ``serve deploy``.

Both nodes run on this machine (so the ports differ from the guide's 6379/8265 and the HTTP
proxy is on the head only). Everything runs in child processes: this test never joins Ray.
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from bench.common.raycluster import (
    RayCluster,
    TurnLoad,
    cluster_env,
    start_process,
    stop_process,
    wait_ready,
)
from strata import Client
from strata.models import Scope
from strata.shard.ring import ShardRing
from strata.stores.redis_server import EmbeddedRedis, free_port

# the tiers it needs: two Ray nodes from the `ray` CLI, an embedded Redis
pytestmark = [pytest.mark.cluster, pytest.mark.ray, pytest.mark.redis]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
KEY = "cluster-admin-key"


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    tmp = Path(tempfile.mkdtemp(prefix="sc-", dir="/tmp"))  # short: Ray's socket paths
    redis = EmbeddedRedis(tmp / "redis").start()
    env = cluster_env({
        "STRATA_DATA_DIR": str(tmp / "data"), "STRATA_REDIS_URL": redis.url,
        "STRATA_API_KEYS": json.dumps({KEY: {"tenant": "acme", "role": "admin"}}),
        "STRATA_SESSION_SHARDS": "2", "STRATA_HOT_PERSIST_EVERY_S": "1",
        "STRATA_REBALANCE_EVERY_S": "3"})
    ray_cluster = RayCluster(tmp, env, free_port(), free_port())
    try:
        ray_cluster.start_head()
        ray_cluster.wait_nodes(["head"])
        ray_cluster.start_worker()
        ray_cluster.wait_nodes(["head", "worker"])
        yield ray_cluster
    finally:
        ray_cluster.stop()
        redis.stop()
        for log in sorted(tmp.glob("*.log")):  # kept with the test's output when it fails
            print(f"--- {log.name}\n{log.read_text(errors='replace')[-2000:]}")
        shutil.rmtree(tmp, ignore_errors=True)


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


def test_strata_serve_on_two_nodes_jobs_and_a_lost_node(cluster: RayCluster) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    serve_proc = start_process([str(BIN / "strata"), "serve"],
                        {**cluster.env, "RAY_ADDRESS": cluster.address,
                         "STRATA_HTTP_PORT": str(port)}, cluster.tmp / "strata-serve.log")
    cluster.others.append(serve_proc)
    wait_ready(base, serve_proc)
    placed = _spread(cluster)  # SPREAD over the nodes (or the keeper's first move)
    assert placed["strata-store-owner"] == "head"  # the milvus-lite file is the head's
    replicas = {name: node for name, node in placed.items() if name.startswith("SERVE_")}
    assert replicas and set(replicas.values()) == {"head"}, replicas  # with its one proxy

    client = Client(base, api_key=KEY, timeout_s=60)
    for user in _users_on_each_shard(1):  # one user on each node's shard
        _remember_and_recall(client, user)

    # the three jobs, exactly as docs/deploy.md writes them
    guide = (ROOT / "docs" / "deploy.md").read_text()
    jobs = [line.strip() for line in guide.splitlines() if line.startswith("ray job submit")]
    assert len(jobs) == 3, jobs
    dashboard = {"RAY_ADDRESS": cluster.dashboard}
    outputs = {job.split("jobs.")[1].split()[0]: cluster.shell(job, dashboard) for job in jobs}
    assert '"ok": true' in outputs["knowledge_import"], outputs["knowledge_import"][-2000:]
    assert '"dry_run": true' in outputs["decay_sweep"]
    assert '"model_id": "sentence-transformers/all-MiniLM-L6-v2"' in outputs["reembed"] or (
        "all-MiniLM-L6-v2" in outputs["reembed"]), outputs["reembed"][-2000:]
    found = client.search_knowledge("How does Strata forget?")["results"]
    assert found and found[0]["doc_id"].startswith("strata-"), found

    # the worker node lost under load: its shard restarts on the head from snapshot + WAL
    users = _users_on_each_shard(2)
    with TurnLoad(base, KEY, users) as load:
        time.sleep(10)
        lost_at = time.monotonic()
        cluster.lose_worker()  # the node is gone, nothing graceful
        deadline = lost_at + 240
        # serving again: every user acknowledged turns after the loss
        while not all(load.last_ack.get(u, 0) > lost_at + 5 for u in users):
            assert not load.failed, load.failed
            assert time.monotonic() < deadline, (load.acked, load.last_ack)
            time.sleep(1)
        time.sleep(5)
    assert not load.failed, load.failed
    outage_s = load.outage_s
    print(f"worker node lost: longest time without an acknowledged turn {outage_s:.1f}s; "
          f"turns acknowledged {sum(load.acked.values())}")
    state = cluster.wait_nodes(["head"])
    assert isinstance(state["actors"], dict)
    assert all(state["actors"][f"strata-shard-{i}"] == "head" for i in (0, 1)), state
    _all_kept(client, load)
    (cluster.tmp / "failover.json").write_text(json.dumps(
        {"outage_s": outage_s, "acked": load.acked, "gaps": load.longest_gap}))

    # the node comes back under load: the placement keeper moves a shard onto it
    with TurnLoad(base, KEY, users, session="rebalance") as load:
        time.sleep(5)
        back_at = time.monotonic()
        cluster.start_worker()
        _spread(cluster, timeout_s=240, load=load)
        spread_at = time.monotonic()
        while not all(load.last_ack.get(u, 0) > spread_at + 2 for u in users):
            assert not load.failed, load.failed
            assert time.monotonic() < spread_at + 120, (load.acked, load.last_ack)
            time.sleep(1)
        time.sleep(3)
    assert not load.failed, load.failed
    print(f"worker node back: shards spread again {spread_at - back_at:.1f}s after it "
          f"started; longest time without an acknowledged turn {load.outage_s:.1f}s; turns "
          f"acknowledged {sum(load.acked.values())}")
    _all_kept(client, load)
    for user in (users[0], users[2]):  # each shard's first user, moved or not, recalls
        assert "Lisbon" in client.recall(user, "Where do I live?")["context"]

    stop_process(serve_proc, grace_s=120)
    assert serve_proc.returncode in (0, -signal.SIGKILL), serve_proc.returncode


def _spread(cluster: RayCluster, timeout_s: float = 90,
            load: TurnLoad | None = None, also: tuple[str, ...] = ()) -> dict[str, str]:
    """The named actors' nodes, once the two shards are on the two nodes (and the actors
    named in ``also`` are placed: the app creates them after its shards)."""
    deadline = time.monotonic() + timeout_s
    while True:
        placed = cluster.probe()["actors"]
        assert isinstance(placed, dict)
        if sorted(v for k, v in placed.items() if k.startswith("strata-shard-")) == [
                "head", "worker"] and all(name in placed for name in also):
            return placed
        assert load is None or not load.failed, load.failed
        assert time.monotonic() < deadline, placed
        time.sleep(2)


def _all_kept(client: Client, load: TurnLoad) -> None:
    """No acknowledged turn lost, none stored twice, in order."""
    for user in load.users:
        memory = client.working_memory(load.session, user)
        assert memory["turn_count"] == load.acked[user], (user, memory["turn_count"],
                                                          load.acked[user])
        last = memory["window"][-1]["content"]
        assert last == f"turn {load.acked[user] - 1} of {user}", last


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
    dashboard = cluster.dashboard
    cluster.shell(f"serve deploy {path} --address {dashboard}", {})
    base = f"http://127.0.0.1:{port}"
    wait_ready(base, None)
    placed = _spread(cluster, also=("strata-extractor-0", "strata-store-owner"))
    assert "strata-extractor-0" in placed and "strata-store-owner" in placed, placed
    client = Client(base, api_key=KEY, timeout_s=60)
    for user in _users_on_each_shard(1, prefix="deployed"):
        _remember_and_recall(client, user)
    metrics = httpx.get(f"{base}/metrics", timeout=30,
                        headers={"Authorization": f"Bearer {KEY}"}).text
    assert 'strata_requests_total{method="POST",route="/v1/recall",status="200"}' in metrics
    cluster.shell(f"serve shutdown -y --address {dashboard}", {})
