"""Search latency on milvus-lite against the number of unflushed rows, and the cost of flush().

Runs on real milvus-lite through ``strata.stores.milvus.MilvusVectorStore`` on a file in a
temporary directory, with 384-d random unit float32 vectors and a short English sentence
per row (so the BM25 function has something to index). The store gets a ``FlushPolicy``
with a huge threshold, so it never flushes by itself: every row stays in milvus-lite's
MemTable ("growing" data) until the benchmark calls ``flush()``.

For each N in ``--sizes`` and each layout:

* ``spread``: N rows over ``--users`` users' scopes; the query scope holds N/users rows;
* ``single``: all N rows in the query's scope;

it measures the insert throughput (``store.insert`` in batches of ``--batch`` rows, the
id-conflict check included), then dense and BM25 search latency while the rows are
unflushed, then the time ``flush()`` takes, then the same searches once the flushed
segment's background index build has finished (the baseline, same run). ``--fragment``
adds a second experiment: the same rows written with a flush every S rows, to see what
many small flushes cost.

    .venv/bin/python bench/milvus_flush.py            # full run (a few minutes)
    .venv/bin/python bench/milvus_flush.py --quick    # smoke run (well under a minute)
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common.milvus_lite_engine import (
    bg_marker,
    engine_collection,
    memtable_rows,
    release,
    segment_count,
    wait_background,
)
from strata.models import Collection, Scope, StoredRecord
from strata.stores.milvus import FlushPolicy, MilvusVectorStore

DIM = 384
K = 10
TENANT = "bench"
COLLECTION = Collection.FACTS
NEVER = FlushPolicy(max_unflushed_rows=10**12, max_age_s=1e12)

_NAMES = ("Alice", "Bob", "Chen", "Dana", "Emil", "Farah", "Goro", "Hana", "Ivan", "Jun")
_VERBS = ("likes", "prefers", "visited", "booked", "cooked", "bought", "studied", "reviewed",
          "planned", "cancelled", "recommended", "watched")
_ADJS = ("spicy", "quiet", "cheap", "vintage", "organic", "remote", "cozy", "modern",
         "italian", "japanese", "green", "weekly", "late", "early", "rainy")
_NOUNS = ("coffee", "ramen", "hotel", "flight", "garden", "python", "kubernetes", "novel",
          "concert", "marathon", "bicycle", "museum", "salad", "invoice", "meeting",
          "podcast", "camera", "laptop", "ticket", "recipe", "apartment", "dentist",
          "train", "guitar", "tennis", "budget", "deadline", "vacation", "birthday", "wine")
_PLACES = ("Paris", "Tokyo", "Berlin", "Lisbon", "Seoul", "Boston", "Oslo", "Lima",
           "Cairo", "Austin", "Prague", "Sydney")
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _text(rng: np.random.Generator) -> str:
    c = rng.choice
    return (f"{c(_NAMES)} {c(_VERBS)} the {c(_ADJS)} {c(_NOUNS)} near {c(_PLACES)} "
            f"on {c(_DAYS)} with a {c(_ADJS)} {c(_NOUNS)}")


def _query_text(rng: np.random.Generator) -> str:
    return f"{rng.choice(_ADJS)} {rng.choice(_NOUNS)} {rng.choice(_PLACES)}"


def _unit_vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def _ms(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000.0, q)) if values else float("nan")


# -- one measured case ----------------------------------------------------------------------
@dataclass
class Latencies:
    dense: list[float] = field(default_factory=list)
    lexical: list[float] = field(default_factory=list)


@dataclass
class CaseResult:
    layout: str
    n: int
    scope_rows: int
    runs: int
    batch_rows: int
    insert_rows_per_s: float          # median over runs
    last_batch_rows_per_s: float      # the last insert batch (most unflushed rows before it)
    engine_unflushed: int | None      # MemTable rows just before flush (sanity check)
    flush_s: float                    # median over runs
    first_dense_after_flush_ms: float  # median over runs; bg index build still running
    during_bg_dense_ms: float         # p50 of dense searches while the bg build ran (pooled)
    during_bg_queries: int            # how many searches that was (0: the build was quick)
    bg_settle_s: float                # median over runs: flush end -> bg worker idle
    id_check_unflushed_ms: float      # store.get of 500 absent ids (insert's conflict check)
    id_check_flushed_ms: float
    unflushed: Latencies = field(default_factory=Latencies)
    flushed: Latencies = field(default_factory=Latencies)

    def summary(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k not in ("unflushed", "flushed")}
        for phase in ("unflushed", "flushed"):
            lat: Latencies = getattr(self, phase)
            for kind in ("dense", "lexical"):
                for q in (50, 95, 99):
                    out[f"{kind}_{phase}_p{q}_ms"] = round(_ms(getattr(lat, kind), q), 2)
        return out


def _time_queries(fn: Callable[[int], object], count: int, warmup: int) -> list[float]:
    for i in range(warmup):
        fn(-1 - i)
    out = []
    for i in range(count):
        t0 = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - t0)
    return out


def _open(tmp: str) -> tuple[MilvusVectorStore, str]:
    path = os.path.join(tmp, "bench.db")
    store = MilvusVectorStore(path, prefix="bench_", flush_policy=NEVER)
    store.ensure_collections(DIM)
    return store, path


def _plan_batches(n: int, layout: str, users: int, batch: int) -> list[tuple[Scope, range]]:
    """(scope, row indices) insert batches; ``spread`` gives each user every users-th row."""
    if layout == "single":
        scope = Scope(tenant=TENANT, user="u000")
        return [(scope, range(s, min(s + batch, n))) for s in range(0, n, batch)]
    plan: list[tuple[Scope, range]] = []
    for u in range(users):
        idx = range(u, n, users)
        scope = Scope(tenant=TENANT, user=f"u{u:03d}")
        plan.extend((scope, idx[s:s + batch]) for s in range(0, len(idx), batch))
    return plan


def run_once(n: int, layout: str, args: argparse.Namespace, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    vectors = _unit_vectors(rng, n)
    texts = [_text(rng) for _ in range(n)]
    qvecs = _unit_vectors(rng, args.queries + 8)
    qtexts = [_query_text(rng) for _ in range(args.queries + 8)]
    query_scope = Scope(tenant=TENANT, user="u000")
    plan = _plan_batches(n, layout, args.users, args.batch)
    scope_rows = sum(len(idx) for s, idx in plan if s == query_scope)

    tmp = tempfile.mkdtemp(prefix="strata-bench-")
    store, path = _open(tmp)
    try:
        insert_s = 0.0
        last_rate = float("nan")
        for scope, idx in plan:
            recs = [StoredRecord(id=f"r{i}", text=texts[i], vector=vectors[i].tolist(),
                                 created_at=float(i), updated_at=float(i)) for i in idx]
            t0 = time.perf_counter()
            store.insert(COLLECTION, scope, recs)
            dt = time.perf_counter() - t0
            insert_s += dt
            last_rate = len(recs) / dt
        col = engine_collection(path, store.name(COLLECTION))

        def dense(i: int) -> object:
            return store.search_dense(COLLECTION, query_scope, qvecs[i].tolist(), K)

        def lexical(i: int) -> object:
            return store.search_lexical(COLLECTION, query_scope, qtexts[i], K)

        unflushed = Latencies(_time_queries(dense, args.queries, args.warmup),
                              _time_queries(lexical, args.queries, args.warmup))
        engine_unflushed = memtable_rows(col)
        absent = [f"absent{i}" for i in range(args.batch)]

        def id_check() -> float:
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                store.get(COLLECTION, query_scope, absent)
                times.append(time.perf_counter() - t0)
            return statistics.median(times)

        id_unflushed = id_check()

        t0 = time.perf_counter()
        store.flush(COLLECTION)
        flush_done = time.perf_counter()
        flush_s = flush_done - t0
        marker = bg_marker(col)
        t0 = time.perf_counter()
        dense(-8)
        first_after = time.perf_counter() - t0
        during: list[float] = []
        while marker is not None and not marker.done() and len(during) < args.queries:
            t0 = time.perf_counter()
            dense(len(during) % args.queries)
            during.append(time.perf_counter() - t0)
        wait_background(col)
        settle = time.perf_counter() - flush_done

        flushed = Latencies(_time_queries(dense, args.queries, args.warmup),
                            _time_queries(lexical, args.queries, args.warmup))
        id_flushed = id_check()
        return {
            "scope_rows": scope_rows,
            "batch_rows": max((len(idx) for _, idx in plan), default=0),
            "insert_rows_per_s": n / insert_s if insert_s > 0 else float("nan"),
            "last_batch_rows_per_s": last_rate,
            "engine_unflushed": engine_unflushed,
            "flush_s": flush_s,
            "first_after": first_after,
            "settle": settle,
            "during": during,
            "id_unflushed": id_unflushed,
            "id_flushed": id_flushed,
            "unflushed": unflushed,
            "flushed": flushed,
        }
    finally:
        store.close()
        release(path)
        shutil.rmtree(tmp, ignore_errors=True)


def run_case(n: int, layout: str, args: argparse.Namespace) -> CaseResult:
    runs = args.repeats if n <= args.repeat_max_rows else 1
    outs = [run_once(n, layout, args, seed=1000 * r + n) for r in range(runs)]

    def med(key: str) -> float:
        return float(statistics.median(o[key] for o in outs))

    res = CaseResult(
        layout=layout, n=n, scope_rows=outs[0]["scope_rows"], runs=runs,
        batch_rows=outs[0]["batch_rows"],
        insert_rows_per_s=med("insert_rows_per_s"),
        last_batch_rows_per_s=med("last_batch_rows_per_s"),
        engine_unflushed=outs[0]["engine_unflushed"],
        flush_s=med("flush_s"), first_dense_after_flush_ms=med("first_after") * 1000,
        during_bg_dense_ms=_ms([x for o in outs for x in o["during"]], 50),
        during_bg_queries=sum(len(o["during"]) for o in outs),
        bg_settle_s=med("settle"),
        id_check_unflushed_ms=med("id_unflushed") * 1000,
        id_check_flushed_ms=med("id_flushed") * 1000)
    for o in outs:  # latencies: pooled over the runs
        for phase in ("unflushed", "flushed"):
            getattr(res, phase).dense.extend(o[phase].dense)
            getattr(res, phase).lexical.extend(o[phase].lexical)
    return res


# -- the "many small flushes" experiment ----------------------------------------------------
def run_fragment(total: int, every: int, args: argparse.Namespace) -> dict[str, Any]:
    """Write ``total`` rows to one scope in batches of ``every``, flushing after each batch."""
    rng = np.random.default_rng(7)
    vectors = _unit_vectors(rng, total)
    texts = [_text(rng) for _ in range(total)]
    qvecs = _unit_vectors(rng, args.queries + 8)
    qtexts = [_query_text(rng) for _ in range(args.queries + 8)]
    scope = Scope(tenant=TENANT, user="u000")
    tmp = tempfile.mkdtemp(prefix="strata-bench-")
    store, path = _open(tmp)
    try:
        col = engine_collection(path, store.name(COLLECTION))
        flushes: list[float] = []
        write_s = 0.0
        for s in range(0, total, every):
            recs = [StoredRecord(id=f"r{i}", text=texts[i], vector=vectors[i].tolist())
                    for i in range(s, min(s + every, total))]
            t0 = time.perf_counter()
            store.insert(COLLECTION, scope, recs)
            t1 = time.perf_counter()
            store.flush(COLLECTION)
            t2 = time.perf_counter()
            flushes.append(t2 - t1)
            write_s += t2 - t0
        segments_before = segment_count(col)
        settle = wait_background(col)
        segments_after = segment_count(col)

        def dense(i: int) -> object:
            return store.search_dense(COLLECTION, scope, qvecs[i].tolist(), K)

        def lexical(i: int) -> object:
            return store.search_lexical(COLLECTION, scope, qtexts[i], K)

        d = _time_queries(dense, args.queries, args.warmup)
        lx = _time_queries(lexical, args.queries, args.warmup)
        return {
            "total": total, "every": every, "flushes": len(flushes),
            "flush_p50_ms": _ms(flushes, 50), "flush_max_ms": _ms(flushes, 100),
            "write_rows_per_s": total / write_s,
            "segments_before_bg": segments_before, "segments_after_bg": segments_after,
            "bg_settle_s": settle,
            "dense_p50_ms": _ms(d, 50), "dense_p95_ms": _ms(d, 95),
            "lexical_p50_ms": _ms(lx, 50), "lexical_p95_ms": _ms(lx, 95),
        }
    finally:
        store.close()
        release(path)
        shutil.rmtree(tmp, ignore_errors=True)


# -- output -----------------------------------------------------------------------------------
def _f(x: float | None, nd: int = 1) -> str:
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return "-"
    return f"{x:,.{nd}f}"


def _p3(lat: list[float]) -> str:
    return f"{_f(_ms(lat, 50))} / {_f(_ms(lat, 95))} / {_f(_ms(lat, 99))}"


def _p2(lat: list[float]) -> str:
    return f"{_f(_ms(lat, 50))} / {_f(_ms(lat, 95))}"


def _ratio(a: list[float], b: list[float]) -> str:
    if not a or not b:
        return "-"
    return f"{_ms(a, 50) / _ms(b, 50):.1f}x"


def render(results: list[CaseResult], fragments: list[dict[str, Any]],
           args: argparse.Namespace) -> str:
    lines = [
        f"dense: top-{K} COSINE, {args.queries} queries per phase x runs; "
        f"lexical: top-{K} BM25; latencies in ms (p99 of ~30 samples is about the max)",
        "",
        "Dense search (ms, p50 / p95 / p99)",
        "",
        "| layout | unflushed N | rows in query scope | runs | unflushed | flushed | "
        "p50 ratio |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(f"| {r.layout} | {r.n:,} | {r.scope_rows:,} | {r.runs} | "
                     f"{_p3(r.unflushed.dense)} | {_p3(r.flushed.dense)} | "
                     f"{_ratio(r.unflushed.dense, r.flushed.dense)} |")
    lines += [
        "",
        "Lexical (BM25) search (ms, p50 / p95)",
        "",
        "| layout | unflushed N | unflushed | flushed | p50 ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.layout} | {r.n:,} | {_p2(r.unflushed.lexical)} | {_p2(r.flushed.lexical)} | "
            f"{_ratio(r.unflushed.lexical, r.flushed.lexical)} |")
    lines += [
        "",
        "flush() and what follows it; inserts",
        "",
        "| layout | N | flush() s | bg index build s | 1st dense after flush ms | "
        "dense p50 during bg ms (n) | insert rows/s (last batch) | batch rows | "
        f"id check of {args.batch} ms unflushed / flushed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.layout} | {r.n:,} | {_f(r.flush_s, 3)} | {_f(r.bg_settle_s, 2)} | "
            f"{_f(r.first_dense_after_flush_ms)} | "
            f"{_f(r.during_bg_dense_ms)} ({r.during_bg_queries}) | "
            f"{_f(r.insert_rows_per_s, 0)} ({_f(r.last_batch_rows_per_s, 0)}) | "
            f"{r.batch_rows} | "
            f"{_f(r.id_check_unflushed_ms)} / {_f(r.id_check_flushed_ms)} |")
    if fragments:
        lines += [
            "",
            "Many small flushes: rows written to one scope with a flush after every S rows, "
            "then searched (bg compaction/index build finished)",
            "",
            "| rows | flush every S | flushes | flush p50 / max ms | write+flush rows/s | "
            "segments (before / after bg) | bg s | dense p50 / p95 ms | lexical p50 / p95 ms |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for g in fragments:
            lines.append(
                f"| {g['total']:,} | {g['every']:,} | {g['flushes']} | "
                f"{_f(g['flush_p50_ms'])} / {_f(g['flush_max_ms'])} | "
                f"{_f(g['write_rows_per_s'], 0)} | "
                f"{g['segments_before_bg'] if g['segments_before_bg'] is not None else '-'} / "
                f"{g['segments_after_bg'] if g['segments_after_bg'] is not None else '-'} | "
                f"{_f(g['bg_settle_s'], 2)} | "
                f"{_f(g['dense_p50_ms'])} / {_f(g['dense_p95_ms'])} | "
                f"{_f(g['lexical_p50_ms'])} / {_f(g['lexical_p95_ms'])} |")
    return "\n".join(lines)


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=_ints, default=[0, 1000, 5000, 10000, 20000],
                   help="unflushed row counts, comma-separated (default 0,1000,5000,10000,20000)")
    p.add_argument("--layouts", default="spread,single",
                   help="spread (rows over --users scopes) and/or single (all in one scope)")
    p.add_argument("--users", type=int, default=100)
    p.add_argument("--queries", type=int, default=30, help="timed queries per kind and phase")
    p.add_argument("--warmup", type=int, default=3, help="untimed queries before each series")
    p.add_argument("--batch", type=int, default=500, help="rows per insert call")
    p.add_argument("--repeats", type=int, default=3,
                   help="runs per case for sizes <= --repeat-max-rows (medians / pooled)")
    p.add_argument("--repeat-max-rows", type=int, default=1000)
    p.add_argument("--fragment", type=_ints, default=[100, 500, 2000],
                   help="flush-every-S-rows values for the many-small-flushes experiment "
                        "('' to skip)")
    p.add_argument("--fragment-rows", type=int, default=6000)
    p.add_argument("--quick", action="store_true",
                   help="small smoke run: sizes 0,500,2000, 10 queries, 1 run, small fragment")
    p.add_argument("--json", metavar="PATH", help="also write the raw summary as JSON")
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.queries, args.repeats = [0, 500, 2000], 10, 1
        args.fragment, args.fragment_rows = [500], 2000
    layouts = [x.strip() for x in args.layouts.split(",") if x.strip()]
    for lay in layouts:
        if lay not in ("spread", "single"):
            p.error(f"unknown layout {lay!r}")

    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("jieba").setLevel(logging.WARNING)
    # pymilvus asks the in-process milvus-lite server for AllocTimestamp while creating a
    # collection; milvus-lite does not implement it, pymilvus copes, grpc logs a traceback.
    logging.getLogger("grpc._server").setLevel(logging.CRITICAL)
    try:
        import jieba

        jieba.setLogLevel(logging.WARNING)
    except Exception:
        pass
    from importlib.metadata import version

    print(f"milvus-lite {version('milvus-lite')}, pymilvus {version('pymilvus')}, "
          f"numpy {np.__version__}, python {platform.python_version()}, "
          f"{os.cpu_count()} cpus, {platform.machine()}, load average {_load()}", flush=True)
    started = time.perf_counter()
    results: list[CaseResult] = []
    for layout in layouts:
        for n in args.sizes:
            t0 = time.perf_counter()
            res = run_case(n, layout, args)
            results.append(res)
            print(f"  {layout:6s} N={n:>6,}: dense {_p3(res.unflushed.dense)} -> "
                  f"{_p3(res.flushed.dense)} ms, lexical {_p2(res.unflushed.lexical)} -> "
                  f"{_p2(res.flushed.lexical)} ms, flush {res.flush_s:.3f} s, "
                  f"memtable rows {res.engine_unflushed} "
                  f"[{time.perf_counter() - t0:.0f} s, load {_load()}]", flush=True)
    fragments = []
    for every in args.fragment:
        t0 = time.perf_counter()
        g = run_fragment(args.fragment_rows, every, args)
        fragments.append(g)
        print(f"  fragment every={every}: {g['flushes']} flushes, segments "
              f"{g['segments_before_bg']}->{g['segments_after_bg']}, dense p50 "
              f"{g['dense_p50_ms']:.1f} ms [{time.perf_counter() - t0:.0f} s]", flush=True)
    print()
    print(render(results, fragments, args))
    print(f"\ntotal {time.perf_counter() - started:.0f} s, load average at the end {_load()} "
          "(other work on the machine skews every figure)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"cases": [r.summary() for r in results], "fragments": fragments},
                      fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
