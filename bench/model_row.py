"""The packaged embedding models side by side, in one run: MiniLM (the default) and mpnet.

For each model (``--models``, default ``minilm,mpnet``), in this order:

1. **The embedding process** (a child process per model, so the RSS is that model's alone:
   ``--probe MODEL``): the model loaded as a shard loads it (``make_embedder`` with
   ``torch_threads`` 2), then the write path's work on the LoCoMo turns (vectors and token
   vectors from one pass, ``encode_with_tokens``): ``--probe-turns`` turns in batches of
   ``--probe-batch`` (a batched write) and ``--probe-single`` turns one at a time (one turn
   per request), and ``--probe-queries`` questions embedded as a recall embeds its query.
   Figures: load seconds, turns/s batched and single, query-embedding p50, the CPU
   milliseconds each took (user + system of the process: what the work cost, whatever share
   of a shared machine it got), RSS after the load and after the work
   (``/proc/self/statm``), peak RSS (``ru_maxrss``).
2. **The service** (``strata serve`` with ``STRATA_EMBEDDER=<model>``, its own data dir, a
   free port, stopped by its pid; ``bench.common.server``):
   ``strata --url … eval locomo --data D --k 10 [--limit N]`` (ingestion through the batch
   endpoint, the extraction drained, every category-1-4 question: R@10, MRR, by category,
   ingestion turns/s); the server's RSS by role (``bench.common.process_rss``; the session
   shards hold the model); then ``bench/recall_latency.py --url … --reuse-tag <the eval's
   users> --no-mem0 --levels 1`` on the same users: recall p50/p95 at 1 in flight.

MiniLM is the baseline measured in the same run; the table gives mpnet / MiniLM ratios.
The machine's load average is printed at every step (it is shared: compare rows of one run).

    nice -n 5 .venv/bin/python bench/model_row.py --limit 2 --json /tmp/model_row.json
    nice -n 5 .venv/bin/python bench/model_row.py --probe-only       # the embedding process only
    nice -n 5 .venv/bin/python bench/model_row.py --service-only --limit 1
    nice -n 5 .venv/bin/python bench/model_row.py --dense --limit 1     # dense first stage only
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np

from bench.common.process_rss import sample_tree
from bench.common.server import REPO, StrataServer, free_port, revision

DATA = REPO.parent / "shared" / "data" / "locomo-dev"


def rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def cpu_s() -> float:
    """This process's CPU seconds (user + system, every thread): what the work cost whatever
    share of a shared machine's cores it was given."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def locomo_texts(data: Path, limit: int | None) -> tuple[list[str], list[str]]:
    """The turns (as the eval writes them) and the category 1-4 questions."""
    from strata.eval.locomo import conversation_sessions, turn_text

    turns: list[str] = []
    questions: list[str] = []
    for path in sorted(data.glob("*.json"))[:limit]:
        conv = json.loads(path.read_text())
        for _, session in conversation_sessions(conv):
            turns.extend(turn_text(t) for t in session)
        questions.extend(str(q["question"]) for q in conv["qa"] if q.get("category") in
                         (1, 2, 3, 4))
    return turns, questions


