"""Working memory at scale: many concurrent open sessions on the default shard pool.

Starts a real Redis (``EmbeddedRedis``, AOF on, in a temporary directory), a local Ray
instance and the whole app as ``strata serve`` runs it (``serve_app.main.start``: store
owner, the default pool of ``Settings().session_shards`` shards, the Serve app with the hash
embedder), then loads ``--sessions`` sessions of ``--turns`` turns each (none closed, so all
stay in the shards' memory). Sessions belong to a mix of users (on average
``--sessions-per-user`` per user); each session's turns are sequential, sessions interleave.
Turn contents are short English sentences of 15-25 words, most with numbers, dates or
amounts; none is an explicit "remember" intent unless ``--remember-share`` says so (those
are written to long-term memory before the turn returns, a different path).

It measures:

1. memory per session: RSS of the shard actor processes (``/proc/<pid>/status``) and Redis
   ``used_memory`` (WAL streams, snapshots, the activity index) before and after the load,
   plus the live Python bytes of the sessions (a deep ``getsizeof`` run inside the shards);
2. turn appends through the actor handles (``append_turn.remote``, routed with
   ``ShardDirectory.for_scope``): throughput and latency at ``--concurrency`` calls in flight,
   the unloaded latency (one call in flight), and the same shard class called in-process
   (no Ray) for the cost of the work itself;
3. the same through HTTP (``POST /v1/sessions/{sid}/turns``) with an async httpx client at
   ``--http-concurrency``, on ``--http-sessions`` further sessions (a subset: HTTP is the
   slow path on a small machine);
4. the floor, same run and driver: raw Redis XADD of a record of the WAL record's size (and
   XADD + ZADD, the two round trips a shard makes per turn), one in flight and
   ``--concurrency`` in flight.

    .venv/bin/python bench/sessions.py            # full run (10,000 sessions; ~4-5 minutes)
    .venv/bin/python bench/sessions.py --quick    # smoke run (under a minute)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import httpx
import ray
import redis
import redis.asyncio as aioredis

from actors.directory import ShardDirectory
from actors.store_owner import OWNER_NAME
from bench.common.local_app import start_local_app
from bench.common.server import revision
from serve_app import main as serve_main
from strata.models import Role, Scope, Turn, utcnow
from strata.settings import Settings
from strata.stores.redis_server import EmbeddedRedis, free_port

TENANT = "default"  # the dev API key's tenant, so HTTP and actor sessions look alike
AUTH = {"Authorization": "Bearer dev"}

# -- turn contents ------------------------------------------------------------------------
_NAMES = ("Alice", "Bob", "Chen", "Dana", "Emil", "Farah", "Goro", "Hana", "Ivan", "Julia",
          "Marco", "Priya", "Sven", "Yuki")
_CITIES = ("Paris", "Tokyo", "Berlin", "Lisbon", "Seoul", "Boston", "Oslo", "Lima", "Cairo",
           "Austin", "Prague", "Sydney", "Denver", "Madrid")
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("January", "March", "April", "June", "July", "September", "October", "December")
_ADJS = ("quiet", "cheaper", "family", "premium", "basic", "faster", "larger", "local")
_CUISINES = ("Italian", "Thai", "Japanese", "Mexican", "Indian", "Greek", "Korean")
_NOUNS = ("marketing", "kitchen", "office", "laptop", "insurance", "conference", "garden",
          "database", "website", "travel")
_STREETS = ("Oak", "Maple", "Elm", "Cedar", "Pine", "Harbor", "Mill")

_TEMPLATES = (
    "I need to book a table for {n} people at the {adj} {cuisine} restaurant near the "
    "station in {city} on {day} evening.",
    "Can you remind me what the total was for the {noun} order last week, I think it came "
    "to about ${money}?",
    "My flight to {city} leaves at {hour}:{minute} on {day}, so I have to be at the airport "
    "at least two hours early.",
    "We spent ${money} on {noun} supplies last month and I would like to keep it under "
    "${money2} this time.",
    "Please move my {noun} appointment with {name} from {day} to {day2} afternoon, anytime "
    "after {hour} works for me.",
    "The report says revenue grew {pct} percent in the third quarter, which is better than "
    "the {pct2} percent we expected.",
    "I prefer the {adj} option because the other one is {n} kilometers further away and "
    "costs more to reach by train.",
    "My daughter is allergic to peanuts, so any restaurant we pick needs a clear allergy "
    "menu for her and her friends.",
    "Could you summarize the main points from yesterday's meeting with {name} about the "
    "{noun} budget and the next steps?",
    "The apartment on {street} Street has {n} bedrooms and the rent is ${money} a month, "
    "including water and internet.",
    "Let's plan a {n}-day trip to {city} in {month}, with one day for museums and another "
    "one for hiking nearby.",
    "I ran {n} kilometers this morning in {mins} minutes, which is my best time since I "
    "started training in {month}.",
    "Make sure the invoice for order {order} is sent to {name} before {day}, otherwise the "
    "payment will be delayed again.",
    "What is a good recipe for a {cuisine} dinner that takes less than {mins} minutes and "
    "serves {n} hungry people?",
    "Our team has {n2} open tickets this sprint and {n} of them are blocked on the {noun} "
    "migration that {name} owns.",
    "I'm thinking about switching to the {adj} plan, which is ${money} per month but "
    "includes {n2} gigabytes of data.",
    "The package was supposed to arrive on {day}, but tracking number {order} still shows "
    "it stuck in a warehouse in {city}.",
    "Thanks, that helps a lot, and could you also draft a short reply to {name} confirming "
    "the new schedule for next week?",
    "My dentist appointment is at {hour}:{minute} on {month} {date}, and I need to leave "
    "work about an hour earlier than usual.",
    "How much would it cost to rent a car in {city} for {n} days if I return it at the "
    "airport instead?",
)


# An explicit intent: the shard writes it to long-term memory before the turn returns.
_REMEMBER = ("Remember that my {rel} is allergic to {food}, so any restaurant we pick needs "
             "a clear allergy menu for {obj}.")


def make_remember(rng: random.Random) -> str:
    rel, obj = rng.choice((("daughter", "her"), ("son", "him"), ("husband", "him"),
                           ("wife", "her"), ("partner", "them")))
    food = rng.choice(("peanuts", "shellfish", "gluten", "sesame", "dairy", "eggs"))
    return _REMEMBER.format(rel=rel, obj=obj, food=food)


def make_sentence(rng: random.Random) -> str:
    c = rng.choice
    return c(_TEMPLATES).format(
        n=rng.randint(2, 9), n2=rng.randint(10, 60), adj=c(_ADJS), cuisine=c(_CUISINES),
        city=c(_CITIES), day=c(_DAYS), day2=c(_DAYS), noun=c(_NOUNS), name=c(_NAMES),
        money=rng.randint(20, 4000), money2=rng.randint(20, 4000), hour=rng.randint(6, 20),
        minute=c(("00", "15", "30", "45")), pct=rng.randint(2, 30), pct2=rng.randint(2, 30),
        street=c(_STREETS), month=c(_MONTHS), date=rng.randint(1, 28),
        mins=rng.randint(15, 90), order=f"{rng.randint(10000, 99999)}-{rng.randint(10, 99)}")


@dataclass
class SessionPlan:
    scope: Scope
    session_id: str
    contents: list[str]


def plan_sessions(prefix: str, sessions: int, turns: int, per_user: float,
                  seed: int, remember_share: float = 0.0) -> list[SessionPlan]:
    """``sessions`` sessions over ``sessions / per_user`` users (user = index mod users);
    a ``remember_share`` of the turns are explicit "Remember that ..." intents."""
    rng = random.Random(seed)
    users = max(1, round(sessions / per_user))

    def content() -> str:
        if remember_share > 0 and rng.random() < remember_share:
            return make_remember(rng)
        return make_sentence(rng)

    return [SessionPlan(Scope(tenant=TENANT, user=f"{prefix}u{i % users:05d}"),
                        f"{prefix}s{i:05d}", [content() for _ in range(turns)])
            for i in range(sessions)]


# -- measurement helpers ---------------------------------------------------------------------
@dataclass
class Series:
    """One measured series: per-call latencies (s) and the wall time of the whole series."""

    name: str
    latencies: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    in_flight: int = 1
    errors: int = 0
    note: str = ""

    @property
    def count(self) -> int:
        return len(self.latencies)

    def ms(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        return float(np.percentile(np.asarray(self.latencies) * 1000.0, q))

    @property
    def per_s(self) -> float:
        return self.count / self.wall_s if self.wall_s > 0 else float("nan")


async def run_concurrent(plans: Sequence[SessionPlan], in_flight: int,
                         call: Callable[[SessionPlan, int], Awaitable[bool]],
                         series: Series) -> Series:
    """Every session's turns in order; at most ``in_flight`` calls outstanding overall.

    The semaphore is FIFO, so after its first turn a session queues behind all others:
    sessions interleave the way concurrent conversations do.
    """
    sem = asyncio.Semaphore(in_flight)
    lat = series.latencies

    async def one_session(plan: SessionPlan) -> None:
        for i in range(len(plan.contents)):
            async with sem:
                t0 = time.perf_counter()
                ok = await call(plan, i)
                lat.append(time.perf_counter() - t0)
                if not ok:
                    series.errors += 1

    series.in_flight = in_flight
    started = time.perf_counter()
    await asyncio.gather(*(one_session(p) for p in plans))
    series.wall_s = time.perf_counter() - started
    return series


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS / RssAnon / RssFile / RssShmem of a process, in KiB."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
                out[key] = int(rest.split()[0])
    return out


def shard_memory(pids: Sequence[int]) -> dict[str, int]:
    total: dict[str, int] = {}
    for pid in pids:
        for k, v in proc_status(pid).items():
            total[k] = total.get(k, 0) + v
    return total


def redis_memory(client: redis.Redis) -> dict[str, int]:
    info = client.info("memory")
    return {"used_memory": int(info["used_memory"]), "dbsize": int(client.dbsize())}


def wal_record(content: str, session_id: str, user: str, n: int) -> str:
    """The exact JSON a shard appends to a session's WAL for one turn."""
    turn = Turn(turn_id=f"{session_id}:{n}", session_id=session_id, user_id=user,
                role=Role.USER, content=content, created_at=utcnow())
    return json.dumps({"op": "turn", "at": utcnow().isoformat(),
                       "turn": turn.model_dump(mode="json")}, ensure_ascii=False)


