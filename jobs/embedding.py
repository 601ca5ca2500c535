"""Batch embedding as a Ray Data stage: the model loads once per actor in ``__init__``.

Ray gives an actor ``OMP_NUM_THREADS`` equal to its CPU request, so a 1-CPU actor runs torch
on one thread while a plain process on the same node uses every core. ``pool_shape`` sizes
the pool from the nodes instead: each actor gets its share of a node's cores as torch
threads (set explicitly in the actor), and asks Ray for as many CPUs as are free for it.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import ray

from actors.remote import alive_nodes
from strata.settings import Settings
from strata.stores.embedders import make_embedder, set_torch_threads

__all__ = ["EmbedBatch", "Embedded", "PoolShape", "embed_texts", "pool_shape"]

DEFAULT_BATCH = 256


class PoolShape:
    """CPUs each embedding actor asks Ray for, and the torch threads it runs."""

    def __init__(self, cpus: float, threads: int) -> None:
        self.cpus = cpus
        self.threads = threads

    def __repr__(self) -> str:
        return f"PoolShape(cpus={self.cpus}, threads={self.threads})"


def pool_shape(actors: int, node_cpus: list[float], node_free: float) -> PoolShape:
    """Threads: a node's cores over the actors it will hold. CPUs: that, if a node has it free.

    Ray wants whole CPU counts above one, and an actor pool that asks for more than one node
    has free never starts (a running Strata holds a few hundredths of a CPU per shard on
    each node), so the request shrinks to what the freest node has while the thread count
    stays at the node's share. ``node_free``: the free CPUs of the freest node.
    """
    per_node = math.ceil(actors / max(1, len(node_cpus)))
    threads = max(1, int(max(node_cpus, default=1.0) // per_node))
    free_each = node_free / per_node
    if free_each >= threads:
        cpus = float(threads)
    elif free_each >= 1:
        cpus = float(int(free_each))
    else:
        cpus = max(0.01, math.floor(free_each * 100) / 100)
    return PoolShape(cpus, threads)


class EmbedBatch:
    """Callable class for ``map_batches``: text column in, vector column out."""

    def __init__(self, settings: dict[str, Any], threads: int | None = None) -> None:
        self._embedder = make_embedder(Settings(**settings))
        if threads is not None:  # the pool's share of the node, not the model's default
            set_torch_threads(threads)
        self._node = ray.get_runtime_context().get_node_id()
        self._ready_at = time.time()  # model loaded: the actor's start-up ends here

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        cpu = time.process_time()  # every thread of this process: the cost of the work
        vectors = self._embedder.encode(batch["text"].tolist())
        n = len(vectors)
        return {"id": batch["id"], "vector": vectors, "node": np.full(n, self._node),
                "ready_at": np.full(n, self._ready_at),
                "cpu_s": np.full(n, (time.process_time() - cpu) / max(n, 1))}


class Embedded(dict[str, list[float]]):
    """id → vector, plus the nodes the actors ran on and how long the pool took to start."""

    nodes: set[str]
    startup_s: float
    steady_s: float
    cpu_s: float  # CPU time the actors spent encoding


def _cluster_cpus() -> tuple[list[float], float]:
    """Each live node's CPUs, and the free CPUs of the freest node (an actor fits on one)."""
    nodes = [float(n["Resources"].get("CPU", 0.0)) for n in alive_nodes()]
    # Ray's public API gives the cluster's sum only; the sum of two nodes' 1.99 free CPUs
    # would ask for 2 CPUs that no node has, and the pool would never start
    per_node: dict[str, dict[str, float]] = (
        ray._private.state.available_resources_per_node())  # type: ignore[no-untyped-call]
    freest = max((float(r.get("CPU", 0.0)) for r in per_node.values()), default=0.0)
    return nodes, freest


def embed_texts(ids: list[str], texts: list[str], settings: Settings, actors: int = 1,
                batch_size: int = DEFAULT_BATCH, progress: bool = True,
                actor_cpus: float | None = None, threads: int | None = None) -> Embedded:
    """Embed on an actor pool; returns id → vector and prints progress and a summary.

    ``actor_cpus``/``threads`` default to ``pool_shape`` of the cluster.
    """
    result = Embedded()
    result.nodes, result.startup_s, result.steady_s, result.cpu_s = set(), 0.0, 0.0, 0.0
    if not texts:
        return result
    started = time.time()
    shape = pool_shape(actors, *_cluster_cpus())
    cpus = shape.cpus if actor_cpus is None else actor_cpus
    threads = threads or (shape.threads if actor_cpus is None else max(1, int(actor_cpus)))
    ds = ray.data.from_items([{"id": i, "text": t} for i, t in zip(ids, texts, strict=True)])
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = progress
    ctx.wait_for_min_actors_s = 600  # start the whole pool before work, so all of it is used
    out = ds.map_batches(EmbedBatch, fn_constructor_kwargs={
        "settings": settings.model_dump(mode="json"), "threads": threads},
        batch_size=batch_size, concurrency=(actors, actors), batch_format="numpy",
        num_cpus=cpus)
    ready_at = 0.0
    step = max(len(texts) // 10, batch_size)
    next_report = step
    for batch in out.iter_batches(batch_format="numpy", batch_size=None):
        for key, vector in zip(batch["id"].tolist(), batch["vector"].tolist(), strict=True):
            result[str(key)] = vector
        result.nodes.update(batch["node"].tolist())
        ready_at = max(ready_at, float(batch["ready_at"].max()))
        result.cpu_s += float(batch["cpu_s"].sum())
        if progress and len(result) >= next_report:
            print(f"embedded {len(result)}/{len(texts)} ({time.time() - started:.1f}s)",
                  flush=True)
            next_report += step
    finished = time.time()
    result.startup_s = max(0.0, ready_at - started)
    result.steady_s = finished - max(started, ready_at)
    print(f"embedded {len(texts)} chunks on {actors} actor(s) x {threads} thread(s) "
          f"({cpus} CPU each) over {len(result.nodes)} node(s) in {finished - started:.1f}s: "
          f"pool start-up {result.startup_s:.1f}s, then "
          f"{len(texts) / max(result.steady_s, 1e-9):.1f} chunks/s", flush=True)
    return result
