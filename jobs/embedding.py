"""Batch embedding as a Ray Data stage: the model loads once per actor in ``__init__``."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import ray

from strata.settings import Settings
from strata.stores.embedders import make_embedder

__all__ = ["EmbedBatch", "Embedded", "embed_texts"]


class EmbedBatch:
    """Callable class for ``map_batches``: text column in, vector column out."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self._embedder = make_embedder(Settings(**settings))

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        vectors = self._embedder.encode([str(t) for t in batch["text"]])
        node = ray.get_runtime_context().get_node_id()
        return {"id": batch["id"], "vector": vectors, "node": np.array([node] * len(vectors))}


class Embedded(dict[str, list[float]]):
    """id → vector, plus the nodes the embedding actors ran on."""

    nodes: set[str]


def embed_texts(ids: list[str], texts: list[str], settings: Settings, actors: int = 1,
                batch_size: int = 64, progress: bool = True,
                actor_cpus: float = 1.0) -> Embedded:
    """Embed on an actor pool; returns id → vector and prints a one-line summary."""
    result = Embedded()
    result.nodes = set()
    if not texts:
        return result
    started = time.perf_counter()
    ds = ray.data.from_items([{"id": i, "text": t} for i, t in zip(ids, texts, strict=True)])
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = progress
    ctx.wait_for_min_actors_s = 600  # start the whole pool before work, so all of it is used
    out = ds.map_batches(EmbedBatch, fn_constructor_kwargs={"settings": settings.model_dump(
        mode="json")}, batch_size=batch_size, concurrency=(actors, actors), batch_format="numpy",
        num_cpus=actor_cpus)
    for row in out.iter_rows():
        result[str(row["id"])] = [float(x) for x in row["vector"]]
        result.nodes.add(str(row["node"]))
    elapsed = time.perf_counter() - started
    print(f"embedded {len(texts)} chunks on {actors} actor(s) over {len(result.nodes)} node(s) "
          f"in {elapsed:.1f}s ({len(texts) / elapsed:.1f}/s)", flush=True)
    return result
