"""What the resend-safe WAL append costs against the MULTI/EXEC it replaced, same run.

``RedisSessionLog.append_turns`` now writes a batch's entries and turn ids with one Lua script
that skips ids the turn-id set already holds (a redis-py resend after a lost reply appended
them twice). This times that call against the previous form — XADD per record and SADD of
the ids in one MULTI/EXEC — on one embedded redis-server (``appendfsync always``, the
default), alternating blocks of ``--block`` appends so the machine's load falls on both
alike; batches of 1 and of ``--batch`` turns, each append to a fresh session.

    .venv/bin/python bench/wal_append_cost.py
    .venv/bin/python bench/wal_append_cost.py --rounds 10 --block 200 --batch 20
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from strata.models import Scope
from strata.stores import keys
from strata.stores.keys import SessionRef
from strata.stores.redis import RedisStore
from strata.stores.redis.connection import dumps
from strata.stores.redis_server import EmbeddedRedis

Append = Callable[[SessionRef, list[dict[str, Any]], list[str]], object]


def multi_exec(store: RedisStore) -> Append:
    """The previous append: the records and their ids in one MULTI/EXEC."""
    conn = store.connection

    def append(ref: SessionRef, records: list[dict[str, Any]], ids: list[str]) -> object:
        pipe = conn.client.pipeline(transaction=True)
        for record in records:
            pipe.xadd(conn.key(keys.wal(ref)), {"data": dumps(record)})
        pipe.sadd(conn.key(keys.turn_ids(ref)), *ids)
        return pipe.execute()
    return append


def records(prefix: str, n: int) -> tuple[list[dict[str, Any]], list[str]]:
    ids = [f"{prefix}-{i}" for i in range(n)]
    return ([{"op": "turn", "at": "2026-12-03T00:00:00+00:00",
              "turn": {"turn_id": t, "role": "user", "content": "I moved to Austin last "
                       "spring and I walk my dog Max every morning before work."}}
             for t in ids], ids)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--block", type=int, default=200, help="appends per block")
    parser.add_argument("--batch", type=int, default=20, help="turns per batched append")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, EmbeddedRedis(Path(tmp) / "r") as server:
        store = RedisStore(server.url, prefix="bench:wal:")
        forms: dict[str, Append] = {"multi/exec": multi_exec(store),
                                    "script": store.sessions.append_turns}
        times: dict[tuple[str, int], list[float]] = {(f, n): [] for f in forms
                                                     for n in (1, args.batch)}
        serial = 0
        for _ in range(args.rounds):
            for n in (1, args.batch):
                for form, append in forms.items():
                    for _ in range(args.block):
                        serial += 1
                        ref = SessionRef(Scope(tenant="t", user=f"u{serial % 97}"), f"s{serial}")
                        batch, ids = records(f"t{serial}", n)
                        started = time.perf_counter()
                        append(ref, batch, ids)
                        times[(form, n)].append((time.perf_counter() - started) * 1000)
        store.close()
    print(f"{args.rounds} rounds x {args.block} appends per form and batch size, "
          f"appendfsync {server.appendfsync}")
    print(f"{'form':<11} {'turns':>5} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'turns/s':>9}")
    for (form, n), values in times.items():
        rate = n * len(values) / (sum(values) / 1000)
        print(f"{form:<11} {n:>5} {statistics.median(values):>8.3f} {pct(values, 0.95):>8.3f} "
              f"{pct(values, 0.99):>8.3f} {rate:>9.0f}")
    for n in (1, args.batch):
        ratio = statistics.median(times[("script", n)]) / statistics.median(
            times[("multi/exec", n)])
        print(f"p50 script / multi-exec, {n} turn(s): {ratio:.2f}")


if __name__ == "__main__":
    main()
