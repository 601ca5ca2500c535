"""Batch embedding as a Ray Data stage: the model loads once per actor in ``__init__``."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import ray

from strata.settings import Settings
from strata.stores.embedders import make_embedder

__all__ = ["EmbedBatch", "embed_texts"]


class EmbedBatch:
    """Callable class for ``map_batches``: text column in, vector column out."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self._embedder = make_embedder(Settings(**settings))

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        vectors = self._embedder.encode([str(t) for t in batch["text"]])
        return {"id": batch["id"], "vector": vectors}


def embed_texts(ids: list[str], texts: list[str], settings: Settings, actors: int = 1,
                batch_size: int = 64, progress: bool = True) -> dict[str, list[float]]:
    """Embed on an actor pool; returns id → vector and prints a one-line summary."""
    if not texts:
        return {}
    started = time.perf_counter()
    ds = ray.data.from_items([{"id": i, "text": t} for i, t in zip(ids, texts, strict=True)])
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = progress
    out = ds.map_batches(EmbedBatch, fn_constructor_kwargs={"settings": settings.model_dump(
        mode="json")}, batch_size=batch_size, concurrency=actors, batch_format="numpy",
        num_cpus=max(0.5, 2 / max(1, actors)) if actors > 1 else 1)
    vectors = {str(row["id"]): [float(x) for x in row["vector"]] for row in out.iter_rows()}
    elapsed = time.perf_counter() - started
    print(f"embedded {len(texts)} chunks on {actors} actor(s) in {elapsed:.1f}s "
          f"({len(texts) / elapsed:.1f}/s)", flush=True)
    return vectors
