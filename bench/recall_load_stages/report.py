"""The recall load benchmark's measurements and report: a load phase's series (latencies
plus what the responses and the processes told), the line printed after each phase, the
tables at the end and the JSON summary.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

from bench.common.http_load import run_http
from bench.common.stats import LatencySeries, percentile_ms
from bench.recall_load_stages import AUTH

__all__ = ["Series", "print_end", "print_phase", "print_report", "run_level", "write_json"]

SYSTEMS = ("strata", "baseline")


@dataclass
class Series(LatencySeries):
    """A phase's latencies plus what the responses and the processes told."""

    items: list[int] = field(default_factory=list)
    bytes: list[int] = field(default_factory=list)
    routes: Counter[str] = field(default_factory=Counter)
    layer_ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    cpu_s: dict[str, float] = field(default_factory=dict)
    owner_calls: dict[str, dict[str, float]] = field(default_factory=dict)

    def record(self, resp: httpx.Response) -> None:
        """What one answer told: its size, items, route and per-layer timings."""
        self.bytes.append(len(resp.content))
        data = resp.json()
        self.items.append(len(data.get("items", [])))
        if "route" in data:
            self.routes[data["route"]] += 1
        for layer, ms in (data.get("timings_ms") or {}).items():
            self.layer_ms[layer].append(float(ms))


def print_phase(s: Series, load_avg_before: float) -> None:
    """One line per phase: latency, throughput, answer sizes, Strata's routes and layers."""
    extra = ""
    if s.routes:
        extra = f", routes {dict(s.routes)}, layer ms " + ", ".join(
            f"{k} {np.mean(v):.0f}" for k, v in sorted(s.layer_ms.items()))
    print(f"  {s.system:8s} c={s.level:<3d} n={len(s.latencies):4d} err={s.errors} "
          f"p50 {s.ms(50):7.1f} p95 {s.ms(95):7.1f} p99 {s.ms(99):7.1f} ms "
          f"{s.per_s:6.1f} req/s; items {np.mean(s.items or [0]):.1f}, "
          f"{np.mean(s.bytes or [0]) / 1024:.1f} KiB; load avg before {load_avg_before:.1f}"
          f"{extra}", flush=True)
    for sample in s.error_samples[:3]:
        print(f"      error: {sample}")


def run_level(url: str, system: str, bodies: Sequence[dict[str, Any]], level: int) -> Series:
    """``bodies`` posted to ``url`` with ``level`` requests in flight (``_`` keys left out)."""
    series = Series(system, level)
    requests = [(url, {k: v for k, v in body.items() if not k.startswith("_")})
                for body in bodies]
    run_http(requests, level, system, AUTH, on_response=series.record, series=series)
    return series


def print_report(results: Sequence[Series], levels: Sequence[int], heading: str) -> None:
    """The tables at the end: latency and throughput, their ratios, CPU per process group,
    StoreOwner calls per request."""
    by = {(s.system, s.level): s for s in results}
    print(heading)
    _latency_tables(by, levels)
    _cpu_table(results, by, levels)
    print("\nStoreOwner calls per request (calls / owner-side ms, summed over threads):\n")
    for level in levels:
        for system in SYSTEMS:
            s = by[(system, level)]
            n_ok = max(1, len(s.latencies))
            parts = ", ".join(f"{k} {v['calls'] / n_ok:.2f} / {1000 * v['seconds'] / n_ok:.1f}"
                              for k, v in sorted(s.owner_calls.items(),
                                                 key=lambda kv: -kv[1]["seconds"]))
            print(f"- c={level} {system}: {parts}")


def _latency_tables(by: dict[tuple[str, int], Series], levels: Sequence[int]) -> None:
    print("| level | system | requests | p50 ms | p95 ms | p99 ms | req/s | items | "
          "errors |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for level in levels:
        for system in SYSTEMS:
            s = by[(system, level)]
            print(f"| {level} | {system} | {len(s.latencies)} | {s.ms(50):.1f} | "
                  f"{s.ms(95):.1f} | {s.ms(99):.1f} | {s.per_s:.1f} | "
                  f"{np.mean(s.items or [0]):.1f} | {s.errors} |")
    print("\n| level | p50 ratio | p95 ratio | p99 ratio | req/s ratio |")
    print("|---:|---:|---:|---:|---:|")
    for level in levels:
        a, b = by[("strata", level)], by[("baseline", level)]
        print(f"| {level} | {a.ms(50) / b.ms(50):.2f}x | {a.ms(95) / b.ms(95):.2f}x | "
              f"{a.ms(99) / b.ms(99):.2f}x | {a.per_s / b.per_s:.2f}x |")
    print("(ratios are Strata / baseline: above 1 means Strata is slower for latency, "
          "faster for req/s)")


def _cpu_table(results: Sequence[Series], by: dict[tuple[str, int], Series],
               levels: Sequence[int]) -> None:
    print("\nCPU milliseconds per request by process group (all processes of this run; "
          "measured over each phase plus the drain of its queued write-backs):\n")
    names = sorted({k for s in results for k in s.cpu_s},
                   key=lambda k: -sum(s.cpu_s.get(k, 0.0) for s in results))
    print("| level | system | " + " | ".join(names) + " | total | wall ms/req |")
    print("|---:|---|" + "---:|" * (len(names) + 2))
    for level in levels:
        for system in SYSTEMS:
            s = by[(system, level)]
            n_ok = max(1, len(s.latencies))
            cells = " | ".join(f"{1000 * s.cpu_s.get(k, 0.0) / n_ok:.1f}" for k in names)
            print(f"| {level} | {system} | {cells} | "
                  f"{1000 * sum(s.cpu_s.values()) / n_ok:.1f} | "
                  f"{1000 * s.wall_s / n_ok:.1f} |")


def print_end(t_all: float) -> None:
    """The last line: load average and the run's total seconds (from ``t_all``)."""
    print(f"\nload avg at end {os.getloadavg()[0]:.2f}; total "
          f"{time.perf_counter() - t_all:.0f} s", flush=True)


def write_json(path: str, run: dict[str, Any], raw: dict[str, list[float]],
               layout: dict[str, dict[str, Any]], flush_stats: dict[str, float],
               results: Sequence[Series]) -> None:
    """The raw summary: ``run`` (embedder, sizes), the store-level percentiles, the layout
    and flush stats after the run, and every phase's series."""
    with open(path, "w", encoding="utf-8") as fh:
        json.dump({**run,
                   "store_level": {k: {f"p{q}": percentile_ms(v, q) for q in (50, 95, 99)}
                                   for k, v in raw.items()},
                   "layout": layout, "flush_stats": flush_stats,
                   "series": [{"system": s.system, "level": s.level,
                               "n": len(s.latencies), "errors": s.errors,
                               "p50": s.ms(50), "p95": s.ms(95), "p99": s.ms(99),
                               "per_s": s.per_s, "items": float(np.mean(s.items or [0])),
                               "routes": dict(s.routes), "cpu_s": s.cpu_s,
                               "owner_calls": s.owner_calls,
                               "layer_ms": {k: float(np.mean(v))
                                            for k, v in s.layer_ms.items()}}
                              for s in results]}, fh, indent=2)
