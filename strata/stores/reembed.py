"""Re-embedding the knowledge base with a new model, with no downtime.

Searches go through the alias ``<prefix>knowledge``. The job builds a new physical collection
with the new model's vectors, verifies it (row counts, every scope present, a probe search),
points the alias at it in one step, then drops the old collection. Until the swap every
search is answered by the old collection; after it, by the new one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from strata.errors import VectorStoreError
from strata.models import Collection
from strata.stores.lexical import normalize
from strata.stores.milvus import MilvusVectorStore, _lit, _milvus_errors

__all__ = ["ReembedReport", "reembed_knowledge"]

logger = logging.getLogger(__name__)
_FIELDS = ["pk", "scope", "text", "status", "created_at", "updated_at", "confidence",
           "embed_model", "payload"]


class ReembedReport(BaseModel):
    old: str
    new: str
    rows: int
    dim: int
    model_id: str
    seconds: float


def _physical(store: MilvusVectorStore) -> str:
    described: dict[str, Any] = store.client.describe_alias(store.name(Collection.KNOWLEDGE))
    return str(described["collection_name"])


def reembed_knowledge(store: MilvusVectorStore, embed: Callable[[list[str]], list[list[float]]],
                      dim: int, model_id: str, batch: int = 256,
                      on_batch: Callable[[int], None] | None = None) -> ReembedReport:
    """Copy every knowledge row into a new collection with new vectors, then swap the alias."""
    started = time.perf_counter()
    alias = store.name(Collection.KNOWLEDGE)
    with _milvus_errors("re-embed"):
        old = _physical(store)
        version = int(old.rsplit("_v", 1)[1]) + 1 if "_v" in old else 2
        new = f"{alias}_v{version}"
        if store.client.has_collection(new):
            store.client.drop_collection(new)  # a previous attempt that never swapped
        store.create_physical(new, dim)
        iterator = store.client.query_iterator(old, batch_size=batch, filter='pk != ""',
                                               output_fields=_FIELDS)
        copied = 0
        scopes: set[str] = set()
        while True:
            rows = iterator.next()
            if not rows:
                break
            vectors = embed([r["text"] for r in rows])
            store.client.insert(new, [{**{k: r[k] for k in _FIELDS}, "dense": v,
                                       "lexical": normalize(r["text"]), "embed_model": model_id}
                                      for r, v in zip(rows, vectors, strict=True)])
            scopes.update(r["scope"] for r in rows)
            copied += len(rows)
            if on_batch is not None:
                on_batch(copied)
        iterator.close()
        store.client.flush(new)
        _verify(store, old, new, copied, scopes)
        store.client.alter_alias(new, alias)
        store.client.drop_collection(old)
    return ReembedReport(old=old, new=new, rows=copied, dim=dim, model_id=model_id,
                         seconds=round(time.perf_counter() - started, 2))


def _verify(store: MilvusVectorStore, old: str, new: str, copied: int, scopes: set[str]) -> None:
    count_old = store.client.query(old, filter='pk != ""', output_fields=["count(*)"])
    count_new = store.client.query(new, filter='pk != ""', output_fields=["count(*)"])
    if count_old[0]["count(*)"] != count_new[0]["count(*)"] or count_new[0]["count(*)"] != (
            copied):
        store.client.drop_collection(new)
        raise VectorStoreError(f"re-embed verification failed: {count_old} vs {count_new}; "
                               "the old collection stays live")
    for scope in list(scopes)[:20]:
        probe = store.client.query(new, filter=f"scope == {_lit(scope)}", output_fields=["pk"],
                                   limit=1)
        if not probe:
            store.client.drop_collection(new)
            raise VectorStoreError(f"re-embed lost scope {scope}; the old collection stays live")
