"""Batched turn ingestion over HTTP, A/B between source trees in the same run, with the CPU
seconds each part of the app spent per turn (``bench.common.process_cpu``).

Each tree gets its own `strata serve` (its own local Ray, embedded Redis, the packaged
MiniLM), started with ``PYTHONPATH`` set to the tree, so the installed console script runs
that tree's code; the trees alternate for ``--rounds`` rounds. Per server: 4 warm-up batches,
then ``--runs`` runs of ``--batches`` synthetic users' 100-turn batches at 32 in flight
(`bench.common.workload.synthetic_users`, all user turns, 60 % stating a fact).

    git worktree add /tmp/base <commit>
    .venv/bin/python bench/ingest_cpu.py base=/tmp/base new=.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench.common.server as server_mod
from bench.common import strata_http as api
from bench.common.process_cpu import cpu_delta, cpu_snapshot
from bench.common.server import StrataServer
from bench.common.workload import synthetic_users

ROLES = ("shards", "Ingress", "Serve proxy", "StoreOwner", "redis")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trees", nargs="+", help="NAME=PATH of a source tree")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--batches", type=int, default=65)
    p.add_argument("--port", type=int, default=8137)
    args = p.parse_args()
    trees = [t.split("=", 1) for t in args.trees]
    headers = {"Authorization": "Bearer dev"}
    strata = Path(sys.executable).with_name("strata")
    print(f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}", flush=True)
    for rnd in range(args.rounds):
        for name, tree in trees:
            root = Path(tree).resolve()
            server_mod.REPO = root  # the server's working directory
            data = Path(tempfile.mkdtemp(prefix=f"strata-ingest-{name}-"))
            with StrataServer(strata, data, args.port, env={"PYTHONPATH": str(root)}) as srv:
                srv.start()
                warm = synthetic_users(4, 100, f"warm{rnd}", 3, questions_per_user=0)
                api.ingest(srv.base, headers, warm, 8, batch=True, label="warm-up")
                time.sleep(5)
                for run in range(args.runs):
                    users = synthetic_users(args.batches, 100, f"{name}{rnd}{run}", 11 + run,
                                            questions_per_user=0)
                    before, t0 = cpu_snapshot(srv.pid), time.monotonic()
                    res = api.ingest(srv.base, headers, users, 32, batch=True, label="batched")
                    seconds = time.monotonic() - t0
                    spent = cpu_delta(before, cpu_snapshot(srv.pid))
                    per = {k: v / res.turns * 1000 for k, v in spent.items()}
                    parts = ", ".join(f"{k} {per.get(k, 0.0):.2f}" for k in ROLES)
                    print(f"{time.strftime('%H:%M:%S')} {name} round {rnd} run {run}: "
                          f"{res.turns / seconds:7.1f} turns/s; CPU "
                          f"{sum(per.values()):.2f} ms/turn ({parts}); "
                          f"load {os.getloadavg()[0]:.1f}", flush=True)
                    time.sleep(8)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
