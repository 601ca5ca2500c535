"""Recall latency of one running Strata on one LoCoMo user: sequential, then 8 in flight.

Used for the A/B of ``STRATA_QUERY_EMBEDDING`` (``shard`` against ``embedder``): start
``strata serve`` on the same data dir with each setting in turn and run this against it.
The server must already hold a LoCoMo user (``strata eval locomo`` or
``bench/recall_latency.py --keep-data`` wrote one); each request opens its own connection.

    .venv/bin/python bench/query_embedding_ab.py --url http://127.0.0.1:8000
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--key", default="dev")
    parser.add_argument("--conversation", type=Path, default=DATA / "conv-26.json")
    parser.add_argument("--questions", type=int, default=120)
    args = parser.parse_args()
    headers = {"Authorization": f"Bearer {args.key}"}
    listed = httpx.get(f"{args.url}/v1/users", headers=headers, timeout=30).json()["users"]
    users = [u["user_id"] if isinstance(u, dict) else u for u in listed]
    user = next(u for u in users if "locomo" in u)
    conv = json.loads(args.conversation.read_text())
    questions = [q["question"] for q in conv["qa"]][:args.questions]

    def one(query: str) -> float:
        with httpx.Client(base_url=args.url, headers=headers, timeout=60) as client:
            started = time.perf_counter()
            client.post("/v1/recall", json={"user_id": user, "query": query}
                        ).raise_for_status()
            return (time.perf_counter() - started) * 1000

    for query in questions[:10]:  # warm-up: the user's index is loaded
        one(query)
    for level in (1, 8):
        with ThreadPoolExecutor(level) as pool:
            started = time.perf_counter()
            latencies = sorted(pool.map(one, questions))
            wall = time.perf_counter() - started
        print(f"c={level} n={len(latencies)} p50 {statistics.median(latencies):.1f} "
              f"p95 {latencies[int(0.95 * len(latencies))]:.1f} "
              f"p99 {latencies[int(0.99 * len(latencies)) - 1]:.1f} ms  "
              f"{len(latencies) / wall:.1f} req/s")


if __name__ == "__main__":
    main()
