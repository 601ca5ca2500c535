"""Drive requests at a fixed number in flight: over HTTP (async httpx) or in-process
(a thread pool), recording each success's latency and each failure into a ``LatencySeries``.

Both stop issuing new work at ``time_cap_s`` (what was started finishes) and fail fast: after
``fail_fast`` errors with no success at all, the phase ends (a missing endpoint or an
unknown recipe should cost five requests, not hundreds).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from bench.common.stats import LatencySeries

__all__ = ["run_http", "run_threads"]

OnResponse = Callable[[httpx.Response], None]
_END = object()


class _Gate:
    """Shared stop conditions of one phase."""

    def __init__(self, series: LatencySeries, time_cap_s: float | None, fail_fast: int) -> None:
        self.series = series
        self.deadline = time.monotonic() + time_cap_s if time_cap_s else None
        self.fail_fast = fail_fast

    def closed(self) -> bool:
        s = self.series
        if s.stopped:
            return True
        if self.fail_fast and s.errors >= self.fail_fast and not s.latencies:
            s.stopped = f"{s.errors} errors and no success"
        elif self.deadline is not None and time.monotonic() > self.deadline:
            s.stopped = "time cap"
        return bool(s.stopped)


async def _drive(requests: Iterable[tuple[str, dict[str, Any]]], level: int,
                 series: LatencySeries, headers: dict[str, str], gate: _Gate,
                 on_response: OnResponse | None, timeout_s: float) -> None:
    work = iter(requests)
    limits = httpx.Limits(max_connections=level, max_keepalive_connections=level)
    async with httpx.AsyncClient(headers=headers, timeout=timeout_s, limits=limits) as client:
        async def worker() -> None:
            for url, payload in work:
                if gate.closed():
                    return
                started = time.perf_counter()
                try:
                    resp = await client.post(url, json=payload)
                except httpx.HTTPError as exc:
                    series.error(repr(exc))
                    continue
                elapsed = time.perf_counter() - started
                if resp.status_code != 200:
                    series.error(f"{resp.status_code} {resp.text}")
                    continue
                series.latencies.append(elapsed)
                if on_response is not None:
                    on_response(resp)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(level)))
        series.wall_s = time.perf_counter() - started


def run_http(requests: Iterable[tuple[str, dict[str, Any]]], level: int, system: str,
             headers: dict[str, str], *, time_cap_s: float | None = None, fail_fast: int = 5,
             on_response: OnResponse | None = None, timeout_s: float = 180.0,
             series: LatencySeries | None = None) -> LatencySeries:
    """POST each ``(url, json)`` with ``level`` requests in flight; non-200 is an error."""
    series = series or LatencySeries(system, level)
    gate = _Gate(series, time_cap_s, fail_fast)
    asyncio.run(_drive(requests, level, series, headers, gate, on_response, timeout_s))
    return series


def run_threads(call: Callable[[Any], object], items: Sequence[Any], level: int, system: str,
                *, time_cap_s: float | None = None, fail_fast: int = 5) -> LatencySeries:
    """Call ``call(item)`` for each item from ``level`` threads; an exception is an error."""
    series = LatencySeries(system, level)
    gate = _Gate(series, time_cap_s, fail_fast)
    work = iter(items)
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if gate.closed():
                    return
                item = next(work, _END)
            if item is _END:
                return
            started = time.perf_counter()
            try:
                call(item)
            except Exception as exc:  # the peer's failure is a data point, not a crash
                with lock:
                    series.error(repr(exc))
                continue
            elapsed = time.perf_counter() - started
            with lock:
                series.latencies.append(elapsed)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=level, thread_name_prefix=f"{system}-load") as pool:
        for future in [pool.submit(worker) for _ in range(level)]:
            future.result()
    series.wall_s = time.perf_counter() - started
    return series