# -- phases -----------------------------------------------------------------------------------
def redis_baseline(url: str, records: Sequence[str], ops: int, in_flight: int,
                   keys: int) -> list[Series]:
    """XADD (and XADD + ZADD) of WAL-sized records from this driver, on scratch keys."""
    client = redis.Redis.from_url(url)
    out: list[Series] = []
    try:
        for name, with_zadd in (("Redis XADD", False), ("Redis XADD + ZADD", True)):
            s = Series(name)
            started = time.perf_counter()
            for i in range(ops):
                key = f"rawbench:wal:{i % keys}"
                t0 = time.perf_counter()
                client.xadd(key, {"data": records[i % len(records)]})
                if with_zadd:
                    client.zadd("rawbench:active", {key: time.time()})
                s.latencies.append(time.perf_counter() - t0)
            s.wall_s = time.perf_counter() - started
            out.append(s)

        async def concurrent() -> Series:
            aclient = aioredis.Redis.from_url(url, max_connections=in_flight)
            s = Series("Redis XADD", in_flight=in_flight)
            sem = asyncio.Semaphore(in_flight)

            async def one(i: int) -> None:
                async with sem:
                    t0 = time.perf_counter()
                    await aclient.xadd(f"rawbench:wal:{i % keys}",
                                       {"data": records[i % len(records)]})
                    s.latencies.append(time.perf_counter() - t0)

            started = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(ops)))
            s.wall_s = time.perf_counter() - started
            await aclient.aclose()
            return s

        out.append(asyncio.run(concurrent()))
        for key in client.scan_iter("rawbench:*", count=1000):
            client.delete(key)
    finally:
        client.close()
    return out


