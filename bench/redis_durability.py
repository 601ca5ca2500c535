"""Acknowledged turns against a ``kill -9`` of Redis, and what the fsync policy costs, per
``appendfsync`` policy (``always``, the default, and ``everysec``) in one run.

1. **Fault rounds.** A fresh ``EmbeddedRedis`` (own temporary directory, own port) per round
   and policy; ``--writers`` threads append single turns at full speed through
   ``RedisSessionLog.append_turns`` (the call a shard makes for every turn: the WAL entry and
   its turn id in one MULTI/EXEC), each thread to a session of its own, and count a turn
   acknowledged once the call returned. A random 0.2–0.6 s after every writer has 10 turns
   acknowledged, the redis-server is sent SIGKILL by its pid; the writers stop at their
   first error; Redis is restarted on the same directory and every session's WAL is read
   back. *Lost*: acknowledged, not in the WAL (or
   its id not in the turn-id set). *Duplicated*: a turn id in the WAL more than once.
   *In doubt*: in the WAL but never acknowledged (the reply was cut off; allowed).
   Policies alternate within each round, so the machine's load falls on both alike.
2. **Single-turn throughput.** The same writers for ``--throughput-s`` seconds per policy,
   no kill: turns/s and ack latency p50/p95/p99; ratio always / everysec.
3. **Batched ingestion.** ``SessionShardService.append_turns`` (validation, redaction,
   window, rolling summary, WAL) of ``--batch-turns``-turn batches, two shards (the default
   ``STRATA_SESSION_SHARDS``) over one Redis, ``--batch-writers`` threads per shard, each
   batch a new session: turns/s against the >= 1,000 turns/s target, per policy. No Ray,
   no HTTP: the shard and Redis only.

    .venv/bin/python bench/redis_durability.py --quick
    .venv/bin/python bench/redis_durability.py --rounds 20 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from strata.errors import QueueStoreError  # noqa: E402
from strata.layers.summarize import RuleSummarizer  # noqa: E402
from strata.models import Role, Scope  # noqa: E402
from strata.settings import Settings  # noqa: E402
from strata.shard.models import TurnIn  # noqa: E402
from strata.shard.service import SessionShardService  # noqa: E402
from strata.stores.keys import SessionRef  # noqa: E402
from strata.stores.redis import RedisStore  # noqa: E402
from strata.stores.redis_server import AppendFsync, EmbeddedRedis  # noqa: E402

POLICIES: tuple[AppendFsync, ...] = ("always", "everysec")
MIN_ACKED_EACH = 10  # acknowledged turns per writer before the kill timer starts
WORDS = ("the", "we", "went", "to", "park", "and", "I", "like", "jazz", "my", "sister",
         "moved", "Lisbon", "last", "year", "budget", "is", "500", "deadline", "March")


def turn_record(turn_id: str, session_id: str, user: str, n: int) -> dict[str, Any]:
    """A WAL entry shaped as the shard writes it (``ShardSessions._append``)."""
    return {"op": "turn", "at": "2026-12-03T10:00:00+00:00", "turn": {
        "turn_id": turn_id, "session_id": session_id, "user_id": user,
        "role": "user" if n % 2 == 0 else "assistant",
        "content": f"turn {n}: we went to the park and I like jazz", "metadata": {}}}


@dataclass
class Writer:
    """One thread appending single turns to its own session until told to stop or failing."""

    store: RedisStore
    ref: SessionRef
    stop: threading.Event
    acked: list[str] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    error: str | None = None

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            turn_id = f"{self.ref.session_id}:{n}"
            record = turn_record(turn_id, self.ref.session_id, self.ref.scope.user, n)
            started = time.perf_counter()
            try:
                self.store.sessions.append_turns(self.ref, [record], [turn_id])
            except QueueStoreError as exc:
                self.error = str(exc)
                return
            self.latencies_ms.append((time.perf_counter() - started) * 1000)
            self.acked.append(turn_id)
            n += 1


def run_writers(store: RedisStore, tag: str, n: int,
                stop: threading.Event) -> tuple[list[Writer], list[threading.Thread]]:
    writers = [Writer(store, SessionRef(Scope(tenant="bench", user=f"u{w}"), f"{tag}-w{w}"),
                      stop) for w in range(n)]
    threads = [threading.Thread(target=w.run, name=f"writer-{w.ref.session_id}", daemon=True)
               for w in writers]
    for t in threads:
        t.start()
    return writers, threads


def fault_round(policy: AppendFsync, tag: str, n_writers: int, kill_after_s: float,
                tmp: Path) -> dict[str, Any]:
    """Write, SIGKILL Redis mid-stream, restart on the same directory, count."""
    data = tmp / f"{tag}-{policy}"
    server = EmbeddedRedis(data, appendfsync=policy).start()
    store = RedisStore(server.url, prefix="bench:")
    stop = threading.Event()
    writers, threads = run_writers(store, f"{tag}-{policy}", n_writers, stop)
    deadline = time.monotonic() + 60  # a loaded machine: every writer under way first
    while (min(len(w.acked) for w in writers) < MIN_ACKED_EACH
           and time.monotonic() < deadline):
        time.sleep(0.01)
    time.sleep(kill_after_s)
    assert server.pid is not None
    os.kill(server.pid, signal.SIGKILL)  # our own child: a crash, no shutdown save
    server.kill()  # reaps it
    for t in threads:
        t.join(timeout=30)
    stop.set()
    store.close()
    restarted = EmbeddedRedis(data, port=server.port, appendfsync=policy).start()
    again = RedisStore(restarted.url, prefix="bench:")
    lost = duplicated = in_doubt = 0
    try:
        for w in writers:
            stored = Counter(rec["turn"]["turn_id"] for _, rec in again.sessions.read(w.ref))
            in_set = again.sessions.known_turn_ids(w.ref, w.acked)
            acked = set(w.acked)
            lost += sum(1 for t in acked if t not in stored or t not in in_set)
            duplicated += sum(c - 1 for c in stored.values() if c > 1)
            in_doubt += sum(1 for t in stored if t not in acked)
    finally:
        again.close()
        restarted.stop()
        shutil.rmtree(data, ignore_errors=True)
    return {"policy": policy, "acked": sum(len(w.acked) for w in writers), "lost": lost,
            "duplicated": duplicated, "in_doubt": in_doubt, "kill_after_s": kill_after_s,
            "writer_errors": sum(1 for w in writers if w.error)}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def throughput(policy: AppendFsync, n_writers: int, seconds: float, tmp: Path,
               tag: str) -> dict[str, Any]:
    """Single-turn appends at full speed for ``seconds``, no kill."""
    data = tmp / f"tp-{tag}-{policy}"
    with EmbeddedRedis(data, appendfsync=policy) as server:
        store = RedisStore(server.url, prefix="bench:")
        stop = threading.Event()
        started = time.perf_counter()
        writers, threads = run_writers(store, f"tp-{tag}", n_writers, stop)
        time.sleep(seconds)
        stop.set()
        for t in threads:
            t.join(timeout=30)
        elapsed = time.perf_counter() - started
        store.close()
    shutil.rmtree(data, ignore_errors=True)
    lat = [x for w in writers for x in w.latencies_ms]
    return {"policy": policy, "turns": len(lat), "seconds": elapsed,
            "errors": sum(1 for w in writers if w.error), "latencies_ms": lat}


def batched(policy: AppendFsync, per_shard: int, batches: int, batch_turns: int, tmp: Path,
            tag: str) -> dict[str, Any]:
    """``batches`` batches per writer through two shards' ``append_turns`` over one Redis."""
    rng = random.Random(7)
    data = tmp / f"batch-{tag}-{policy}"
    settings = Settings(intent_detector="rules", data_dir=tmp)
    with EmbeddedRedis(data, appendfsync=policy) as server:
        store = RedisStore(server.url, prefix="bench:")
        shards = [SessionShardService(i, settings, store, RuleSummarizer()) for i in (0, 1)]
        payload = [TurnIn(role=Role.USER if n % 2 == 0 else Role.ASSISTANT,
                          content=" ".join(rng.choice(WORDS) for _ in range(25)))
                   for n in range(batch_turns)]
        latencies: list[float] = []
        errors: list[str] = []

        def write(shard: SessionShardService, w: int) -> None:
            for b in range(batches):
                scope = Scope(tenant="bench", user=f"s{shard.shard_id}-u{w}")
                started = time.perf_counter()
                try:
                    shard.append_turns(scope, f"{tag}-{w}-{b}", payload)
                except QueueStoreError as exc:
                    errors.append(str(exc))
                    return
                latencies.append((time.perf_counter() - started) * 1000)

        threads = [threading.Thread(target=write, args=(s, w), daemon=True)
                   for s in shards for w in range(per_shard)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=600)
        elapsed = time.perf_counter() - started
        for s in shards:
            s.sessions.flush_snapshots()
        store.close()
    shutil.rmtree(data, ignore_errors=True)
    return {"policy": policy, "turns": len(latencies) * batch_turns, "seconds": elapsed,
            "errors": len(errors), "latencies_ms": latencies}


