"""Re-embedding the knowledge base with a new model, with no downtime.

Searches go through the alias ``<prefix>knowledge``. The job builds a new physical collection
with the new model's vectors, verifies it (row counts, the first scopes present),
points the alias at it in one step, then drops the old collection. Until the swap every
search is answered by the old collection; after it, by the new one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from pydantic import BaseModel

from strata.errors import VectorStoreError
from strata.models import Collection
from strata.settings import Settings
from strata.stores.embedders import make_embedder
from strata.stores.milvus import MilvusVectorStore

__all__ = ["ReembedReport", "reembed_knowledge", "reembed_with"]

logger = logging.getLogger(__name__)
PROBED_SCOPES = 20


class ReembedReport(BaseModel):
    old: str
    new: str
    rows: int
    dim: int
    model_id: str
    seconds: float


def reembed_knowledge(store: MilvusVectorStore, embed: Callable[[list[str]], list[list[float]]],
                      dim: int, model_id: str, batch: int = 256,
                      on_batch: Callable[[int], None] | None = None) -> ReembedReport:
    """Copy every knowledge row into a new collection with new vectors, then swap the alias."""
    started = time.perf_counter()
    old = store.physical(Collection.KNOWLEDGE)
    version = int(old.rsplit("_v", 1)[1]) + 1 if "_v" in old else 2
    new = f"{store.name(Collection.KNOWLEDGE)}_v{version}"
    store.drop_physical(new)  # a previous attempt that never swapped
    store.create_physical(new, dim)
    copied = store.copy_physical(old, new, embed, model_id, batch, on_batch)
    _verify(store, old, new, copied)
    store.swap_alias(Collection.KNOWLEDGE, new)
    store.drop_physical(old)
    return ReembedReport(old=old, new=new, rows=sum(copied.values()), dim=dim,
                         model_id=model_id, seconds=round(time.perf_counter() - started, 2))


def reembed_with(store: MilvusVectorStore, settings: Settings,
                 on_batch: Callable[[int], None] | None = None) -> ReembedReport:
    """``reembed_knowledge`` with the embedding model ``settings`` name."""
    embedder = make_embedder(settings)
    return reembed_knowledge(store, lambda ts: [v.tolist() for v in embedder.encode(ts)],
                             embedder.dim, embedder.model_id, on_batch=on_batch)


def _verify(store: MilvusVectorStore, old: str, new: str, copied: dict[str, int]) -> None:
    """The new collection holds every row copied and the old one's count; else it is dropped
    and the old collection stays live."""
    count_old, count_new = store.count_physical(old), store.count_physical(new)
    if not count_old == count_new == sum(copied.values()):
        store.drop_physical(new)
        raise VectorStoreError(f"re-embed verification failed: {count_old} vs {count_new}; "
                               "the old collection stays live")
    for scope in list(copied)[:PROBED_SCOPES]:
        if store.count_physical(new, scope) == 0:
            store.drop_physical(new)
            raise VectorStoreError(f"re-embed lost scope {scope}; the old collection stays live")
