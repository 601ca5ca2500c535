"""Run in its own process by test_multinode.py: a 2-node local Ray cluster, the knowledge
import job and the decay sweep, reporting which nodes did the work (JSON on the last line)."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import ray
from ray.cluster_utils import Cluster

from actors.directory import ShardDirectory
from actors.store_owner import start_store_owner
from jobs import knowledge_import
from jobs.decay_sweep import sweep_all
from strata.layers.memory_models import MemoryCreate
from strata.models import MemoryKind, Scope
from strata.settings import Settings
from strata.stores.redis_server import EmbeddedRedis

NAMESPACE = "strata"


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="strata-multinode-"))
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace=NAMESPACE, log_to_driver=False)
    deadline = time.monotonic() + 60
    # SPREAD places by the resources the scheduler sees: wait until both nodes' CPUs show
    while ray.available_resources().get("CPU", 0) < 2:
        if time.monotonic() > deadline:
            raise RuntimeError(f"cluster resources never appeared: {ray.available_resources()}")
        time.sleep(0.2)
    redis = EmbeddedRedis(tmp / "redis").start()
    try:
        settings = Settings(data_dir=tmp, embedder="hash", hash_dim=64, redis_url=redis.url,
                            session_shards=2)
        ray.get(start_store_owner(settings, 64, NAMESPACE).ping.remote())
        shards = ShardDirectory.start(settings.model_dump(mode="json"), 2, NAMESPACE)
        shard_nodes = ray.get([h.node_id.remote() for h in shards.handles])
        for i in range(12):
            scope = Scope(tenant="acme", user=f"user{i}")
            ray.get(shards.for_scope(scope).create_memory.remote(scope, MemoryCreate(
                kind=MemoryKind.FACT, key="city", value=f"city {i}")))
        counts, per_shard = sweep_all(settings, dry_run=False, namespace=NAMESPACE)
        docs = tmp / "kb"
        docs.mkdir()
        for i in range(8):
            (docs / f"doc{i}.md").write_text(
                "\n\n".join(f"Document {i}, section {j}: " + "policy details " * 30
                            for j in range(6)))
        # 0.9 CPU an actor on 1-CPU nodes: two embedding actors cannot share a node
        report, import_nodes = knowledge_import.run(docs, "acme", settings, [], actors=2,
                                                    batch_size=4, actor_cpus=0.9)
        print(json.dumps({
            "nodes": [n["NodeID"] for n in ray.nodes() if n["Alive"]],
            "shard_nodes": shard_nodes, "per_shard": per_shard,
            "sweep_users": counts.users, "sweep_nodes": sorted(
                {shard_nodes[i] for i, n in per_shard.items() if n}),
            "import_ok": report.ok, "import_added": report.added,
            "import_nodes": sorted(import_nodes)}))
        shards.shutdown()
    finally:
        redis.stop()
        ray.shutdown()
        cluster.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
