"""The soak benchmark's figures (bench/soak.py): what completed in each sampling window,
the RSS summary per role, the table rows and the closing summary."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.common.process_rss import RoleSample, first_last_mean, role_series, slope_per_min
from bench.common.stats import percentile_ms

__all__ = ["Window", "build_report", "memory_summary", "print_row", "print_summary"]


@dataclass
class Window:
    """What completed in one sampling window."""

    latencies_s: list[float] = field(default_factory=list)
    by_kind: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    error_samples: list[str] = field(default_factory=list)
    shed: int = 0

    def record(self, kind: str, status: str, latency_s: float, sample: str = "") -> None:
        self.by_kind[kind] += 1
        if status == "ok":
            self.latencies_s.append(latency_s)
            return
        self.errors[status] += 1
        if sample and len(self.error_samples) < 3:
            self.error_samples.append(f"{kind} {status}: {sample[:200]}")

    @property
    def done(self) -> int:
        return sum(self.by_kind.values())

    def as_json(self) -> dict[str, Any]:
        def ms(q: float) -> float | None:
            v = percentile_ms(self.latencies_s, q)
            return None if v != v else round(v, 1)

        return {"done": self.done, "ok": len(self.latencies_s), "shed": self.shed,
                "errors": dict(self.errors), "p50_ms": ms(50), "p99_ms": ms(99),
                "by_kind": dict(self.by_kind), "error_samples": self.error_samples}


def memory_summary(samples: Sequence[RoleSample], span_s: float = 60.0) -> dict[str, Any]:
    """Per role: the RSS before the load (the sample at t = 0, if any), the mean of the first
    and the last ``span_s`` of load, the change, and the slope (MB/min) over the whole load
    after its first ``span_s`` (start-up: models and first loads, left out) and over its
    second half (a slope falling from the one to the other is a level being approached)."""
    out: dict[str, Any] = {}
    for role, points in sorted(role_series(samples).items()):
        before = next((v for t, v in points if t <= 0), None)
        load = [p for p in points if p[0] > 0]
        if not load:
            continue
        first, last = first_last_mean(load, span_s)
        settled = [p for p in load if p[0] > span_s]
        second_half = [p for p in load if p[0] >= load[-1][0] / 2]
        out[role] = {"before_load_mb": None if before is None else round(before, 1),
                     "first_min_mb": round(first, 1), "last_min_mb": round(last, 1),
                     "change_mb": round(last - first, 1),
                     "slope_mb_per_min": round(slope_per_min(load), 2),
                     "slope_after_first_min": round(slope_per_min(settled), 2),
                     "slope_second_half": round(slope_per_min(second_half), 2),
                     "samples": len(load)}
    return out


def print_row(row: dict[str, Any], window_s: float) -> None:
    rss = row.get("rss_mb") or {}
    errors = ",".join(f"{k}:{v}" for k, v in sorted(row["errors"].items())) or "-"
    print(f"{row['t_s']:7.0f} {row['done']:6d} {row['done'] / window_s:6.1f} "
          f"{row['p50_ms'] or float('nan'):8.1f} {row['p99_ms'] or float('nan'):8.1f} "
          f"{row['shed']:5d} {errors:>12} {rss.get('total_mb', float('nan')):9.0f} "
          f"{row.get('load_avg_1m', float('nan')):5.1f}", flush=True)


def print_summary(report: dict[str, Any]) -> None:
    mem = report.get("memory", {})
    if mem:
        print("\nRSS per role (MB): before the load, first minute, last minute, change, "
              "slope MB/min (whole load; after its first minute; second half); processes")
        procs = report["rss_last"]["procs"] if report.get("rss_last") else {}
        for role, m in sorted(mem.items(), key=lambda kv: -kv[1]["last_min_mb"]):
            before = m["before_load_mb"]
            print(f"  {role:40} {before if before is not None else float('nan'):8.1f} "
                  f"{m['first_min_mb']:8.1f} {m['last_min_mb']:8.1f} "
                  f"{m['change_mb']:+8.1f} {m['slope_mb_per_min']:+7.2f} "
                  f"{m['slope_after_first_min']:+7.2f} {m['slope_second_half']:+7.2f}  "
                  f"{procs.get(role, '')}")
    e = report["errors"]
    print(f"\nrequests {report['requests']['done']:,} ({report['requests']['per_s']:.2f}/s "
          f"over {report['requests']['wall_s']:.0f} s), shed {report['requests']['shed']}; "
          f"errors {e['total']} (first half {e['first_half']}, second half {e['second_half']}),"
          f" by status {e['by_status']}; per window {e['per_window']}")
    for s in e["samples"][:5]:
        print(f"  error: {s}")
    print(f"latency p50 {report['latency']['p50_ms']} ms, p99 {report['latency']['p99_ms']} ms; "
          f"by kind {report['requests']['by_kind']}")


def build_report(rows: list[dict[str, Any]], samples: Sequence[RoleSample],
                 sessions_closed: int, wall_s: float) -> dict[str, Any]:
    """The run's figures from its window rows and RSS samples (JSON values)."""
    half = len(rows) // 2
    per_window = [sum(r["errors"].values()) for r in rows]
    by_status: Counter[str] = Counter()
    by_kind: Counter[str] = Counter()
    for r in rows:
        by_status.update(r["errors"])
        by_kind.update(r["by_kind"])
    done = sum(r["done"] for r in rows)
    p50 = [r["p50_ms"] for r in rows if r["p50_ms"] is not None]
    p99 = [r["p99_ms"] for r in rows if r["p99_ms"] is not None]
    return {
        "requests": {"done": done, "per_s": round(done / wall_s, 2), "wall_s": round(wall_s, 1),
                     "shed": sum(r["shed"] for r in rows), "by_kind": dict(by_kind),
                     "sessions_closed": sessions_closed},
        "errors": {"total": sum(per_window), "first_half": sum(per_window[:half]),
                   "second_half": sum(per_window[half:]), "by_status": dict(by_status),
                   "per_window": per_window,
                   "samples": [s for r in rows for s in r["error_samples"]][:10]},
        "latency": {"p50_ms": round(sorted(p50)[len(p50) // 2], 1) if p50 else None,
                    "p99_ms": max(p99) if p99 else None,
                    "note": "p50: median of the windows' p50; p99: the worst window's p99"},
        "memory": memory_summary(samples) if samples else {},
        "rss_first": samples[0].as_json() if samples else None,
        "rss_last": samples[-1].as_json() if samples else None,
        "processes_last": samples[-1].processes() if samples else None,
        "windows": rows,
    }
