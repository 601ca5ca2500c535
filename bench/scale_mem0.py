"""The scale bench's peer: mem0 on the same memories as ``bench/scale.py`` (issue #39).

mem0's open-source ``Memory`` (``infer=False``, milvus-lite under it, ``bench.common.
mem0_peer``) given the same users and texts as the scale bench's store (``bench.common.
scale_plan``: the same plan, seeded) through ``add`` — each user's rows as one call of user
messages, each message one memory — with the same **hash embedder** (384-d) answering mem0's
embedding calls, so neither side pays for a model and the figures compare the stores. Then
the same sampled users' first search (mem0 has no per-user index: every search goes to
milvus-lite) and ``--hot-rounds`` more each, timed around ``Memory.search``.

Runs in the benchmark interpreter (mem0 pins packages Strata's does not take; see
``bench/recall_latency.py``'s setup); ``bench/scale.py --mem0-python`` starts it after its
own phases, in the same run, and prints both.

    .venv-bench/bin/python bench/scale_mem0.py --dir /tmp/scale-mem0 --memories 10000 \\
        --users 1000 --cold 100 --json /tmp/mem0.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import mem0_peer
from bench.common.scale_plan import (
    DATA,
    QUERIES,
    cold_sample,
    locomo_turns,
    plan,
    summary_ms,
)
from strata.stores.embedders import HashEmbedder

DIM = 384


def searches(peer: Any, users: list[str], locomo: list[str], rounds: int, prefix: str
             ) -> dict[str, Any]:
    """Each user's first search, then ``rounds`` more each: ms summaries."""
    out: dict[str, Any] = {}
    for label, group in (("first", users), ("first_locomo", locomo)):
        ms = []
        for i, user in enumerate(group):
            t0 = time.perf_counter()
            peer.memory.search(QUERIES[i % len(QUERIES)], top_k=10, filters={"user_id": user})
            ms.append((time.perf_counter() - t0) * 1000)
        if ms:
            out[prefix + label] = summary_ms(ms)
            # printed as measured: a run stopped later (mem0's searches are slow) keeps it
            print(f"mem0 {prefix}{label}:", out[prefix + label], flush=True)
    again = []
    for r in range(rounds):
        for i, user in enumerate(users + locomo):
            t0 = time.perf_counter()
            peer.memory.search(QUERIES[(i + r) % len(QUERIES)], top_k=10,
                               filters={"user_id": user})
            again.append((time.perf_counter() - t0) * 1000)
    if again:
        out[prefix + "again"] = summary_ms(again)
        print(f"mem0 {prefix}again:", out[prefix + "again"], flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", type=Path, default=None, help="mem0's files (a temp dir)")
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--locomo-users", type=int, default=3)
    parser.add_argument("--locomo-turns", type=int, default=700)
    parser.add_argument("--cold", type=int, default=100)
    parser.add_argument("--hot-rounds", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=3600.0,
                        help="stop adding after this long (the size mem0 reached is reported)")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    directory = args.dir or Path(tempfile.mkdtemp(prefix="strata-scale-mem0-"))
    directory.mkdir(parents=True, exist_ok=True)
    os.environ.update(mem0_peer.environment(directory))
    peer = mem0_peer.Mem0Peer(directory / "mem0")
    embedder = HashEmbedder(DIM)
    # mem0 asks its embedder for one text at a time; the hash embedder answers instead of
    # the model (the Strata side of the bench embeds with the same hash)
    peer.memory.embedding_model.embed = (  # type: ignore[method-assign]
        lambda text, memory_action=None: embedder.encode([text])[0].tolist())
    turns = locomo_turns(args.data)
    steps = plan(args.memories, args.users, args.locomo_users, args.locomo_turns, len(turns))
    started = last = time.perf_counter()
    written, added_users, complete = 0, set(), True
    for name, n, start, _ in steps:
        if time.perf_counter() - started > args.max_seconds:
            complete = False
            break
        messages = [{"role": "user", "content": turns[(start + j) % len(turns)][1]}
                    for j in range(n)]
        result = peer.memory.add(messages, user_id=name, infer=False)
        written += len(result.get("results", []))
        added_users.add(name)
        if time.perf_counter() - last > 30:
            last = time.perf_counter()
            print(f"  mem0: {written:,} memories, {written / (last - started):,.0f}/s",
                  flush=True)
    seconds = time.perf_counter() - started
    out: dict[str, Any] = {
        "peer": "mem0 (infer=False, milvus-lite, hash embedder)",
        "ingest": {"memories": written, "users": len(added_users), "complete": complete,
                   "seconds": round(seconds, 1), "memories_per_s": round(written / seconds)}}
    print("mem0 ingest:", out["ingest"], flush=True)
    users = [u for u in cold_sample(args.users, args.cold) if u in added_users]
    locomo = [name for name, _, _, is_locomo in steps if is_locomo and name in added_users]
    peer.memory.search("warm up", top_k=10, filters={"user_id": users[0] if users else "x"})
    out |= searches(peer, users, locomo, args.hot_rounds, "")
    # mem0 never flushes its collection; milvus-lite searches unflushed rows slowly
    # (docs/benchmarks.md): the same searches again after a flush, as a tuned deployment would
    out["flush_s"] = round(peer.flush(), 1)
    print("mem0 flush s:", out["flush_s"], flush=True)
    out["settle"] = peer.settle()
    out |= searches(peer, users, locomo, args.hot_rounds, "flushed_")
    peer.close()
    print(json.dumps(out, indent=1), flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
