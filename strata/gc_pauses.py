"""How long Python's cyclic garbage collector stops a process, by generation.

A collection holds the GIL: every thread of the process (a shard's recalls, its writes)
waits for it. A full collection over a model's libraries (~0.5M objects) took ~0.2 s here,
which is why the shards and ingress replicas ``gc.freeze`` after warming up
(``STRATA_GC_FREEZE``). ``watch()`` registers a callback that times every collection;
``pauses()`` reports counts, total and longest milliseconds per generation since then (the
shards add them to ``GET /v1/admin/hot-index``).
"""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

__all__ = ["pauses", "watch"]

_lock = threading.Lock()
_started: dict[int, float] = {}  # thread id -> when its collection began
_by_generation: dict[int, list[float]] = {}  # generation -> [count, total ms, max ms]
_watching = False


def _callback(phase: str, info: dict[str, Any]) -> None:
    now = time.perf_counter()
    thread = threading.get_ident()
    if phase == "start":
        _started[thread] = now
        return
    began = _started.pop(thread, None)
    if began is None:
        return
    ms = (now - began) * 1000
    with _lock:
        entry = _by_generation.setdefault(int(info.get("generation", -1)), [0, 0.0, 0.0])
        entry[0] += 1
        entry[1] += ms
        entry[2] = max(entry[2], ms)


def watch() -> None:
    """Time every collection of this process from now on (once per process)."""
    global _watching
    with _lock:
        if _watching:
            return
        _watching = True
    gc.callbacks.append(_callback)


def pauses() -> dict[str, dict[str, float]]:
    """Per generation since ``watch``: collections, their total and longest ms; and the
    objects frozen (``gc.freeze``), which no collection scans."""
    with _lock:
        out: dict[str, dict[str, float]] = {
            f"gen{generation}": {"count": count, "total_ms": round(total, 1),
                                 "max_ms": round(longest, 1)}
            for generation, (count, total, longest) in sorted(_by_generation.items())}
    out["frozen"] = {"objects": gc.get_freeze_count()}
    return out