def actor_phase(directory: ShardDirectory, plans: Sequence[SessionPlan], in_flight: int,
                name: str) -> Series:
    handles = {id(p): directory.for_scope(p.scope) for p in plans}

    async def call(plan: SessionPlan, i: int) -> bool:
        await handles[id(plan)].append_turn.remote(plan.scope, plan.session_id, "user",
                                                   plan.contents[i])
        return True

    return asyncio.run(run_concurrent(plans, in_flight, call, Series(name)))


def http_phase(base: str, plans: Sequence[SessionPlan], in_flight: int, name: str) -> Series:
    async def go() -> Series:
        limits = httpx.Limits(max_connections=in_flight, max_keepalive_connections=in_flight)
        async with httpx.AsyncClient(base_url=base, headers=AUTH, limits=limits,
                                     timeout=120) as client:
            async def call(plan: SessionPlan, i: int) -> bool:
                resp = await client.post(
                    f"/v1/sessions/{plan.session_id}/turns",
                    json={"user_id": plan.scope.user, "role": "user",
                          "content": plan.contents[i]})
                return resp.status_code == 200

            return await run_concurrent(plans, in_flight, call, Series(name))

    return asyncio.run(go())


def inprocess_phase(settings_json: dict[str, Any], plans: Sequence[SessionPlan]) -> Series:
    """The shard class the actor wraps (``actors.session_shard.SessionShard``), called
    directly in this process: the same work as an actor call, without Ray in the way."""
    from actors.session_shard import SessionShard

    shard = SessionShard(99, settings_json, serve_main.NAMESPACE, sweep_every_s=1e9)
    s = Series("SessionShard.append_turn")
    started = time.perf_counter()
    for plan in plans:
        for content in plan.contents:
            t0 = time.perf_counter()
            shard.append_turn(plan.scope, plan.session_id, "user", content)
            s.latencies.append(time.perf_counter() - t0)
    s.wall_s = time.perf_counter() - started
    shard.shutdown()
    return s


