"""A soak: mixed load at a steady, bounded rate for minutes, with the RSS of every process
of the server sampled, so "flat memory, no error growth" can be judged (issue #15).

What it does:

1. ``strata serve`` as a subprocess (its own session, data dir under /tmp, a free port, an
   agent and an admin API key, the packaged MiniLM embedder), or ``--url`` of a running one
   (``--server-pid`` to sample its processes too).
2. Three small knowledge documents imported (admin key), so knowledge search finds text.
3. Load, open loop: request ``i`` is issued at ``t0 + i / --rate`` whatever came back
   before it, at most ``--max-in-flight`` at once (a request waits for a slot; its latency
   counts from its scheduled time, so a slow server shows as latency, not as a lower rate;
   more than ``--max-backlog`` waiting and the request is shed and counted). The mix over
   ``--users`` users (``bench.common.soak_workload``): turn appends (after 8-16 turns a
   user moves to a new session and the old one is closed, once its turns are back, so
   extraction runs), recalls, remember (a fact created) and forget (one created earlier
   deleted), memory listings, knowledge searches. ``--churn-sessions N`` erases a user
   (admin ``DELETE /v1/users/{id}``) after N closed sessions, once none of its writes is
   out, so the data stays about the same size: memory that still grows is not data.
4. Every ``--sample-s`` seconds: the RSS of every process under the server's pid grouped by
   role (``bench.common.process_rss``; named actors, such as the shards, by their names
   from the Ray dashboard, which this benchmark can ask with the Ray token it gave the
   server), the requests done, errors by status and the p50/p99 latency of the window; a
   table row per window.
5. The summary (``bench.common.soak_report``): per role the RSS before the load, the mean
   of the first and the last minute of load, the change and the least-squares slope in
   MB/min (over the whole load and after its first minute, which holds start-up: models
   loaded on first use), errors per window, the first and second half's errors; the
   long-term queue backlog at the end. ``--out PATH`` writes all of it as JSON.

Run (from the repository root)::

    .venv/bin/python bench/soak.py --duration 60 --out /tmp/soak-smoke.json   # smoke
    .venv/bin/python bench/soak.py --out /tmp/soak.json                       # 10 minutes
    .venv/bin/python bench/soak.py --rate 10 --churn-sessions 2 --out /tmp/soak-churn.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import secrets
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
from bench.common.process_rss import RoleSample, actor_names, sample_tree
from bench.common.server import REPO, StrataServer, free_port, revision
from bench.common.soak_report import Window, build_report, print_row, print_summary
from bench.common.soak_workload import KNOWLEDGE, MIX, Request, SoakWorkload, choose_ops

AGENT_KEY, ADMIN_KEY = "soak-agent", "soak-admin"


def issue_times(rate: float, duration_s: float) -> list[float]:
    """The open-loop schedule: request ``i`` at ``i / rate`` seconds, for ``duration_s``."""
    if rate <= 0 or duration_s <= 0:
        return []
    return [i / rate for i in range(round(rate * duration_s))]


class Soak:
    """The open-loop driver and the sampler, sharing the current window."""

    def __init__(self, args: argparse.Namespace, base: str, server_pid: int | None,
                 dashboard: tuple[str, str | None] | None = None) -> None:
        self.args = args
        self.server_pid = server_pid
        self.dashboard = dashboard  # (url, Ray auth token) of the server's Ray, to name actors
        self.names: dict[int, str] = {}
        self._asked: set[int] = set()  # worker pids seen when the names were last asked
        self.workload = SoakWorkload(base, args.users, uuid.uuid4().hex[:6], args.seed,
                                     args.churn_sessions)
        self.admin = {"Authorization": f"Bearer {args.admin_key}"}
        self.window = Window()
        self.windows: list[dict[str, Any]] = []
        self.samples: list[RoleSample] = []
        self.waiting = 0
        self.t0 = 0.0

    async def _one(self, client: httpx.AsyncClient, slots: asyncio.Semaphore,
                   request: Request, due: float) -> None:
        kind, method, url, body = request
        self.waiting += 1
        async with slots:
            self.waiting -= 1
            try:
                if method == "GET":
                    resp = await client.get(url, params=body)
                elif method == "DELETE":  # erasing a whole user takes the admin key
                    resp = await client.delete(url, headers=self.admin if kind == "erase"
                                               else None)
                else:
                    resp = await client.post(url, json=body)
            except httpx.HTTPError as exc:
                self.window.record(kind, type(exc).__name__, 0.0, repr(exc))
                return
            finally:
                self.workload.finished(kind, url, body)
        latency = time.monotonic() - due
        if resp.status_code != 200:
            self.window.record(kind, str(resp.status_code), latency, resp.text)
            return
        self.window.record(kind, "ok", latency)
        if kind == "remember":
            self.workload.answered(kind, url, resp.json())

    async def _drive(self, client: httpx.AsyncClient) -> None:
        slots = asyncio.Semaphore(self.args.max_in_flight)
        times = issue_times(self.args.rate, self.args.duration)
        ops = choose_ops(len(times), MIX, self.args.seed + 1)
        tasks: set[asyncio.Task[None]] = set()
        for offset, kind in zip(times, ops, strict=True):
            due = self.t0 + offset
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            if self.waiting >= self.args.max_backlog:
                self.window.shed += 1
                continue
            task = asyncio.create_task(self._one(client, slots, self.workload.request(kind),
                                                 due))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        await asyncio.gather(*tasks)

    async def _sample_loop(self, stop: asyncio.Event) -> None:
        n = 1
        while not stop.is_set():
            due = self.t0 + n * self.args.sample_s
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=max(0.0, due - time.monotonic()))
            # the scheduled instant (the last sample: when the load ended), so the report's
            # rounded times and the run's own summary select the same samples
            at = n * self.args.sample_s
            await self._take_sample(at if not stop.is_set() else time.monotonic() - self.t0)
            n += 1

    async def _take_sample(self, t: float) -> None:
        window, self.window = self.window, Window()
        # the machine's load average: on a shared machine, what latency is read against
        row: dict[str, Any] = {"t_s": round(t, 1), **window.as_json(),
                               "load_avg_1m": round(os.getloadavg()[0], 1)}
        if self.server_pid is not None:
            sample = await asyncio.to_thread(sample_tree, self.server_pid, t, self.names)
            self.samples.append(sample)
            await self._refresh_names(sample)
            row["rss_mb"] = sample.as_json()
        self.windows.append(row)
        print_row(row, self.args.sample_s)

    async def _refresh_names(self, sample: RoleSample) -> None:
        """Ask the dashboard for actor names again when a worker has appeared (an actor
        started or restarted); its role gets the name from the next sample on."""
        pids = {pid for pid, role, _, _ in sample.detail if role.startswith("ray::")}
        if self.dashboard and not pids <= self._asked:
            self._asked |= pids
            self.names = await asyncio.to_thread(actor_names, *self.dashboard) or self.names

    async def run(self) -> None:
        limits = httpx.Limits(max_connections=self.args.max_in_flight,
                              max_keepalive_connections=self.args.max_in_flight)
        headers = {"Authorization": f"Bearer {self.args.key}"}
        async with httpx.AsyncClient(headers=headers, timeout=self.args.timeout_s,
                                     limits=limits) as client:
            self.t0 = time.monotonic()
            if self.server_pid is not None:  # the baseline, before any load
                if self.dashboard:
                    self.names = await asyncio.to_thread(actor_names, *self.dashboard)
                    print(f"actor names from the dashboard: {len(self.names)}", flush=True)
                baseline = await asyncio.to_thread(sample_tree, self.server_pid, 0.0, self.names)
                self._asked = {pid for pid, role, _, _ in baseline.detail
                               if role.startswith("ray::")}
                self.samples.append(baseline)
            stop = asyncio.Event()
            sampler = asyncio.create_task(self._sample_loop(stop))
            await self._drive(client)
            stop.set()
            await sampler


def dashboard(server: StrataServer | None) -> tuple[str, str | None] | None:
    """The dashboard of the Ray that the server started (``<data_dir>/ray.json``) and the
    Ray auth token this benchmark gave it."""
    if server is None:
        return None
    try:
        url = str(json.loads((server.data_dir / "ray.json").read_text())["dashboard_url"])
    except (OSError, ValueError, KeyError):
        return None
    return url, server.env.get("RAY_AUTH_TOKEN")


def import_knowledge(base: str, admin_key: str) -> str:
    try:
        resp = httpx.post(f"{base}/v1/knowledge/documents", json={"documents": KNOWLEDGE},
                          headers={"Authorization": f"Bearer {admin_key}"}, timeout=300)
    except httpx.HTTPError as exc:
        return f"failed: {exc!r}"
    return "ok" if resp.status_code == 200 else f"{resp.status_code} {resp.text[:200]}"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--duration", type=float, default=600.0, help="seconds of load")
    p.add_argument("--rate", type=float, default=20.0, help="requests per second, in total")
    p.add_argument("--users", type=int, default=50)
    p.add_argument("--max-in-flight", type=int, default=16)
    p.add_argument("--max-backlog", type=int, default=400,
                   help="requests waiting for a slot before new ones are shed")
    p.add_argument("--sample-s", type=float, default=10.0)
    p.add_argument("--timeout-s", type=float, default=60.0)
    p.add_argument("--url", default=None, help="a running Strata instead of starting one")
    p.add_argument("--server-pid", type=int, default=None,
                   help="with --url: the pid whose process tree is sampled")
    p.add_argument("--key", default=AGENT_KEY)
    p.add_argument("--admin-key", default=ADMIN_KEY)
    p.add_argument("--strata-bin", type=Path, default=REPO / ".venv" / "bin" / "strata")
    p.add_argument("--server-env", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--seed", type=int, default=15)
    p.add_argument("--churn-sessions", type=int, default=0, metavar="N", help=(
        "erase a user (DELETE /v1/users/{id}) after N closed sessions; the user starts "
        "again empty, so the data stays about the same size and memory can be judged"))
    p.add_argument("--keep-data", action="store_true")
    p.add_argument("--out", type=Path, metavar="PATH", help="the JSON report")
    args = p.parse_args(argv)
    if any("=" not in kv for kv in args.server_env):
        p.error("--server-env takes KEY=VALUE")
    if args.url and (args.key == AGENT_KEY) != (args.admin_key == ADMIN_KEY):
        p.error("with --url give both --key and --admin-key, or neither")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report: dict[str, Any] = {
        "args": {k: str(v) for k, v in vars(args).items()}, "revision": revision(),
        "machine": f"python {platform.python_version()}, {os.cpu_count()} cpus",
        "started": f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC",
        "load_avg_start": round(os.getloadavg()[0], 2), "mix": MIX}
    print(f"{report['machine']}, load avg {report['load_avg_start']}; strata "
          f"{report['revision']}; {report['started']}", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="strata-soak-"))
    server: StrataServer | None = None
    try:
        if args.url:
            base, pid = args.url.rstrip("/"), args.server_pid
        else:
            keys = {AGENT_KEY: {"tenant": "soak", "role": "agent"},
                    ADMIN_KEY: {"tenant": "soak", "role": "admin"}}
            env = {"STRATA_API_KEYS": json.dumps(keys), "STRATA_DEMO_KNOWLEDGE": "false",
                   "STRATA_RAY_DASHBOARD_PORT": "0",
                   # a token of its own for its own Ray, so the dashboard can be asked for
                   # actor names (``strata serve`` runs Ray with token auth)
                   "RAY_AUTH_TOKEN": secrets.token_hex(32),
                   **dict(kv.split("=", 1) for kv in args.server_env)}
            server = StrataServer(args.strata_bin, tmp / "strata", free_port(), env)
            print(f"strata serve on {server.base} (log {server.log_path}) ...", flush=True)
            report["server_start_s"] = round(server.start(), 1)
            base, pid = server.base, server.pid
            print(f"  ready in {report['server_start_s']} s (pid {pid})", flush=True)
        report["knowledge_import"] = import_knowledge(base, args.admin_key)
        print(f"knowledge import: {report['knowledge_import']}", flush=True)
        print(f"\nload: {args.rate} req/s for {args.duration:.0f} s over {args.users} users, "
              f"at most {args.max_in_flight} in flight; a row per {args.sample_s:.0f} s")
        print(f"{'t_s':>7} {'done':>6} {'req/s':>6} {'p50_ms':>8} {'p99_ms':>8} {'shed':>5} "
              f"{'errors':>12} {'rss_MB':>9} {'load':>5}", flush=True)
        soak = Soak(args, base, pid, dashboard(server))
        started = time.monotonic()
        asyncio.run(soak.run())
        report.update(build_report(soak.windows, soak.samples, soak.workload.closed,
                                   time.monotonic() - started))
        report["users_erased"] = soak.workload.erased
        try:
            report["queue_backlog_end"] = api.queue_backlog(
                base, {"Authorization": f"Bearer {args.admin_key}"})
        except httpx.HTTPError as exc:
            report["queue_backlog_end"] = repr(exc)
        print_summary(report)
        print(f"long-term queue backlog at the end: {report['queue_backlog_end']}")
    finally:
        if server is not None:
            server.stop()
        if args.keep_data:
            print(f"data kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    report["load_avg_end"] = round(os.getloadavg()[0], 2)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2, default=str))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
