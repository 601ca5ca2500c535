"""What ``recall_latency.py`` prints and judges: a line per phase, the tables per system
and level, the ratio Strata / mem0, the hot index, the targets."""

from __future__ import annotations

from typing import Any

from bench.common.hot_index import HOT_INDEX_PATH
from bench.common.stats import LatencySeries

__all__ = ["MEM0", "NEW", "fmt", "print_hot_index", "print_series",
           "print_tables", "ratio", "targets"]

NEW, MEM0 = "strata", "mem0"


def print_series(s: LatencySeries, note: str = "") -> None:
    print(f"  {s.system:16s} c={s.level:<3d} n={len(s.latencies):5d} err={s.errors:<4d} "
          f"p50 {s.ms(50):8.1f}  p95 {s.ms(95):8.1f}  p99 {s.ms(99):8.1f} ms  "
          f"{s.per_s:7.1f} req/s{note}{f'  [{s.stopped}]' if s.stopped else ''}", flush=True)
    for sample in s.error_samples[:2]:
        print(f"      error: {sample[:200]}")


def ratio(a: float, b: float) -> float | None:
    return a / b if a == a and b == b and b else None


def fmt(x: float | None, spec: str = ".2f", suffix: str = "") -> str:
    return "n/a" if x is None or x != x else f"{x:{spec}}{suffix}"


def print_hot_index(summary: dict[str, Any] | None) -> None:
    if summary is None:
        print(f"  hot index: n/a (no {HOT_INDEX_PATH} on this server)")
        return
    caps = sorted({p["cap"] for p in summary["peaks"].values() if p["cap"]})
    print(f"  {summary['users_held']} users / {summary['memories']:,} memories held in "
          f"{len(summary['shards'])} shards, {summary['bytes'] / 2**20:.1f} MiB: "
          f"{fmt(summary['bytes_per_user'], ',.0f')} B per hot user, "
          f"{fmt(summary['bytes_per_memory'], ',.0f')} B per memory; cap per shard "
          f"{', '.join(f'{c / 2**20:.0f} MiB' for c in caps) or 'n/a'}")
    for shard, peak in sorted(summary["peaks"].items()):
        over = peak["over_cap"]
        print(f"    shard {shard}: over {summary['samples']} samples at most "
              f"{peak['bytes'] / 2**20:.1f} MiB and at most {peak['users']} users; over the cap "
              f"with more than one user in {len(over)} samples"
              + "".join(f"; {o['at']}: {o['bytes'] / 2**20:.1f} MiB, {o['users']} users"
                        for o in over[:3]))
    if summary["cap_exercised"]:
        print(f"  cap: {summary['users_touched']} users touched, {summary['users_held']} held, "
              f"{summary['evictions']} evictions; cap held: "
              f"{'yes' if summary['cap_held'] else 'NO'}")
    else:
        print(f"  cap: not exercised ({summary['users_touched']} users touched, all held); "
              "--hot-cap-mib N makes it bite")


def targets(by: dict[tuple[str, int], LatencySeries],
            ingestion: dict[str, Any]) -> list[dict[str, Any]]:
    def p(system: str, level: int, q: float) -> float | None:
        s = by.get((system, level))
        return s.ms(q) if s and s.latencies else None

    def rps(system: str, level: int) -> float | None:
        s = by.get((system, level))
        return s.per_s if s and s.latencies else None

    new50, mem50 = p(NEW, 1, 50), p(MEM0, 1, 50)
    batched = (ingestion.get("batched") or {}).get("turns_per_s")
    rows = [("p50 at 1 in flight", new50, "ms", "<= 60", lambda v: v <= 60),
            ("p50 at 1 in flight, Strata / mem0",
             ratio(new50, mem50) if new50 and mem50 else None, "ratio", "<= 0.20",
             lambda v: v <= 0.2),
            ("throughput at 8 in flight", rps(NEW, 8), "req/s", ">= 25", lambda v: v >= 25),
            ("p99 at 8 in flight", p(NEW, 8, 99), "ms", "<= 400", lambda v: v <= 400),
            ("batched turn ingestion", batched, "turns/s", ">= 1,000", lambda v: v >= 1000)]
    return [{"target": name, "value": None if v is None else round(v, 3), "unit": unit,
             "goal": goal, "met": None if v is None else bool(ok(v))}
            for name, v, unit, goal, ok in rows]


def print_tables(levels: list[int], by: dict[tuple[str, int], LatencySeries],
                 report: dict[str, Any]) -> None:
    print("\n| system | in flight | requests | p50 ms | p95 ms | p99 ms | req/s | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for level in levels:
        for system in (NEW, MEM0):
            s = by.get((system, level))
            if s is None:
                continue
            print(f"| {system} | {level} | {len(s.latencies)} | {fmt(s.ms(50), '.1f')} | "
                  f"{fmt(s.ms(95), '.1f')} | {fmt(s.ms(99), '.1f')} | {s.per_s:.1f} | "
                  f"{s.errors} |")
    print("\n| in flight | p50 Strata / mem0 |")
    print("|---:|---:|")
    ratios = []
    for level in levels:
        new, peer = (by.get((s, level)) for s in (NEW, MEM0))
        row = {"level": level,
               "p50_strata_over_mem0": ratio(new.ms(50), peer.ms(50)) if new and peer else None}
        ratios.append(row)
        print(f"| {level} | {fmt(row['p50_strata_over_mem0'])} |")
    report["ratios"] = ratios
    ing = report.get("ingestion", {})
    loc = report.get("locomo_ingestion") or {}
    single = (ing.get("single") or {}).get("turns_per_s")
    print(f"\ningestion: single {fmt(single, ',.1f')} turns/s; batched "
          f"{fmt((ing.get('batched') or {}).get('turns_per_s'), ',.1f')} turns/s; LoCoMo dev "
          f"{loc.get('turns', 0):,} turns: HTTP {fmt(loc.get('http_s'), '.1f', ' s')}, "
          f"extraction drained {fmt(loc.get('extraction_drain_s'), '.1f', ' s')} later")
    report["targets"] = targets(by, ing)
    print("\n| target | value | goal | met |")
    print("|---|---:|---:|---|")
    for t in report["targets"]:
        met = "n/a" if t["met"] is None else ("yes" if t["met"] else "NO")
        spec = ".2f" if t["unit"] == "ratio" else ",.1f"
        unit = "" if t["unit"] == "ratio" else f" {t['unit']}"
        print(f"| {t['target']} | {fmt(t['value'], spec)} | {t['goal']}{unit} | {met} |")
