"""Scale-out check: turn and recall throughput with Strata on a 1-node and a 2-node Ray
cluster, and what losing the worker node costs (issue #16).

Both clusters run on this machine (``bench.common.raycluster``: ``ray start --head``, then
``ray start --address`` for a worker node with the resource ``worker_node``), so the figures
are a scaling *check*, not a speed-up: two nodes share the same cores. For each node count,
in one run, with a fresh cluster, Redis and data directory each:

1. ``strata serve`` joins the cluster with ``RAY_ADDRESS`` (the real MiniLM embedder,
   ``--shards`` session shards, an admin API key); where every named actor runs is printed.
2. Turns over HTTP for ``--turn-s`` each: one turn per request at ``--single-level`` in
   flight, then batches of ``--batch-size`` turns at ``--batch-level`` in flight, over
   ``--users`` users (one session each per mode, never closed).
3. ``--facts`` explicit facts per user (``POST /v1/users/{uid}/memories``, 8 in flight, at
   most ``--facts-cap-s``), a wait for the head's processes to settle (``--quiet-cores``, at most
   ``--quiet-timeout-s``: the store owner and milvus-lite are on the head), one recall per
   user to load each user's hot index (not counted), then ``POST /v1/recall`` at each of
   ``--recall-levels`` in flight for ``--recall-s``.
4. With 2 nodes: a ``TurnLoad`` (SDK writers with retries) over ``--failover-users`` users on
   every shard for ``--failover-load-s``, the worker node's process group SIGKILLed, the
   load kept until every user has acknowledged turns for 5 s after the loss; then the
   longest time any user went without an acknowledged turn, the first acknowledgement per
   user after the loss, when the probe first saw the node dead and every shard on the head
   (the probe is a Ray driver started anew each time, a few seconds per sample, so these two
   are upper bounds at that resolution), and each user's stored turn count against the
   turns acknowledged to it.

Output: a table (nodes, turns/s single and batched, recall req/s and p50/p99 per level),
the failover figures, and ``--json PATH``. Everything started is stopped at the end, on
errors too (the process groups this benchmark started, never a bare ``ray stop``).

Run (from the repository root, ~12 min on 2 shared cores)::

    .venv/bin/python bench/cluster_scaling.py --json /tmp/cluster_scaling.json
    .venv/bin/python bench/cluster_scaling.py --nodes 2 --turn-s 10 --recall-s 10  # quicker
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common.http_load import run_http
from bench.common.latency_report import fmt, print_series
from bench.common.raycluster import (
    BIN,
    RayCluster,
    TurnLoad,
    cluster_env,
    start_process,
    stop_process,
    wait_ready,
)
from bench.common.server import revision, wait_quiet
from bench.common.workload import UserData, synthetic_users
from strata import Client
from strata.models import Scope
from strata.shard.ring import ShardRing
from strata.stores.redis_server import EmbeddedRedis, free_port

KEY, TENANT = "bench-cluster-admin", "bench"
SHARD = "strata-shard-"


@dataclass
class Deployment:
    """One configuration's running pieces: the cluster, Redis, ``strata serve``."""

    nodes: int
    tmp: Path
    cluster: RayCluster
    redis: EmbeddedRedis
    base: str = ""
    started_s: float = 0.0
    placement: dict[str, str] = field(default_factory=dict)


def new_deployment(nodes: int, shards: int) -> Deployment:
    """A fresh temp dir, Redis and cluster settings (nothing of Ray started yet)."""
    tmp = Path(tempfile.mkdtemp(prefix="cs-", dir="/tmp"))  # short: Ray's socket paths
    redis = EmbeddedRedis(tmp / "redis").start()
    env = cluster_env({
        "STRATA_DATA_DIR": str(tmp / "data"), "STRATA_REDIS_URL": redis.url,
        "STRATA_API_KEYS": json.dumps({KEY: {"tenant": TENANT, "role": "admin"}}),
        "STRATA_SESSION_SHARDS": str(shards)})
    return Deployment(nodes, tmp, RayCluster(tmp, env, free_port(), free_port()), redis)


