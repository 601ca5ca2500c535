"""Forgets end to end, through the shard's turn path (issue #36): for each labelled turn of
the intent corpus, a fresh user holds two memories — the one the turn is about (its labelled
target, or the turn before it) and an unrelated one — and the turn is said. A forget row
passes when the memory it names is forgotten and the other is not (both, for a forget of
everything); any other row passes when nothing is forgotten. Rules only against the shipped
detector, on the development writers (the detector's training rows: an upper bound) and on
the held-out writers.

    .venv/bin/python bench/forget_e2e.py                 # packaged MiniLM
    .venv/bin/python bench/forget_e2e.py --embedder hash
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from intents import DEV, HELD_OUT, load

from strata.errors import InvalidInput
from strata.layers.memories import LongTermMemory
from strata.layers.memory_models import MemoryCreate
from strata.layers.summarize import RuleSummarizer
from strata.models import MemoryKind, Scope
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder, MiniLMEmbedder
from strata.stores.ports import Embedder
from strata.stores.redis import RedisStore
from strata.stores.redis_server import EmbeddedRedis
from strata.testing.fake_vectors import FakeVectorStore

OTHER = {"en": "I adopted a grey cat named Pixel last spring.",
         "zh": "我去年春天领养了一只叫小灰的猫。"}


def run(rows: list[dict[str, Any]], detector: str, embedder: Embedder,
        redis: RedisStore) -> Counter[str]:
    vectors = FakeVectorStore()
    vectors.ensure_collections(embedder.dim)
    lt = LongTermMemory(vectors, embedder)
    shard = SessionShardService(0, Settings(intent_detector=detector), redis, RuleSummarizer(),
                                longterm=lambda: lt)
    out: Counter[str] = Counter()
    for n, row in enumerate(rows):
        scope = Scope(tenant="bench", user=f"{detector}-{n}")
        about = row.get("target") or row.get("previous") or row["text"]
        try:
            named = shard.create_memory(scope, MemoryCreate(kind=MemoryKind.EPISODE,
                                                            text=about))
        except InvalidInput:  # a secret ("my VPN password hint"): never stored to forget
            out["skipped"] += 1
            continue
        other = shard.create_memory(scope, MemoryCreate(kind=MemoryKind.EPISODE,
                                                        text=OTHER[row["lang"]]))
        if row.get("previous"):
            shard.append_turn(scope, "s", "user", row["previous"])
        ack = shard.append_turn(scope, "s", "user", row["text"])
        gone = set(ack.intents.forgotten)
        wanted = row["intent"] == "forget"
        key = f"{row['lang']} {'forget' if wanted else 'other'}"
        out[f"{key} n"] += 1
        if wanted:  # a forget of everything takes the unrelated memory too
            spared = row.get("scope") == "all" or other["memory"]["id"] not in gone
            out[f"{key} pass"] += named["memory"]["id"] in gone and spared
        else:
            out[f"{key} pass"] += not gone
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embedder", choices=["minilm", "hash"], default="minilm")
    args = parser.parse_args()
    embedder: Embedder = MiniLMEmbedder() if args.embedder == "minilm" else HashEmbedder(64)
    rows = load()
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(Path(tmp)).start()
        try:
            redis = RedisStore(server.url, prefix="bench:")
            for split, writers in (("dev", DEV), ("held-out", HELD_OUT)):
                subset = [r for r in rows if r["writer"] in writers]
                for detector in ("rules", "learned"):
                    started = time.perf_counter()
                    counts = run(subset, detector, embedder, redis)
                    took = time.perf_counter() - started
                    cells = [f"{k}: {counts[k + ' pass']}/{counts[k + ' n']} "
                             f"({counts[k + ' pass'] / max(1, counts[k + ' n']):.2f})"
                             for k in ("en forget", "zh forget", "en other", "zh other")]
                    print(f"{split:8} {detector:7} " + " | ".join(cells)
                          + f" [{counts['skipped']} skipped, {took:.0f} s]")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
