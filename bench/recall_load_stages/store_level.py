"""The recall load benchmark's store-level comparison: serial, no HTTP, pre-embedded
queries, each a direct Ray call into the StoreOwner. One Strata layer search (the owner's
typed ``search_hybrid``, as the shards make it) against the baseline's one hybrid search
over the single collection.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
import ray

from bench.common.stats import percentile_ms
from bench.recall_load_stages import TENANT
from bench.recall_load_stages.baseline import CANDIDATES, SINGLE, owner_single_search
from strata.models import Collection, RecordFilter, Scope

__all__ = ["print_store_level", "store_level"]


def store_level(owner: Any, queries: Sequence[dict[str, Any]], vectors: np.ndarray,
                n: int) -> dict[str, list[float]]:
    """Serial, no HTTP, pre-embedded queries: one Strata layer search vs one baseline search."""
    flt = RecordFilter(statuses=["active"])
    out: dict[str, list[float]] = defaultdict(list)
    for i, (q, vec) in enumerate(zip(queries[:n], vectors[:n], strict=True)):
        scope = Scope(tenant=TENANT, user=q["user_id"])
        v = [float(x) for x in vec]
        text = q["query"]
        cases: list[tuple[str, Any, tuple[Any, ...]]] = [
            ("strata facts layer (owner.search_hybrid)", owner.search_hybrid,
             (Collection.FACTS, scope, v, text, CANDIDATES, flt)),
            ("strata episodes layer", owner.search_hybrid,
             (Collection.EPISODES, scope, v, text, CANDIDATES, flt)),
            ("strata knowledge layer", owner.search_hybrid,
             (Collection.KNOWLEDGE, Scope.shared(TENANT), v, text, CANDIDATES, flt)),
            ("strata procedures keyword scan (owner.query, 100)", owner.query,
             (Collection.PROCEDURES, scope, flt, 100)),
            ("baseline single collection (one hybrid search)", owner.__ray_call__,
             (owner_single_search, SINGLE, scope.key, v, text, CANDIDATES)),
        ]
        order = cases if i % 2 == 0 else list(reversed(cases))
        for name, method, call_args in order:
            started = time.perf_counter()
            ray.get(method.remote(*call_args))
            out[name].append(time.perf_counter() - started)
    return out


def print_store_level(raw: dict[str, list[float]], n: int, seconds: float) -> None:
    """The comparison as a table of latency percentiles per call."""
    print(f"\nStore level, serial, {n} pre-embedded queries "
          f"(one Ray call each) [{seconds:.0f} s]\n")
    print("| call | p50 ms | p95 ms | p99 ms |")
    print("|---|---:|---:|---:|")
    for name, lat in raw.items():
        print(f"| {name} | {percentile_ms(lat, 50):.1f} | {percentile_ms(lat, 95):.1f} | "
              f"{percentile_ms(lat, 99):.1f} |")
    print(flush=True)