def launch(dep: Deployment) -> None:
    """The cluster's nodes, then ``strata serve`` joined to it; where its actors are."""
    started = time.monotonic()
    dep.cluster.start_head()
    dep.cluster.wait_nodes(["head"])
    if dep.nodes == 2:
        dep.cluster.start_worker()
        dep.cluster.wait_nodes(["head", "worker"])
    port = free_port()
    dep.base = f"http://127.0.0.1:{port}"
    serve_proc = start_process([str(BIN / "strata"), "serve"],
                               {**dep.cluster.env, "RAY_ADDRESS": dep.cluster.address,
                                "STRATA_HTTP_PORT": str(port)}, dep.tmp / "strata-serve.log")
    dep.cluster.others.append(serve_proc)
    wait_ready(dep.base, serve_proc, timeout_s=900)
    dep.started_s = time.monotonic() - started
    actors = dep.cluster.probe()["actors"]
    assert isinstance(actors, dict)
    dep.placement = {str(k): str(v) for k, v in actors.items()}


def stop_deployment(dep: Deployment, failed: bool) -> None:
    """``strata serve`` first (it snapshots the shards), then the nodes, then Redis."""
    try:
        for proc in dep.cluster.others:
            stop_process(proc, grace_s=120)
        dep.cluster.stop()
    finally:
        dep.redis.stop()
        if failed:
            for log in sorted(dep.tmp.glob("*.log")):
                print(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}")
        shutil.rmtree(dep.tmp, ignore_errors=True)


def print_placement(placement: dict[str, str], shards: int) -> None:
    by_node: dict[str, list[str]] = {}
    for name, node in sorted(placement.items()):
        by_node.setdefault(node, []).append(name.split("#")[1] if "#" in name else name[:24])
    on = {i: placement.get(f"{SHARD}{i}", "?") for i in range(shards)}
    print("  shards: " + ", ".join(f"{i} on {node}" for i, node in on.items()))
    for node, names in sorted(by_node.items()):
        print(f"  {node}: {', '.join(names)}")


