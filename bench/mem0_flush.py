"""mem0's search before and after its milvus-lite collection is flushed.

mem0 never flushes; milvus-lite searches unflushed ("growing") rows slowly. The recall
latency benchmark (``bench/recall_latency.py``) measures mem0 as it runs out of the box;
this one adds the same users' turns (the same workload, seed and batch embedding) and times
``search`` at 1 and 8 in flight unflushed, then flushed, so the peer's best case is known
too. Runs from the bench venv (see ``bench/recall_latency.py``):

    .venv-bench/bin/python bench/mem0_flush.py --synthetic-users 40 --memories-per-user 100
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import mem0_peer
from bench.common.http_load import run_threads
from bench.common.workload import locomo_users, question_mix, synthetic_users

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" /
                        "locomo-dev")
    parser.add_argument("--synthetic-users", type=int, default=40)
    parser.add_argument("--memories-per-user", type=int, default=100)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--time-cap-s", type=float, default=90.0)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    tag = uuid.uuid4().hex[:6]
    users = (locomo_users(args.data, tag)
             + synthetic_users(args.synthetic_users, args.memories_per_user, tag, args.seed))
    questions = question_mix(users, args.requests, 0.5, args.seed + 1)
    tmp = Path(tempfile.mkdtemp(prefix="strata-bench-mem0-"))
    os.environ.update(mem0_peer.environment(tmp))
    peer = mem0_peer.Mem0Peer(tmp / "mem0")
    try:
        stored, seconds = peer.add_all(users, batch_embed=True)
        peer.settle()
        print(f"mem0: {stored:,} memories in {seconds:.0f} s")
        run_threads(peer.search, questions[:10], 1, "warm-up")
        for label in ("unflushed", "flushed"):
            if label == "flushed":
                print(f"flush: {peer.flush():.1f} s")
                peer.settle()
            for level in (1, 8):
                s = run_threads(peer.search, questions, level, f"mem0 {label}",
                                time_cap_s=args.time_cap_s)
                print(f"mem0 {label:9} c={level}  n={len(s.latencies):4}  p50 {s.ms(50):8.1f}"
                      f"  p95 {s.ms(95):8.1f}  p99 {s.ms(99):8.1f} ms  {s.per_s:5.1f} req/s",
                      flush=True)
    finally:
        peer.close()


if __name__ == "__main__":
    main()
