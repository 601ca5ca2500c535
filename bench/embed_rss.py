"""How the resident memory of a process that embeds grows with the shapes it sees.

A shard embeds every turn it writes and every query it serves, with lengths that vary from
call to call; each new input shape adds to native kernel caches that never shrink. This runs
the packaged MiniLM through ``MiniLMEmbedder`` (vectors and token vectors, as a shard does)
on random texts of 3-120 words in batches of 1-4 and prints the RSS growth every 500 calls,
with the token lengths padded to a multiple of ``--pad`` (what ``strata.stores.embedders``
does, ``PAD_TO``) or to the batch's longest text only (``--pad 0``, the previous behaviour).

    .venv/bin/python bench/embed_rss.py --calls 3000 --pad 16
    .venv/bin/python bench/embed_rss.py --calls 3000 --pad 0
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from strata.settings import Settings
from strata.stores import embedders
from strata.stores.embedders import MiniLMEmbedder, make_embedder

WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "the",
         "agent", "recalls", "memory", "from", "its", "shard", "and", "writes", "turns", "to",
         "redis", "and", "milvus", "tea", "coffee", "budget", "deadline"]


def rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--pad", type=int, default=embedders.PAD_TO,
                   help="pad token lengths to a multiple of this (0: the batch's longest)")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    embedders.PAD_TO = args.pad or None  # type: ignore[assignment]
    model = make_embedder(Settings())
    assert isinstance(model, MiniLMEmbedder)
    rng = random.Random(args.seed)
    model.encode_with_tokens(["warm up"])
    base, started = rss_mib(), time.perf_counter()
    for i in range(args.calls + 1):
        texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 120)))
                 for _ in range(rng.randint(1, 4))]
        model.encode_with_tokens(texts)
        if i % 500 == 0:
            print(f"calls {i:>5}  rss growth {rss_mib() - base:6.1f} MiB", flush=True)
    print(f"pad {args.pad}: {args.calls} calls in {time.perf_counter() - started:.1f} s, "
          f"rss growth {rss_mib() - base:.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
