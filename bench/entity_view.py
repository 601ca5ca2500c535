"""The entity view's cost in the shard (#38), in process: one user of ``--memories`` LoCoMo
turns (dev conversations, each turn an episode with its speaker and session) in a hot index
over the in-memory vector store, read through ``SessionShardService`` the way the
``/v1/users/{uid}/entities`` routes read it.

Measured in the same run:

- ``memories list``: the shard's read behind ``GET /v1/users/{uid}/memories?limit=1000``
  (the baseline: what the inspector's memories tab already costs);
- ``derive from scratch``: the list on a shard that keeps no derived index (every read
  extracts every memory's entities — the on-demand design without the kept index);
- ``list, nothing changed``: the kept index, brought up to date (the scan of the user's rows);
- ``list after one new memory``: one memory written before each read (one extraction);
- ``one entity``: the detail of the most mentioned entity, its mentions newest first;
- the process's one-time load of the gazetteer and lexicon, and its RSS before and after.

Each figure is p50 / p95 / p99 over ``--repeat`` reads (derive: ``--cold`` reads)::

    nice -n 5 .venv/bin/python bench/entity_view.py --data ../shared/data/locomo-dev \
        --memories 700 --repeat 30 --cold 5
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO))

from bench.common.stats import percentile_ms  # noqa: E402
from bench.common.workload import locomo_users  # noqa: E402
from strata.entities import default_gazetteer, default_lexicon  # noqa: E402
from strata.layers.memories import LongTermMemory  # noqa: E402
from strata.layers.memory_models import MemoryCreate  # noqa: E402
from strata.layers.summarize import RuleSummarizer  # noqa: E402
from strata.models import MemoryKind, Scope  # noqa: E402
from strata.settings import Settings  # noqa: E402
from strata.shard.service import SessionShardService  # noqa: E402
from strata.stores.embedders import HashEmbedder  # noqa: E402
from strata.stores.hot import HotIndexStore  # noqa: E402
from strata.testing.fake_redis import FakeRedis  # noqa: E402
from strata.testing.fake_vectors import FakeVectorStore  # noqa: E402

USER = Scope(tenant="bench", user="entity-view")
DIM = 64


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _texts(data: Path, n: int) -> list[tuple[str, str, str]]:
    """(session, speaker, text) of the first ``n`` turns of the dev conversations."""
    out: list[tuple[str, str, str]] = []
    for user in locomo_users(data, "view"):
        for session in user.sessions:
            for turn in session.turns:
                out.append((f"{user.user_id}-{session.session_id}",
                            str(turn.metadata["speaker"]), turn.content))
    return out[:n]


def _shard(memory: LongTermMemory) -> SessionShardService:
    return SessionShardService(0, Settings(), FakeRedis(), RuleSummarizer(),  # type: ignore[arg-type]
                               longterm=lambda: memory)


def _timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def _row(name: str, lat: list[float], base: float) -> dict[str, Any]:
    p50 = percentile_ms(lat, 50)
    return {"phase": name, "n": len(lat), "p50_ms": round(p50, 2),
            "p95_ms": round(percentile_ms(lat, 95), 2),
            "p99_ms": round(percentile_ms(lat, 99), 2),
            "x_memories_list": round(p50 / base, 2) if base else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared/data/locomo-dev")
    parser.add_argument("--memories", type=int, default=700)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--cold", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    rss0 = _rss_mb()
    started = time.perf_counter()
    default_gazetteer()
    default_lexicon()
    load_s = time.perf_counter() - started
    rss1 = _rss_mb()

    store = FakeVectorStore()
    store.ensure_collections(DIM)
    memory = LongTermMemory(HotIndexStore(store, DIM), HashEmbedder(DIM))
    shard = _shard(memory)
    texts = _texts(args.data, args.memories + args.repeat)
    for session, speaker, text in texts[:args.memories]:
        shard.create_memory(USER, MemoryCreate(kind=MemoryKind.EPISODE, text=text,
                                               session_id=session,
                                               metadata={"speaker": speaker}))
    stored = len(shard.list_memories(USER, None, None, None, 1000))

    base = _timed(lambda: shard.list_memories(USER, None, None, None, 1000), args.repeat)
    base_p50 = percentile_ms(base, 50)
    cold = _timed(lambda: _shard(memory).list_entities(USER), args.cold)
    listed = shard.list_entities(USER)  # the kept index, built once
    warm = _timed(lambda: shard.list_entities(USER), args.repeat)
    top = listed.entities[0]
    detail = _timed(lambda: shard.entity(USER, top.id), args.repeat)
    extra = iter(texts[args.memories:])

    def one_more() -> None:
        session, speaker, text = next(extra)
        shard.create_memory(USER, MemoryCreate(kind=MemoryKind.EPISODE, text=text,
                                               session_id=session,
                                               metadata={"speaker": speaker}))
        started = time.perf_counter()
        shard.list_entities(USER)
        after.append(time.perf_counter() - started)

    after: list[float] = []
    for _ in range(min(args.repeat, len(texts) - args.memories)):
        one_more()
    rss2 = _rss_mb()

    rows = [_row("memories list (baseline)", base, base_p50),
            _row("derive from scratch", cold, base_p50),
            _row("list, nothing changed", warm, base_p50),
            _row("list after one new memory", after, base_p50),
            _row("one entity (detail)", detail, base_p50)]
    report = {
        "memories": stored, "entities": listed.total, "top": [top.name, top.mentions],
        "load_gazetteer_lexicon_s": round(load_s, 2),
        "rss_mb": {"start": round(rss0), "after_load": round(rss1), "end": round(rss2)},
        "per_memory_derive_ms": round(statistics.median(cold) * 1000 / stored, 2),
        "rows": rows}
    print(f"{stored} memories, {listed.total} entities (top: {top.name}, {top.mentions} "
          f"mentions); gazetteer+lexicon load {load_s:.1f} s, RSS {rss0:.0f} → {rss1:.0f} → "
          f"{rss2:.0f} MB")
    print(f"{'phase':30} {'n':>4} {'p50 ms':>9} {'p95 ms':>9} {'p99 ms':>9} {'× list':>7}")
    for r in rows:
        print(f"{r['phase']:30} {r['n']:>4} {r['p50_ms']:>9} {r['p95_ms']:>9} "
              f"{r['p99_ms']:>9} {r['x_memories_list']:>7}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