def python_footprint(shard: Any) -> dict[str, int]:
    """Runs inside a shard (``__ray_call__``): live Python bytes of its sessions.

    Walks ``shard.sessions.live`` (entries, WorkingMemory, SessionState, turns, strings,
    datetimes); objects shared by all sessions (config, summarizer, enums) count once.
    """
    import gc
    import sys
    import types

    gc.collect()
    seen: set[int] = set()
    skip = (type, types.ModuleType, types.FunctionType, types.MethodType,
            types.BuiltinFunctionType)
    total = 0
    stack: list[Any] = [shard.sessions.live]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, skip):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        if hasattr(obj, "__dict__") and not isinstance(obj, skip):
            stack.append(obj.__dict__)
        for slot in ("__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__"):
            val = getattr(obj, slot, None) if hasattr(type(obj), "model_fields") else None
            if val is not None:
                stack.append(val)
    return {"bytes": total, "sessions": len(shard.sessions.live)}


# -- output -----------------------------------------------------------------------------------
def _f(x: float, nd: int = 2) -> str:
    return "-" if np.isnan(x) else f"{x:,.{nd}f}"


def render_latency(rows: Sequence[Series], ref: Series) -> str:
    lines = [
        "| path | calls | in flight | p50 ms | p95 ms | p99 ms | ops/s | "
        "p50 vs XADD | ops/s vs XADD |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in rows:
        name = s.name + (f" ({s.note})" if s.note else "")
        err = f" [{s.errors} errors]" if s.errors else ""
        lines.append(
            f"| {name}{err} | {s.count:,} | {s.in_flight} | {_f(s.ms(50))} | {_f(s.ms(95))} | "
            f"{_f(s.ms(99))} | {_f(s.per_s, 0)} | {_f(s.ms(50) / ref.ms(50), 1)}x | "
            f"1/{_f(ref.per_s / s.per_s, 1)} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sessions", type=int, default=10_000,
                   help="sessions loaded through the actor handles (default 10,000)")
    p.add_argument("--http-sessions", type=int, default=2_000,
                   help="further sessions loaded through HTTP (default 2,000)")
    p.add_argument("--turns", type=int, default=8, help="turns per session (default 8)")
    p.add_argument("--sessions-per-user", type=float, default=2.5,
                   help="average open sessions per user (default 2.5)")
    p.add_argument("--concurrency", type=int, default=64,
                   help="actor calls (and async XADDs) in flight (default 64)")
    p.add_argument("--http-concurrency", type=int, default=32,
                   help="HTTP requests in flight (default 32)")
    p.add_argument("--serial-calls", type=int, default=400,
                   help="calls timed one at a time per path (unloaded latency; default 400)")
    p.add_argument("--redis-ops", type=int, default=20_000,
                   help="raw Redis operations per baseline series (default 20,000)")
    p.add_argument("--remember-share", type=float, default=0.0,
                   help="share of turns that are explicit 'Remember that ...' intents, which "
                        "the shard writes to long-term memory before acknowledging "
                        "(default 0: the working-memory path only)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 500 sessions, 100 HTTP sessions, 2,000 Redis ops")
    p.add_argument("--json", metavar="PATH", help="also write the raw summary as JSON")
    args = p.parse_args(argv)
    if args.quick:
        args.sessions, args.http_sessions, args.redis_ops, args.serial_calls = 500, 100, 2000, 80
    logging.basicConfig(level=logging.WARNING)

    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="strata-bench-sessions-"))
    redis_server = EmbeddedRedis(tmp / "redis").start()
    settings = Settings(data_dir=tmp, embedder="hash", hash_dim=64, http_port=free_port(),
                        redis_url=redis_server.url)
    settings_json = settings.model_dump(mode="json")
    shards = settings.session_shards
    rclient = redis.Redis.from_url(redis_server.url)
    print(f"ray {ray.__version__}, redis-server {rclient.info('server')['redis_version']}, "
          f"redis-py {redis.__version__}, httpx {httpx.__version__}, "
          f"python {platform.python_version()}, {os.cpu_count()} cpus, "
          f"load avg {os.getloadavg()[0]:.2f}; strata {revision()}", flush=True)
    serve_started = False
    handles: list[Any] = []
    try:
        plans = plan_sessions("a", args.sessions, args.turns, args.sessions_per_user, seed=1,
                              remember_share=args.remember_share)
        http_plans = plan_sessions("h", args.http_sessions, args.turns,
                                   args.sessions_per_user, seed=2,
                                   remember_share=args.remember_share)
        warm_n = max(1, args.serial_calls // args.turns)
        warm_plans = plan_sessions("w", warm_n, args.turns, 1.0, seed=3,
                                   remember_share=args.remember_share)
        http_warm = plan_sessions("x", warm_n, args.turns, 1.0, seed=4,
                                  remember_share=args.remember_share)
        contents = [c for pl in plans for c in pl.contents]
        words = [len(c.split()) for c in contents]
        sizes = [len(c.encode()) for c in contents]
        records = [wal_record(c, pl.session_id, pl.scope.user, i + 1)
                   for pl in plans[:500] for i, c in enumerate(pl.contents)]
        users = len({pl.scope.user for pl in plans})
        remembers = sum(c.startswith("Remember that") for c in contents)
        print(f"{args.sessions:,} sessions x {args.turns} turns over {users:,} users; "
              f"{shards} shards; content {min(words)}-{max(words)} words "
              f"(mean {np.mean(words):.1f}), {np.mean(sizes):.0f} B; WAL record "
              f"{np.mean([len(r) for r in records]):.0f} B; explicit remember intents "
              f"{remembers:,}", flush=True)

        # 4. the floor: raw Redis from this driver
        t0 = time.perf_counter()
        floor_seq, floor_zadd, floor_par = redis_baseline(
            redis_server.url, records, args.redis_ops, args.concurrency, keys=1000)
        print(f"  redis baseline: XADD p50 {floor_seq.ms(50):.3f} ms, "
              f"{floor_seq.per_s:,.0f}/s serial, {floor_par.per_s:,.0f}/s at "
              f"{args.concurrency} in flight [{time.perf_counter() - t0:.0f} s]", flush=True)

        # the whole app, as `strata serve` runs it: store owner, shard pool, Serve app
        t0 = time.perf_counter()
        serve_started = True
        app = start_local_app(settings, object_store_mb=256, ready_timeout_s=120)
        base, directory, handles = app.base, app.shards, app.handles
        pids = ray.get([h.pid.remote() for h in handles])
        print(f"  app ready (store owner, {shards} shards, Serve) "
              f"[{time.perf_counter() - t0:.0f} s]", flush=True)

        t0 = time.perf_counter()
        inproc = inprocess_phase(settings_json, plan_sessions(
            "p", max(1, args.serial_calls // args.turns), args.turns, 1.0, seed=5,
            remember_share=args.remember_share))
        print(f"  in-process shard: p50 {inproc.ms(50):.3f} ms "
              f"[{time.perf_counter() - t0:.0f} s]", flush=True)

        # warm-up + unloaded latency (1 in flight)
        t0 = time.perf_counter()
        actor_serial = actor_phase(directory, warm_plans, 1, "actor append_turn")
        ray.get([h.flush_snapshots.remote() for h in handles])
        time.sleep(1.0)
        mem0, rmem0 = shard_memory(pids), redis_memory(rclient)
        print(f"  actor serial: p50 {actor_serial.ms(50):.2f} ms; shard RSS "
              f"{mem0['VmRSS'] / 1024:.0f} MiB, redis {rmem0['used_memory'] / 2**20:.1f} MiB "
              f"[{time.perf_counter() - t0:.0f} s]", flush=True)

        # 2. + 1. the load through actor handles
        t0 = time.perf_counter()
        actor_load = actor_phase(directory, plans, args.concurrency, "actor append_turn")
        ray.get([h.flush_snapshots.remote() for h in handles])
        time.sleep(1.0)
        mem1, rmem1 = shard_memory(pids), redis_memory(rclient)
        stats = ray.get([h.stats.remote() for h in handles])
        try:
            feet = ray.get([h.__ray_call__.remote(python_footprint) for h in handles])
        except Exception as exc:  # __ray_call__ is a Ray internal; the RSS figures stand alone
            print(f"  (python footprint unavailable: {exc})")
            feet = []
        print(f"  actor load: {actor_load.count:,} turns in {actor_load.wall_s:.1f} s "
              f"({actor_load.per_s:,.0f}/s), p50 {actor_load.ms(50):.1f} ms; in memory "
              f"{[s['sessions_in_memory'] for s in stats]} [{time.perf_counter() - t0:.0f} s]",
              flush=True)

        # 3. HTTP through the Serve app
        t0 = time.perf_counter()
        http_serial = http_phase(base, http_warm, 1, "HTTP POST turns")
        http_load = http_phase(base, http_plans, args.http_concurrency, "HTTP POST turns")
        if args.http_sessions < args.sessions:
            http_load.note = f"{args.http_sessions:,} sessions"
        mem2 = shard_memory(pids)
        stats2 = ray.get([h.stats.remote() for h in handles])
        print(f"  http: serial p50 {http_serial.ms(50):.2f} ms; load {http_load.count:,} turns "
              f"in {http_load.wall_s:.1f} s ({http_load.per_s:,.0f}/s), p50 "
              f"{http_load.ms(50):.1f} ms, {http_load.errors} errors "
              f"[{time.perf_counter() - t0:.0f} s]", flush=True)

        # -- report
        n = args.sessions
        d_rss = mem1["VmRSS"] - mem0["VmRSS"]
        d_anon = mem1.get("RssAnon", 0) - mem0.get("RssAnon", 0)
        d_redis = rmem1["used_memory"] - rmem0["used_memory"]
        print()
        print(f"Memory of {n:,} open sessions x {args.turns} turns "
              f"({shards} shards, pids {pids}); sessions in memory after load: "
              f"{sum(s['sessions_in_memory'] for s in stats):,}")
        print()
        print("| measure | before | after | delta | per session |")
        print("|---|---:|---:|---:|---:|")
        print(f"| shard RSS (sum of {shards}) | {mem0['VmRSS'] / 1024:,.1f} MiB | "
              f"{mem1['VmRSS'] / 1024:,.1f} MiB | {d_rss / 1024:,.1f} MiB | "
              f"{d_rss / n:,.1f} KiB |")
        print(f"| shard RssAnon (sum) | {mem0.get('RssAnon', 0) / 1024:,.1f} MiB | "
              f"{mem1.get('RssAnon', 0) / 1024:,.1f} MiB | {d_anon / 1024:,.1f} MiB | "
              f"{d_anon / n:,.1f} KiB |")
        print(f"| Redis used_memory | {rmem0['used_memory'] / 2**20:,.1f} MiB | "
              f"{rmem1['used_memory'] / 2**20:,.1f} MiB | {d_redis / 2**20:,.1f} MiB | "
              f"{d_redis / n / 1024:,.1f} KiB |")
        print(f"| Redis keys | {rmem0['dbsize']:,} | {rmem1['dbsize']:,} | "
              f"{rmem1['dbsize'] - rmem0['dbsize']:,} | "
              f"{(rmem1['dbsize'] - rmem0['dbsize']) / n:.1f} |")
        if feet:
            live = sum(f["bytes"] for f in feet)
            print(f"| live Python objects of the sessions (deep getsizeof, after gc) | | | "
                  f"{live / 2**20:,.1f} MiB | "
                  f"{live / sum(f['sessions'] for f in feet) / 1024:,.1f} KiB |")
        print(f"\n(after the HTTP phase, +{args.http_sessions:,} sessions: shard RSS "
              f"{mem2['VmRSS'] / 1024:,.1f} MiB, sessions in memory "
              f"{sum(s['sessions_in_memory'] for s in stats2):,})")
        print()
        print(f"Turn appends (content {np.mean(words):.0f} words / {np.mean(sizes):.0f} B; "
              f"WAL record {np.mean([len(r) for r in records]):.0f} B). Ratios against "
              f"serial raw XADD (first row).")
        print()
        floor_zadd.note = "a shard's 2 round trips"
        floor_par.note = "redis.asyncio"
        inproc.note = "the actor's class in-process, no Ray"
        print(render_latency([floor_seq, floor_zadd, floor_par, inproc, actor_serial,
                              actor_load, http_serial, http_load], floor_seq))
        print(f"\nmedian turn: actor {actor_load.ms(50):.1f} ms at {args.concurrency} in flight "
              f"= {actor_load.ms(50) / actor_serial.ms(50):.1f}x its unloaded "
              f"{actor_serial.ms(50):.2f} ms; HTTP {http_load.ms(50):.1f} ms at "
              f"{args.http_concurrency} in flight = "
              f"{http_load.ms(50) / http_serial.ms(50):.1f}x its unloaded "
              f"{http_serial.ms(50):.2f} ms")
        print(f"\nload avg at end {os.getloadavg()[0]:.2f}; total "
              f"{time.perf_counter() - started:.0f} s")
        if args.json:
            series = {f"{s.name}|{s.in_flight}|{s.note}": {
                "count": s.count, "in_flight": s.in_flight, "p50_ms": s.ms(50),
                "p95_ms": s.ms(95), "p99_ms": s.ms(99), "per_s": s.per_s, "errors": s.errors}
                for s in (floor_seq, floor_zadd, floor_par, inproc, actor_serial,
                          actor_load, http_serial, http_load)}
            with open(args.json, "w", encoding="utf-8") as fh:
                json.dump({"sessions": n, "turns": args.turns, "shards": shards,
                           "mem_before": mem0, "mem_after": mem1, "redis_before": rmem0,
                           "redis_after": rmem1, "series": series}, fh, indent=2)
        return 0
    finally:
        _teardown(serve_started, handles)
        rclient.close()
        redis_server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _teardown(serve_started: bool, handles: Sequence[Any]) -> None:
    """Serve down, shards and store owner killed (no shutdown snapshots), Ray down."""
    if not ray.is_initialized():
        return
    try:
        if serve_started:
            from ray import serve

            serve.shutdown()
        for h in handles:
            ray.kill(h, no_restart=True)
        try:
            owner = ray.get_actor(OWNER_NAME, namespace=serve_main.NAMESPACE)
            ray.get(owner.shutdown.remote(), timeout=60)
            ray.kill(owner, no_restart=True)
        except ValueError:
            pass
    finally:
        ray.shutdown()


if __name__ == "__main__":
    raise SystemExit(main())
