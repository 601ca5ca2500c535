"""Writing to a running Strata over HTTP: turns (one at a time or in batches), closing
sessions, waiting for the long-term queues to drain.

The batch endpoint, which a server may not have, is looked up in ``/openapi.json`` first, so
a benchmark can say "n/a" instead of failing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from bench.common.http_load import run_http
from bench.common.stats import LatencySeries
from bench.common.workload import UserData

__all__ = ["BATCH_PATH", "IngestResult", "api_paths", "close_sessions", "ingest",
           "queue_backlog", "wait_drained"]

BATCH_PATH = "/v1/sessions/{session_id}/turns/batch"


def api_paths(base: str, headers: dict[str, str]) -> set[str]:
    """The paths the server's OpenAPI document lists (empty if it has none)."""
    try:
        resp = httpx.get(f"{base}/openapi.json", headers=headers, timeout=60)
        resp.raise_for_status()
        return set(resp.json().get("paths", {}))
    except (httpx.HTTPError, ValueError):
        return set()


@dataclass
class IngestResult:
    """Turns written over HTTP: how many, in how many requests, how fast."""

    mode: str  # "batch" or "single"
    level: int
    turns: int
    series: LatencySeries

    @property
    def turns_per_s(self) -> float:
        return self.turns / self.series.wall_s if self.series.wall_s else 0.0

    def summary(self) -> dict[str, Any]:
        return {"mode": self.mode, "in_flight": self.level, "turns": self.turns,
                "turns_per_s": round(self.turns_per_s, 1), "requests": self.series.summary()}


def _single_requests(base: str, users: Sequence[UserData]) -> Iterator[tuple[str, dict[str, Any]]]:
    """One request per turn; users interleaved, so requests in flight are different users'."""
    streams = [[(f"{base}/v1/sessions/{s.session_id}/turns", {"user_id": u.user_id, **t.body()})
                for s in u.sessions for t in s.turns] for u in users]
    longest = max((len(s) for s in streams), default=0)
    for i in range(longest):
        for stream in streams:
            if i < len(stream):
                yield stream[i]


def _batch_requests(base: str, users: Sequence[UserData],
                    batch_size: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """One request per session (split at ``batch_size`` turns)."""
    for user in users:
        for s in user.sessions:
            for i in range(0, len(s.turns), batch_size):
                yield (base + BATCH_PATH.format(session_id=s.session_id),
                       {"user_id": user.user_id,
                        "turns": [t.body() for t in s.turns[i:i + batch_size]]})


def ingest(base: str, headers: dict[str, str], users: Sequence[UserData], level: int,
           batch: bool, batch_size: int = 100, label: str = "ingest",
           time_cap_s: float | None = None) -> IngestResult:
    """Write every turn of ``users`` (batched: a session per request) at ``level`` in flight;
    ``turns`` counts the turns of the requests that succeeded."""
    ok_turns = 0

    def on_ok(resp: httpx.Response) -> None:
        nonlocal ok_turns
        data = resp.json()
        ok_turns += len(data["acks"]) if isinstance(data, dict) and "acks" in data else 1

    requests = (_batch_requests(base, users, batch_size) if batch
                else _single_requests(base, users))
    series = run_http(requests, level, label, headers, on_response=on_ok,
                      time_cap_s=time_cap_s)
    return IngestResult("batch" if batch else "single", level, ok_turns, series)


def close_sessions(base: str, headers: dict[str, str], users: Sequence[UserData],
                   level: int = 8) -> LatencySeries:
    """``POST /v1/sessions/{sid}/close`` for every session of ``users``."""
    requests = [(f"{base}/v1/sessions/{s.session_id}/close", {"user_id": u.user_id})
                for u in users for s in u.sessions]
    return run_http(requests, level, "close", headers)


def queue_backlog(base: str, headers: dict[str, str]) -> int:
    """Unacknowledged long-term queue entries: all tenants' if the key is an admin's."""
    resp = httpx.get(f"{base}/v1/queues", headers=headers, timeout=60)
    resp.raise_for_status()
    total = 0
    for row in resp.json().get("queues", []):
        system = row.get("system") or {}
        total += int(system.get("backlog", row.get("backlog", 0)))
    return total


def wait_drained(base: str, headers: dict[str, str], timeout_s: float,
                 progress_every_s: float = 30.0) -> float:
    """Poll ``GET /v1/queues`` until the backlog reads 0 twice in a row; seconds waited."""
    started = time.monotonic()
    zeros = 0
    last_report = started
    while time.monotonic() - started < timeout_s:
        backlog = queue_backlog(base, headers)
        zeros = zeros + 1 if backlog == 0 else 0
        if zeros >= 2:
            return time.monotonic() - started
        if time.monotonic() - last_report >= progress_every_s:
            last_report = time.monotonic()
            print(f"    queue backlog {backlog:,} after {last_report - started:.0f} s",
                  flush=True)
        time.sleep(1.0)
    raise TimeoutError(f"the long-term queues did not drain in {timeout_s:.0f} s")
