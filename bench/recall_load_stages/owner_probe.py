"""Code the recall load benchmark runs inside the StoreOwner process, through Ray's
``__ray_call__`` (the actor runs a function given the actor itself): the owner has no
method that counts its store's calls or waits for milvus-lite's background work, and a
benchmark must not add one to the product. These functions reach the owner's private
``_store``; that is the price of measuring it from outside.

The functions are pickled by value (``register_pickle_by_value``), as they were when they
lived in the benchmark's ``__main__``: the owner's worker needs no ``bench`` package on its
path.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import ray
from ray import cloudpickle

from bench.common import milvus_lite_engine

__all__ = ["CountingStore", "layout_summary", "owner_drain", "owner_install_counter",
           "owner_milvus", "owner_take_counts", "settle"]


class CountingStore:
    """Wraps the owner's MilvusVectorStore: calls and seconds per method (each of the
    owner's typed methods calls its store once, so every remote call is counted once)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()

    @property
    def inner(self) -> Any:
        """The wrapped store."""
        return self._inner

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name.startswith("_") or not callable(attr):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                self.add(name, time.perf_counter() - started)

        return counted

    def add(self, name: str, seconds: float) -> None:
        with self._lock:
            self.counts[name] += 1
            self.seconds[name] += seconds


def owner_install_counter(owner: Any) -> int:
    """Wrap the owner's store in a ``CountingStore`` (once); the owner's pid."""
    if not isinstance(owner._store, CountingStore):
        owner._store = CountingStore(owner._store)
    return os.getpid()


def owner_take_counts(owner: Any) -> dict[str, dict[str, float]]:
    """Calls and seconds per store method since the last take, then zeroed."""
    store = owner._store
    if not isinstance(store, CountingStore):
        return {}
    with store._lock:
        out = {k: {"calls": float(v), "seconds": store.seconds[k]}
               for k, v in store.counts.items()}
        store.counts.clear()
        store.seconds.clear()
    return out


def owner_milvus(owner: Any) -> Any:
    """The owner's raw ``MilvusClient`` (the store's public ``client``), counted or not."""
    store = owner._store
    return (store.inner if isinstance(store, CountingStore) else store).client


def owner_drain(owner: Any) -> dict[str, dict[str, Any]]:
    """Wait for milvus-lite's background work (compaction, index builds); segment counts."""
    return milvus_lite_engine.drain_all()


def settle(handles: Sequence[Any], owner: Any) -> dict[str, dict[str, Any]]:
    """Let queued reinforcement writes finish (shards run one call at a time), flush, drain."""
    time.sleep(1.0)
    for _ in range(2):
        ray.get([h.pid.remote() for h in handles], timeout=900)
    ray.get(owner.flush.remote(None), timeout=900)
    layout: dict[str, dict[str, Any]] = ray.get(owner.__ray_call__.remote(owner_drain),
                                                timeout=1800)
    return layout


def layout_summary(layout: dict[str, dict[str, Any]]) -> str:
    """``owner_drain``'s answer on one line: rows and segments per collection."""
    parts = []
    for name, info in sorted(layout.items()):
        if info.get("rows"):
            parts.append(f"{name} {info['rows']:,} rows/{info['segments']} seg")
        elif "error" in info:
            parts.append(f"{name}: {info['error']}")
    return ", ".join(parts)


for _module in (sys.modules[__name__], milvus_lite_engine):
    cloudpickle.register_pickle_by_value(_module)