def probe(model: str, args: argparse.Namespace) -> dict[str, Any]:
    """The embedding process's figures for ``model`` (run in a child process)."""
    from strata.settings import Settings
    from strata.stores.embedders import make_embedder

    turns, questions = locomo_texts(args.data, args.limit)
    started = time.perf_counter()
    embedder: Any = make_embedder(Settings(embedder=model, torch_threads=2))
    load_s = time.perf_counter() - started
    embedder.encode_with_tokens(["warm up"])
    loaded = rss_mib()
    batch = turns[:args.probe_turns]
    t0, c0 = time.perf_counter(), cpu_s()
    for start in range(0, len(batch), args.probe_batch):
        embedder.encode_with_tokens(batch[start:start + args.probe_batch])
    batched_s, batched_cpu = time.perf_counter() - t0, cpu_s() - c0
    singles = turns[args.probe_turns:args.probe_turns + args.probe_single]
    t0, c0 = time.perf_counter(), cpu_s()
    for text in singles:
        embedder.encode_with_tokens([text])
    single_s, single_cpu = time.perf_counter() - t0, cpu_s() - c0
    query_ms = []
    c0 = cpu_s()
    for q in questions[:args.probe_queries]:
        t0 = time.perf_counter()
        embedder.encode_with_tokens([q], queries=True)
        query_ms.append((time.perf_counter() - t0) * 1000)
    query_cpu = cpu_s() - c0
    return {"model": model, "model_id": embedder.model_id, "dim": embedder.dim,
            "load_s": round(load_s, 1), "rss_loaded_mib": round(loaded),
            "rss_after_mib": round(rss_mib()),
            "rss_peak_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "turns_batched": len(batch), "turns_per_s_batched": round(len(batch) / batched_s, 1),
            "cpu_ms_per_turn_batched": round(batched_cpu * 1000 / max(len(batch), 1), 1),
            "turns_single": len(singles),
            "turns_per_s_single": round(len(singles) / single_s, 1) if singles else None,
            "cpu_ms_per_turn_single": round(single_cpu * 1000 / max(len(singles), 1), 1),
            "query_embed_p50_ms": round(statistics.median(query_ms), 1) if query_ms else None,
            "cpu_ms_per_query": round(query_cpu * 1000 / max(len(query_ms), 1), 1),
            "load_avg": round(os.getloadavg()[0], 1)}


def dense_row(model: str, args: argparse.Namespace) -> dict[str, Any]:
    """The first stage alone, in process: every turn of the conversations embedded as
    Strata stores it, each category 1-4 question's ``--k`` nearest turns by cosine; R@k
    and MRR of the evidence (no lexical, late interaction, entities or ranking)."""
    from strata.eval.locomo import CATEGORIES, conversation_sessions, turn_text
    from strata.settings import Settings
    from strata.stores.embedders import make_embedder

    embedder: Any = make_embedder(Settings(embedder=model, torch_threads=2))
    recalls: list[float] = []
    reciprocal: list[float] = []
    started, c0 = time.perf_counter(), cpu_s()
    for path in sorted(args.data.glob("*.json"))[:args.limit]:
        conv = json.loads(path.read_text())
        turns = [t for _, session in conversation_sessions(conv) for t in session]
        vectors = embedder.encode([turn_text(t) for t in turns])
        ids = [t["dia_id"] for t in turns]
        qa = [q for q in conv["qa"] if q.get("category") in CATEGORIES and q.get("evidence")]
        queries = embedder.encode([str(q["question"]) for q in qa])
        for q, vec in zip(qa, queries, strict=True):
            top = [ids[i] for i in np.argsort(-(vectors @ vec))[:args.k]]
            evidence = set(q["evidence"])
            recalls.append(len(evidence & set(top)) / len(evidence))
            rank = next((r for r, d in enumerate(top, 1) if d in evidence), None)
            reciprocal.append(1.0 / rank if rank else 0.0)
    return {"model": model, "questions": len(recalls),
            "dense_recall_at_k": round(statistics.fmean(recalls), 4),
            "dense_mrr": round(statistics.fmean(reciprocal), 4),
            "wall_s": round(time.perf_counter() - started, 1),
            "cpu_s": round(cpu_s() - c0, 1)}


