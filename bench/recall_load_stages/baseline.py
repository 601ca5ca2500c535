"""The baseline of the recall load benchmark: the design the seeds warn against.

ONE milvus-lite collection ("bench_single", created in the StoreOwner process, next to
Strata's collections) holds every memory of every kind plus the knowledge chunks in one
vector index, the user being an ordinary VARCHAR column (not a partition key) filtered at
query time. Its schema: pk, user (scope key), kind (fact / episode / knowledge), text (BM25
analyzer as in ``strata/stores/milvus.py``), dense (384-d, COSINE, AUTOINDEX), sparse (BM25
function, SPARSE_INVERTED_INDEX), payload (JSON, same payload as Strata's rows). Same rows,
same vectors, inserted in batches with a flush every 2,000 rows (what Strata's
``FlushPolicy`` does on its side), then flushed.

It is served over HTTP by a second Serve application ("baseline", ``POST /baseline/recall``)
in the same Serve instance: authenticate the same dev key, embed the query through Strata's
own Embedder deployment (same batching), then ONE call into the StoreOwner
(``__ray_call__``, as ``owner_probe``) running one hybrid search: a dense search and a BM25
search, each top 20 with the filter ``user == "<scope>" or kind == "knowledge"``, fused with
RRF (k = 60) in the owner, as ``MilvusVectorStore.search_hybrid`` does; it returns the top
10 (Strata's default ``top_k``) as items plus a context string of their texts.

This module is pickled by value (the Serve replica and the owner unpickle its functions
without importing ``bench``), hence ``_concrete_annotations``.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np
import ray
from fastapi import FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field
from ray import cloudpickle, serve

from actors.store_owner import OWNER_NAME
from bench.recall_load_stages import AUTH
from bench.recall_load_stages.corpus import UserPlan
from bench.recall_load_stages.owner_probe import CountingStore, owner_milvus
from strata.auth import authenticate, scope_for
from strata.layers.records import to_record
from strata.models import MemoryItem, Scope, StoredRecord

__all__ = ["CANDIDATES", "SINGLE", "TOP_K", "BaselineRecall", "load_single",
           "owner_single_search", "single_rows", "wait_baseline"]

SINGLE = "bench_single"
CANDIDATES = 20  # per search, as Strata's recipe (candidates_per_layer)
TOP_K = 10  # Strata's default RecallRequest.top_k


# -- run inside the StoreOwner process (owner.__ray_call__) ------------------------------------
def owner_create_single(owner: Any, name: str, dim: int) -> None:
    """(Re)create the single collection: every kind, the user an ordinary column."""
    from pymilvus import DataType, Function, FunctionType, MilvusClient

    from strata.stores.milvus import ANALYZER, MAX_TEXT

    client = owner_milvus(owner)
    if client.has_collection(name):
        client.drop_collection(name)
    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("pk", DataType.VARCHAR, max_length=1024, is_primary=True)
    schema.add_field("user", DataType.VARCHAR, max_length=512)  # NOT a partition key
    schema.add_field("kind", DataType.VARCHAR, max_length=32)
    schema.add_field("text", DataType.VARCHAR, max_length=MAX_TEXT, enable_analyzer=True,
                     analyzer_params=ANALYZER)
    schema.add_field("dense", DataType.FLOAT_VECTOR, dim=dim)
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_field("payload", DataType.JSON)
    schema.add_function(Function(name="bm25", function_type=FunctionType.BM25,
                                 input_field_names=["text"], output_field_names=["sparse"]))
    index = client.prepare_index_params()
    index.add_index("dense", index_type="AUTOINDEX", metric_type="COSINE")
    index.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    client.create_collection(name, schema=schema, index_params=index)


def owner_insert_single(owner: Any, name: str, rows: list[dict[str, Any]], flush: bool) -> None:
    """Insert rows into the single collection, then flush it if asked."""
    client = owner_milvus(owner)
    client.insert(name, rows)
    if flush:
        client.flush(name)


def owner_single_search(owner: Any, name: str, user: str, vector: list[float], text: str,
                        k: int) -> list[dict[str, Any]]:
    """One hybrid search over the single collection: dense + BM25, filtered, RRF-fused."""
    started = time.perf_counter()
    client = owner_milvus(owner)
    flt = f"user == {json.dumps(user)} or kind == \"knowledge\""
    out = ["pk", "kind", "text", "payload"]
    dense = client.search(name, data=[vector], anns_field="dense", limit=k, filter=flt,
                          output_fields=out, search_params={"metric_type": "COSINE"})[0]
    lexical = client.search(name, data=[text], anns_field="sparse", limit=k, filter=flt,
                            output_fields=out, search_params={"metric_type": "BM25"})[0]
    fused: dict[str, dict[str, Any]] = {}
    for hits in (dense, lexical):
        for rank, hit in enumerate(hits):
            entity = hit["entity"]
            pk = str(hit.get("pk", hit.get("id")))
            entry = fused.setdefault(pk, {"id": pk.split("|", 1)[-1], "kind": entity["kind"],
                                          "text": entity["text"], "score": 0.0})
            entry["score"] += 1.0 / (60 + rank + 1)
    ranked = sorted(fused.values(), key=lambda e: e["score"], reverse=True)[:k]
    if isinstance(owner._store, CountingStore):
        owner._store.add("single_search", time.perf_counter() - started)
    return ranked


# -- loading it ---------------------------------------------------------------------------------
def single_rows(memories: Sequence[tuple[UserPlan, MemoryItem]], mem_vecs: np.ndarray,
                knowledge: Sequence[StoredRecord], shared: Scope, model_id: str,
                seed: int) -> list[dict[str, Any]]:
    """The single collection's rows: the same memories and chunks as Strata's, shuffled
    (memories arrive interleaved over time)."""
    rows: list[dict[str, Any]] = []
    for (user, item), vec in zip(memories, mem_vecs, strict=True):
        record = to_record(item, [], model_id)
        rows.append({"pk": f"{user.scope.key}|{item.id}", "user": user.scope.key,
                     "kind": item.kind.value, "text": item.text, "dense": vec.tolist(),
                     "payload": record.payload})
    for record in knowledge:
        rows.append({"pk": f"{shared.key}|{record.id}", "user": shared.key,
                     "kind": "knowledge", "text": record.text, "dense": record.vector,
                     "payload": record.payload})
    random.Random(seed).shuffle(rows)
    return rows


def load_single(owner: Any, rows: Sequence[dict[str, Any]], dim: int, batch: int) -> None:
    """Create the single collection in the owner and insert ``rows`` in batches, flushing
    every 2,000 rows and at the end."""
    ray.get(owner.__ray_call__.remote(owner_create_single, SINGLE, dim))
    since_flush = 0
    for i in range(0, len(rows), batch):
        chunk = list(rows[i:i + batch])
        since_flush += len(chunk)
        flush = since_flush >= 2000 or i + batch >= len(rows)
        ray.get(owner.__ray_call__.remote(owner_insert_single, SINGLE, chunk, flush))
        if flush:
            since_flush = 0


# -- the baseline's HTTP front: a second Serve application --------------------------------------
baseline_api = FastAPI()


def _concrete_annotations(annotations: dict[str, Any]) -> Any:
    """Replace string annotations by the objects: the replica unpickles this module's
    functions by value, where FastAPI could not resolve the names again."""

    def apply(fn: Any) -> Any:
        fn.__annotations__ = dict(annotations)
        return fn

    return apply


class BaselineBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str
    query: str = Field(min_length=1, max_length=4000)
    top_k: int = Field(default=TOP_K, ge=1, le=100)


@serve.deployment(name="BaselineRecall", ray_actor_options={"num_cpus": 0},
                  max_ongoing_requests=64)
@serve.ingress(baseline_api)
class BaselineRecall:
    """Embed (Strata's Embedder deployment) → one hybrid search in the owner → top k."""

    def __init__(self, namespace: str, collection: str, candidates: int) -> None:
        self._embedder = serve.get_deployment_handle("Embedder", app_name="strata")
        self._owner = ray.get_actor(OWNER_NAME, namespace=namespace)
        self._collection = collection
        self._k = candidates

    @baseline_api.post("/recall")
    @_concrete_annotations({"body": BaselineBody, "request": Request, "return": dict})
    async def recall(self, body: BaselineBody, request: Request) -> dict[str, Any]:
        scope = scope_for(authenticate(request.headers.get("authorization"), {}), body.user_id)
        vector = await self._embedder.embed.remote(body.query)
        hits = await self._owner.__ray_call__.remote(
            owner_single_search, self._collection, scope.key, vector, body.query, self._k)
        items = hits[: body.top_k]
        return {"context": "\n".join(f"- {h['text']}" for h in items), "items": items}


def wait_baseline(base: str, user: str, timeout_s: float = 300) -> None:
    """Until ``POST /baseline/recall`` answers 200."""
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        try:
            resp = httpx.post(f"{base}/baseline/recall", json={"user_id": user,
                                                               "query": "ping"},
                              headers=AUTH, timeout=60)
            if resp.status_code == 200:
                return
            last = f"{resp.status_code} {resp.text[:200]}"
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(1.0)
    raise RuntimeError(f"the baseline app never answered: {last}")


cloudpickle.register_pickle_by_value(sys.modules[__name__])