def summarise(runs: list[dict[str, Any]]) -> dict[str, float]:
    lat = [x for r in runs for x in r["latencies_ms"]]
    turns = sum(r["turns"] for r in runs)
    seconds = sum(r["seconds"] for r in runs)
    return {"turns": turns, "seconds": round(seconds, 2),
            "turns_per_s": round(turns / seconds, 1) if seconds else 0.0,
            "p50_ms": round(pct(lat, 0.50), 2), "p95_ms": round(pct(lat, 0.95), 2),
            "p99_ms": round(pct(lat, 0.99), 2), "errors": sum(r["errors"] for r in runs)}


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=20, help="fault rounds per policy")
    p.add_argument("--writers", type=int, default=8, help="concurrent single-turn writers")
    p.add_argument("--throughput-s", type=float, default=4.0,
                   help="seconds of single-turn writing per policy and repetition")
    p.add_argument("--reps", type=int, default=2, help="throughput repetitions per policy")
    p.add_argument("--batch-turns", type=int, default=100)
    p.add_argument("--batches", type=int, default=15, help="batches per batch writer")
    p.add_argument("--batch-writers", type=int, default=4, help="batch writers per shard")
    p.add_argument("--quick", action="store_true",
                   help="3 rounds, 1 s of throughput, 4 batches per writer")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    if args.quick:
        args.rounds, args.throughput_s, args.reps, args.batches = 3, 1.0, 1, 4
    rng = random.Random(39)
    tmp = Path(tempfile.mkdtemp(prefix="redis-durability-"))
    report: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}}
    began = time.perf_counter()
    try:
        rounds: list[dict[str, Any]] = []
        for r in range(args.rounds):
            kill_after = rng.uniform(0.2, 0.6)
            order = POLICIES if r % 2 == 0 else POLICIES[::-1]
            for policy in order:
                rounds.append(fault_round(policy, f"r{r}", args.writers, kill_after, tmp))
                last = rounds[-1]
                print(f"round {r + 1:2d} {policy:8s} acked {last['acked']:5d} "
                      f"lost {last['lost']} dup {last['duplicated']} "
                      f"in doubt {last['in_doubt']}", flush=True)
        tp: dict[str, list[dict[str, Any]]] = {p_: [] for p_ in POLICIES}
        bt: dict[str, list[dict[str, Any]]] = {p_: [] for p_ in POLICIES}
        for rep in range(args.reps):
            for policy in (POLICIES if rep % 2 == 0 else POLICIES[::-1]):
                tp[policy].append(throughput(policy, args.writers, args.throughput_s, tmp,
                                             f"{rep}"))
                bt[policy].append(batched(policy, args.batch_writers, args.batches,
                                          args.batch_turns, tmp, f"{rep}"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nfault rounds: {args.rounds} per policy, {args.writers} writers, SIGKILL "
          f"0.2-0.6 s after each has {MIN_ACKED_EACH} acknowledged")
    print(f"{'policy':9s} {'acked':>7s} {'lost':>5s} {'rounds w/ loss':>15s} {'dup':>4s} "
          f"{'in doubt':>9s}")
    faults: dict[str, dict[str, int]] = {}
    for policy in POLICIES:
        mine = [x for x in rounds if x["policy"] == policy]
        faults[policy] = {"rounds": len(mine), "acked": sum(x["acked"] for x in mine),
                          "lost": sum(x["lost"] for x in mine),
                          "rounds_with_loss": sum(1 for x in mine if x["lost"]),
                          "duplicated": sum(x["duplicated"] for x in mine),
                          "in_doubt": sum(x["in_doubt"] for x in mine)}
        f = faults[policy]
        print(f"{policy:9s} {f['acked']:7d} {f['lost']:5d} {f['rounds_with_loss']:15d} "
              f"{f['duplicated']:4d} {f['in_doubt']:9d}")
    report["faults"] = faults
    report["rounds"] = rounds
    for name, runs, unit in (("single-turn appends", tp, "ack"),
                             (f"batched ingestion ({args.batch_turns}-turn batches, 2 shards)",
                              bt, "batch")):
        sums = {policy: summarise(runs[policy]) for policy in POLICIES}
        report[name] = sums
        print(f"\n{name}")
        print(f"{'policy':9s} {'turns':>7s} {'turns/s':>9s} {unit + ' p50':>10s} "
              f"{unit + ' p95':>10s} {unit + ' p99':>10s} {'errors':>6s}")
        for policy, s in sums.items():
            print(f"{policy:9s} {s['turns']:7d} {s['turns_per_s']:9.1f} {s['p50_ms']:10.2f} "
                  f"{s['p95_ms']:10.2f} {s['p99_ms']:10.2f} {s['errors']:6d}")
        ratio = (sums["always"]["turns_per_s"] / sums["everysec"]["turns_per_s"]
                 if sums["everysec"]["turns_per_s"] else float("nan"))
        print(f"throughput always / everysec: {ratio:.2f}; p50 {unit} latency always / "
              f"everysec: {sums['always']['p50_ms'] / sums['everysec']['p50_ms']:.2f}")
    print(f"\nwhole run {time.perf_counter() - began:.0f} s; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; fsync latency p50 of this "
          f"disk: {statistics.median(fsync_probe(tmp.parent)):.2f} ms")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))


def fsync_probe(directory: Path, n: int = 50) -> list[float]:
    """How long one small append + fsync takes on the disk the bench wrote to (ms)."""
    fd, path = tempfile.mkstemp(dir=directory, prefix="fsync-probe-")
    out = []
    try:
        for _ in range(n):
            os.write(fd, b"x" * 200)
            started = time.perf_counter()
            os.fsync(fd)
            out.append((time.perf_counter() - started) * 1000)
    finally:
        os.close(fd)
        os.unlink(path)
    return out


if __name__ == "__main__":
    main()