# -- turns ------------------------------------------------------------------------------------
def single_turns(base: str, users: list[UserData]) -> Iterator[tuple[str, dict[str, Any]]]:
    """One turn per request, users in turn (requests in flight are different users')."""
    for n in itertools.count():
        user = users[n % len(users)]
        text = user.sessions[0].turns[(n // len(users)) % len(user.sessions[0].turns)].content
        yield (f"{base}/v1/sessions/single/turns",
               {"user_id": user.user_id, "role": "user", "content": text})


def batched_turns(base: str, users: list[UserData],
                  size: int) -> Iterator[tuple[str, dict[str, Any]]]:
    for n in itertools.count():
        user = users[n % len(users)]
        texts = [t.content for t in user.sessions[0].turns]
        yield (f"{base}/v1/sessions/batch/turns/batch",
               {"user_id": user.user_id,
                "turns": [{"role": "user", "content": texts[i % len(texts)]}
                          for i in range(size)]})


# -- recall -----------------------------------------------------------------------------------
def fact_requests(base: str, users: list[UserData]) -> list[tuple[str, dict[str, Any]]]:
    """Every user's memory sentences as explicit facts, one key each (no supersession);
    users interleaved, so a time cap leaves every user with about as many."""
    return [(f"{base}/v1/users/{u.user_id}/memories",
             {"kind": "fact", "key": f"note.{j:03d}", "value": u.sessions[0].turns[j].content})
            for j in range(max(len(u.sessions[0].turns) for u in users))
            for u in users if j < len(u.sessions[0].turns)]


def recall_requests(base: str, users: list[UserData],
                    seed: int) -> Iterator[tuple[str, dict[str, Any]]]:
    rng = random.Random(seed)
    while True:
        user = rng.choice(users)
        yield (f"{base}/v1/recall", {"user_id": user.user_id,
                                     "query": rng.choice(user.questions)})


# -- one configuration ------------------------------------------------------------------------
def throughput(dep: Deployment, args: argparse.Namespace, tag: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {KEY}"}
    users = synthetic_users(args.users, args.facts, f"{tag}-{dep.nodes}n", args.seed,
                            session_turns=args.facts)
    out: dict[str, Any] = {}
    single = run_http(single_turns(dep.base, users), args.single_level, "turn", headers,
                      time_cap_s=args.turn_s)
    print_series(single, f"  {single.per_s:7.1f} turns/s")
    out["single"] = {"turns_per_s": round(single.per_s, 1), **single.summary()}
    batch = run_http(batched_turns(dep.base, users, args.batch_size), args.batch_level,
                     f"batch of {args.batch_size}", headers, time_cap_s=args.turn_s)
    per_s = batch.per_s * args.batch_size
    print_series(batch, f"  {per_s:7.1f} turns/s")
    out["batch"] = {"turns_per_s": round(per_s, 1), **batch.summary()}

    facts = run_http(fact_requests(dep.base, users), 8, "facts", headers,
                     time_cap_s=args.facts_cap_s)
    print_series(facts)
    out["facts"] = facts.summary()
    head = dep.cluster.head
    assert head is not None
    out["settle"] = wait_quiet(head.pid, args.quiet_cores, timeout_s=args.quiet_timeout_s)
    print(f"  settled: {out['settle']}", flush=True)
    first = run_http([(f"{dep.base}/v1/recall", {"user_id": u.user_id, "query": u.questions[0]})
                      for u in users], 1, "first touch", headers)
    print_series(first)
    out["first_touch"] = first.summary()
    out["recall"] = {}
    for level in args.recall_levels:
        series = run_http(recall_requests(dep.base, users, args.seed + level), level, "recall",
                          headers, time_cap_s=args.recall_s)
        print_series(series)
        out["recall"][str(level)] = series.summary()
    return out


def users_on_every_shard(shards: int, per_shard: int, tag: str) -> list[str]:
    ring, users = ShardRing(shards), []
    for shard in range(shards):
        users += [u for u in (f"failover-{tag}-{i}" for i in range(50 * shards))
                  if ring.shard_for(Scope(tenant=TENANT, user=u)) == shard][:per_shard]
    return users


class AckTimes:
    """Every user's acknowledgement times, sampled from a ``TurnLoad`` every 20 ms (turns
    are acknowledged ~50 ms apart at best, so a gap longer than that is seen whole)."""

    def __init__(self, load: TurnLoad) -> None:
        self.load = load
        self.times: dict[str, list[float]] = {u: [] for u in load.users}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample)

    def _sample(self) -> None:
        while not self._stop.is_set():
            for user, times in self.times.items():
                last = self.load.last_ack.get(user)
                if last is not None and (not times or last != times[-1]):
                    times.append(last)
            time.sleep(0.02)

    def serving_again_s(self, user: str, lost_at: float) -> float | None:
        """When, after the loss, the longest gap spanning or following it ended."""
        times = [t for t in self.times[user] if t > lost_at - 60]
        gaps = [(b - a, b) for a, b in itertools.pairwise(times) if b > lost_at]
        return max(gaps)[1] - lost_at if gaps else None

    def __enter__(self) -> AckTimes:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def watch_recovery(dep: Deployment, load: TurnLoad, lost_at: float,
                   timeout_s: float, shards: int) -> dict[str, float]:
    """Probe until the node is seen dead, every shard is on the head and every user has
    acknowledged turns for 5 s after the loss; seconds after the loss of the first two."""
    seen: dict[str, float] = {}
    while not ({"dead", "shards"} <= seen.keys() and all(
            load.last_ack.get(u, 0) > lost_at + 5 for u in load.users)):
        if time.monotonic() > lost_at + timeout_s:
            raise RuntimeError(f"no recovery in {timeout_s}s: {seen}, {load.acked}, "
                               f"{load.failed}")
        try:
            state = dep.cluster.probe()
        except RuntimeError as exc:  # a driver during the node's loss: try again
            print(f"  probe failed: {str(exc)[-300:]}", flush=True)
            continue
        now = time.monotonic() - lost_at
        actors = state["actors"]
        assert isinstance(actors, dict)
        if state["nodes"] == ["head"]:
            seen.setdefault("dead", now)
        if all(actors.get(f"{SHARD}{i}") == "head" for i in range(shards)):
            seen.setdefault("shards", now)
    return seen


def failover(dep: Deployment, args: argparse.Namespace, tag: str) -> dict[str, Any]:
    """The worker node lost under a turn load; see the module docstring, step 4."""
    users = users_on_every_shard(args.shards, args.failover_users // args.shards, tag)
    on_worker = sorted(i for i in range(args.shards)
                       if dep.placement.get(f"{SHARD}{i}") == "worker")
    with TurnLoad(dep.base, KEY, users) as load, AckTimes(load) as acks:
        time.sleep(args.failover_load_s)
        before = sum(load.acked.values())
        lost_at = time.monotonic()
        dep.cluster.lose_worker()
        seen = watch_recovery(dep, load, lost_at, args.failover_timeout_s, args.shards)
        time.sleep(5)
    back = {u: acks.serving_again_s(u, lost_at) for u in users}
    client = Client(dep.base, api_key=KEY, timeout_s=60)
    views = {u: client.working_memory("load", u) for u in users}
    stored = {u: views[u]["turn_count"] for u in users}
    lost = {u: load.acked[u] - stored[u] for u in users if stored[u] != load.acked[u]}
    # the last turn stored is the last one acknowledged (none lost, none stored twice)
    wrong_last = [u for u in users if views[u]["window"][-1]["content"]
                  != f"turn {load.acked[u] - 1} of {u}"]
    ring = ShardRing(args.shards)
    shard_of = {u: ring.shard_for(Scope(tenant=TENANT, user=u)) for u in users}
    result = {
        "users": len(users), "shards_on_worker": on_worker,
        "turns_acked_before_loss": before, "turns_acked": sum(load.acked.values()),
        "outage_s": round(load.outage_s, 2),
        "gap_s_by_user": {u: round(g, 2) for u, g in load.longest_gap.items()},
        "serving_again_s_by_user": {u: None if t is None else round(t, 2)
                                    for u, t in back.items()},
        "shard_by_user": shard_of,
        "node_seen_dead_s": round(seen["dead"], 1),
        "shards_on_head_s": round(seen["shards"], 1),
        "failed_writers": load.failed, "turns_stored_vs_acked_mismatch": lost,
        "last_turn_not_the_last_acked": wrong_last}
    return result


def print_failover(f: dict[str, Any]) -> None:
    worker_users = [u for u, s in f["shard_by_user"].items() if s in f["shards_on_worker"]]
    head_users = [u for u in f["shard_by_user"] if u not in worker_users]

    def worst(users: list[str], key: str) -> str:
        values = [v for v in (f[key].get(u) for u in users) if v is not None]
        return fmt(max(values, default=None), ".1f", " s")

    print(f"\nfailover: {f['users']} users, shards {f['shards_on_worker']} on the worker")
    print(f"  longest time without an acknowledged turn: {f['outage_s']:.1f} s "
          f"(users on the worker's shards {worst(worker_users, 'gap_s_by_user')}, "
          f"on the head's {worst(head_users, 'gap_s_by_user')})")
    print(f"  serving again (end of the longest gap) after the loss, worst user: worker's "
          f"shards {worst(worker_users, 'serving_again_s_by_user')}, head's "
          f"{worst(head_users, 'serving_again_s_by_user')}")
    print(f"  probe saw the node dead after {f['node_seen_dead_s']} s, every shard on the head "
          f"after {f['shards_on_head_s']} s")
    print(f"  turns acknowledged {f['turns_acked']} ({f['turns_acked_before_loss']} before the "
          f"loss); stored != acknowledged for {len(f['turns_stored_vs_acked_mismatch'])} users "
          f"{f['turns_stored_vs_acked_mismatch'] or ''}, last turn stored != last "
          f"acknowledged for {len(f['last_turn_not_the_last_acked'])}; writers given up: "
          f"{len(f['failed_writers'])}")


def print_table(results: list[dict[str, Any]], levels: list[int]) -> None:
    cols = ["nodes", "turns/s single (p50/p99 ms)", "turns/s batched (p50/p99 ms)"] + [
        f"recall req/s @{lv} (p50/p99 ms)" for lv in levels]
    print("\n| " + " | ".join(cols) + " |\n|" + "---:|" * len(cols))
    for r in results:
        t = r["throughput"]
        cells = [str(r["nodes"])] + [
            f"{t[m]['turns_per_s']:.1f} ({fmt(t[m]['p50_ms'], '.0f')}/"
            f"{fmt(t[m]['p99_ms'], '.0f')})" for m in ("single", "batch")] + [
            f"{s['req_per_s']:.2f} ({fmt(s['p50_ms'], '.0f')}/{fmt(s['p99_ms'], '.0f')})"
            for s in (t["recall"][str(lv)] for lv in levels)]
        print("| " + " | ".join(cells) + " |")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--nodes", default="1,2", help="node counts, each a fresh cluster")
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--users", type=int, default=32)
    p.add_argument("--turn-s", type=float, default=30.0)
    p.add_argument("--single-level", type=int, default=16)
    p.add_argument("--batch-level", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=50)
    p.add_argument("--facts", type=int, default=30, help="explicit facts per user")
    p.add_argument("--facts-cap-s", type=float, default=300.0,
                   help="stop writing facts after this long (users in order)")
    p.add_argument("--recall-levels", default="1,8")
    p.add_argument("--recall-s", type=float, default=30.0)
    p.add_argument("--quiet-cores", type=float, default=1.0)
    p.add_argument("--quiet-timeout-s", type=float, default=90.0)
    p.add_argument("--failover-users", type=int, default=8)
    p.add_argument("--failover-load-s", type=float, default=10.0)
    p.add_argument("--failover-timeout-s", type=float, default=300.0)
    p.add_argument("--seed", type=int, default=16)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    args.nodes = [int(n) for n in args.nodes.split(",")]
    args.recall_levels = [int(n) for n in args.recall_levels.split(",")]
    if not set(args.nodes) <= {1, 2}:
        p.error("--nodes: 1 and/or 2")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tag = f"{random.randrange(16**6):06x}"
    print(f"python {platform.python_version()}, {os.cpu_count()} cpus, load avg "
          f"{os.getloadavg()[0]:.2f}; strata {revision()}; run tag {tag}; "
          f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC", flush=True)
    report: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()},
                              "revision": revision(), "tag": tag, "results": []}
    started = time.monotonic()
    for nodes in args.nodes:
        print(f"\n== {nodes} node{'s' if nodes > 1 else ''} ==", flush=True)
        dep = new_deployment(nodes, args.shards)
        failed = True
        try:
            launch(dep)
            print(f"  cluster and strata serve ready in {dep.started_s:.0f} s; load avg "
                  f"{os.getloadavg()[0]:.2f}", flush=True)
            print_placement(dep.placement, args.shards)
            result: dict[str, Any] = {"nodes": nodes, "ready_s": round(dep.started_s, 1),
                                      "placement": dep.placement,
                                      "throughput": throughput(dep, args, tag)}
            if nodes == 2:
                result["failover"] = failover(dep, args, tag)
                print_failover(result["failover"])
            report["results"].append(result)
            failed = False
        finally:
            stop_deployment(dep, failed)
    print_table(report["results"], args.recall_levels)
    for r in report["results"]:
        if "failover" in r:
            print_failover(r["failover"])
    report["wall_s"] = round(time.monotonic() - started, 1)
    print(f"\nwall {report['wall_s']:.0f} s; load avg {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