def run_probe(model: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--probe", model, "--data", str(args.data),
           "--probe-turns", str(args.probe_turns), "--probe-batch", str(args.probe_batch),
           "--probe-single", str(args.probe_single), "--probe-queries", str(args.probe_queries)]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.step_timeout_s)
    if out.returncode != 0:
        raise RuntimeError(f"probe {model} failed: {out.stderr[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def eval_locomo(base: str, args: argparse.Namespace, out: Path) -> tuple[dict[str, Any], str]:
    cmd = [str(args.strata_bin), "--url", base, "eval", "locomo", "--data", str(args.data),
           "--k", str(args.k), "--out", str(out)]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    print("  " + " ".join(cmd), flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.step_timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"eval failed: {done.stderr[-2000:]}")
    tag = next(line.rsplit("-", 1)[1] for line in done.stdout.splitlines()
               if line.startswith("users: locomo-"))
    return dict(json.loads(out.read_text())), tag


def recall_p50(base: str, pid: int, tag: str, args: argparse.Namespace, out: Path
               ) -> dict[str, Any]:
    cmd = [sys.executable, str(REPO / "bench" / "recall_latency.py"), "--url", base,
           "--reuse-tag", tag, "--server-pid", str(pid), "--no-mem0", "--data", str(args.data),
           "--synthetic-users", "0", "--locomo-share", "1.0", "--levels", "1",
           "--requests", str(args.requests), "--time-cap-s", str(args.time_cap_s),
           "--json", str(out)]
    if args.limit:
        cmd += ["--conversations", str(args.limit)]
    print("  " + " ".join(cmd), flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.step_timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"recall_latency failed: {done.stderr[-2000:]}")
    report = json.loads(out.read_text())
    return dict(next(r for r in report["recall"] if r["level"] == 1))


def service_row(model: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    port = free_port()
    server = StrataServer(args.strata_bin, tmp / model, port,
                          {"STRATA_EMBEDDER": model, "STRATA_DEMO_KNOWLEDGE": "false",
                           "STRATA_RAY_DASHBOARD_PORT": "0",
                           **dict(kv.split("=", 1) for kv in args.server_env)})
    row: dict[str, Any] = {"model": model}
    try:
        row["server_start_s"] = round(server.start(), 1)
        assert server.pid is not None
        print(f"  strata serve (pid {server.pid}) on :{port} ready in {row['server_start_s']} s;"
              f" load avg {os.getloadavg()[0]:.1f}", flush=True)
        report, tag = eval_locomo(server.base, args, tmp / f"{model}-eval.json")
        overall = report["overall"]
        row.update(recall_at_k=overall["recall_at"][str(args.k)], mrr=overall["mrr"],
                   turn_mrr=overall["turn_mrr"], questions=overall["questions"],
                   by_category={c: [s["recall_at"].get(str(args.k)), s["mrr"]]
                                for c, s in report["by_category"].items()},
                   context_tokens=report["context_tokens_mean"].get(str(args.k)),
                   turns=report["turns"], ingestion_s=report["ingestion_s"],
                   ingest_turns_per_s=round(report["turns"] / report["ingestion_s"], 1),
                   extraction_wait_s=report["extraction_wait_s"], tag=tag)
        print(f"  R@{args.k} {row['recall_at_k']:.4f}  MRR {row['mrr']:.4f}; "
              f"{row['turns']} turns in {row['ingestion_s']} s "
              f"({row['ingest_turns_per_s']}/s), extraction drained "
              f"{row['extraction_wait_s']} s later; load avg {os.getloadavg()[0]:.1f}", flush=True)
        rss = sample_tree(server.pid, 0.0)
        shards = {role: mb for role, mb in rss.rss_mb.items() if "SessionShard" in role}
        row.update(rss_total_mib=round(sum(rss.rss_mb.values())),
                   rss_shards_mib=round(sum(shards.values())),
                   shard_processes=sum(rss.procs[r] for r in shards),
                   rss_by_role={r: round(mb) for r, mb in sorted(rss.rss_mb.items())})
        print(f"  RSS: shards {row['rss_shards_mib']} MiB ({row['shard_processes']} "
              f"processes), server tree {row['rss_total_mib']} MiB", flush=True)
        latency = recall_p50(server.base, server.pid, tag, args, tmp / f"{model}-latency.json")
        row.update(recall_p50_ms=latency["p50_ms"], recall_p95_ms=latency["p95_ms"],
                   recall_n=latency["n"], recall_errors=latency["errors"],
                   load_avg_end=round(os.getloadavg()[0], 1))
        print(f"  recall @1: p50 {latency['p50_ms']} ms, p95 {latency['p95_ms']} ms "
              f"({latency['n']} requests, {latency['errors']} errors); load avg "
              f"{os.getloadavg()[0]:.1f}", flush=True)
    finally:
        server.stop()
    return row


def ratio(a: Any, b: Any) -> str:
    return f"{a / b:.2f}" if isinstance(a, int | float) and isinstance(b, int | float) and b \
        else "n/a"


def print_table(probes: dict[str, dict[str, Any]], rows: dict[str, dict[str, Any]],
                k: int) -> None:
    cols = [(f"R@{k}", rows, "recall_at_k"), ("MRR", rows, "mrr"),
            ("recall p50 ms", rows, "recall_p50_ms"), ("recall p95 ms", rows, "recall_p95_ms"),
            ("ingest turns/s (HTTP)", rows, "ingest_turns_per_s"),
            ("extraction drain s", rows, "extraction_wait_s"),
            ("shard RSS MiB", rows, "rss_shards_mib"),
            ("embed turns/s batched", probes, "turns_per_s_batched"),
            ("embed turns/s single", probes, "turns_per_s_single"),
            ("query embed p50 ms", probes, "query_embed_p50_ms"),
            ("CPU ms/turn batched", probes, "cpu_ms_per_turn_batched"),
            ("CPU ms/turn single", probes, "cpu_ms_per_turn_single"),
            ("CPU ms/query", probes, "cpu_ms_per_query"),
            ("embed process RSS MiB", probes, "rss_after_mib"),
            ("model load s", probes, "load_s")]
    models = list(dict.fromkeys([*probes, *rows]))
    print("\n| model | " + " | ".join(c[0] for c in cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for m in models:
        print(f"| {m} | " + " | ".join(str(src.get(m, {}).get(key, "n/a"))
                                       for _, src, key in cols) + " |")
    if len(models) == 2:
        a, b = models[1], models[0]
        print(f"| {a} / {b} | " + " | ".join(
            ratio(src.get(a, {}).get(key), src.get(b, {}).get(key)) for _, src, key in cols)
            + " |")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--models", default="minilm,mpnet")
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--limit", type=int, default=None, help="first N LoCoMo conversations "
                   "(the same subset for every model)")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--requests", type=int, default=100, help="recalls at 1 in flight")
    p.add_argument("--time-cap-s", type=float, default=120.0)
    p.add_argument("--step-timeout-s", type=float, default=2400.0)
    p.add_argument("--probe-turns", type=int, default=200)
    p.add_argument("--probe-batch", type=int, default=50)
    p.add_argument("--probe-single", type=int, default=40)
    p.add_argument("--probe-queries", type=int, default=40)
    p.add_argument("--probe-only", action="store_true", help="the embedding process only")
    p.add_argument("--service-only", action="store_true", help="the service rows only")
    p.add_argument("--dense", action="store_true", help="the first stage alone, in process: "
                   "dense R@k and MRR of each model (no server)")
    p.add_argument("--probe", default=None, help=argparse.SUPPRESS)
    p.add_argument("--strata-bin", type=Path, default=REPO / ".venv" / "bin" / "strata")
    p.add_argument("--server-env", action="append", default=[], metavar="KEY=VALUE",
                   help="another setting for every model's server (STRATA_SHARD_EMBEDDING="
                   "embedder: the model loads in the Embedder deployment, after Serve's proxy)")
    p.add_argument("--json", type=Path, default=None)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.probe:
        print(json.dumps(probe(args.probe, args)))
        return 0
    if args.dense:
        for model in [m.strip() for m in args.models.split(",") if m.strip()]:
            print(json.dumps(dense_row(model, args)), flush=True)
        return 0
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    print(f"strata {revision()}; {os.cpu_count()} cpus; load avg {os.getloadavg()[0]:.1f}; "
          f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC; LoCoMo "
          f"{args.data} (first {args.limit or 'all'} conversations)", flush=True)
    probes: dict[str, dict[str, Any]] = {}
    rows: dict[str, dict[str, Any]] = {}
    for model in [] if args.service_only else models:
        print(f"\n{model}: the embedding process", flush=True)
        probes[model] = run_probe(model, args)
        print("  " + json.dumps(probes[model]), flush=True)
    if not args.probe_only:
        tmp = Path(tempfile.mkdtemp(prefix="strata-model-row-"))
        try:
            for model in models:
                print(f"\n{model}: the service", flush=True)
                rows[model] = service_row(model, args, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print_table(probes, rows, args.k)
    for model, row in rows.items():
        print(f"{model} by category (R@{args.k}, MRR): {row['by_category']}")
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                         "revision": revision(), "probes": probes,
                                         "rows": rows}, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
