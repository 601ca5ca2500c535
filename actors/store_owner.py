"""StoreOwner: the one process that holds a milvus-lite client, and a proxy to reach it.

milvus-lite locks its file to one process, so with a lite URI every other component
talks to the store through this actor. With a Milvus server URI there is no owner:
``vector_store_for`` opens a direct client in the calling process.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.boundary import strata_errors
from strata.errors import VectorStoreError
from strata.layers.decay import DecayPolicy, SweepPlan, plan_sweep
from strata.models import Collection, RecordFilter, Scope, SearchHit, StoredRecord
from strata.runtime import open_milvus
from strata.settings import Settings
from strata.stores.milvus import MilvusVectorStore
from strata.stores.ports import DecayFields, PurgeReport, VectorStore

__all__ = ["OWNER_NAME", "RemoteVectorStore", "StoreOwner", "start_store_owner",
           "vector_store_for"]

logger = logging.getLogger(__name__)
OWNER_NAME = "strata-store-owner"
_CALLABLE = {"ensure_collections", "insert", "upsert", "delete", "delete_scope", "get", "query",
             "count", "search_dense", "search_lexical", "search_hybrid", "flush", "ping",
             "decay_fields", "set_statuses", "scan_scope", "set_payloads", "purge_deleted"}


class StoreOwnerService:
    """Holds the milvus-lite client; flushes in the background when the policy says so."""

    def __init__(self, settings: Settings, dim: int, tick_s: float = 1.0) -> None:
        self._store: MilvusVectorStore = open_milvus(settings, dim)
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, args=(tick_s,), daemon=True)
        self._ticker.start()

    def _tick(self, tick_s: float) -> None:
        while not self._stop.wait(tick_s):
            try:
                self._store.flush_due()
            except Exception:  # the next tick retries; a failed flush loses nothing
                logger.exception("background flush failed")

    def call(self, method: str, *args: Any) -> Any:
        if method not in _CALLABLE:
            raise AttributeError(f"StoreOwner has no method {method!r}")
        return getattr(self._store, method)(*args)

    def plan_decay(self, policy: DecayPolicy, now: float) -> SweepPlan:
        """The decay sweep's one pass over each collection, where the data is: only the
        planned changes travel back, not the million rows scanned."""
        return plan_sweep(self._store, policy, now)

    def stats(self) -> dict[str, float]:
        return dict(self._store.flush_stats)

    def shutdown(self) -> None:
        self._stop.set()
        self._store.flush()
        self._store.close()


StoreOwner = ray.remote(max_restarts=-1, max_task_retries=3, max_concurrency=16,
                        num_cpus=0)(StoreOwnerService)


class RemoteVectorStore:
    """``VectorStore`` whose calls run in the StoreOwner actor."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    def _call(self, method: str, *args: Any) -> Any:
        """One call in the owner; Ray's failures become Strata's errors here."""
        with strata_errors(lambda exc: VectorStoreError(
                f"the vector store owner is unavailable ({exc})")):
            return ray.get(self._handle.call.remote(method, *args))

    def ensure_collections(self, dim: int) -> None:
        self._call("ensure_collections", dim)

    def insert(self, collection: Collection, scope: Scope, records: Sequence[StoredRecord]) -> None:
        self._call("insert", collection, scope, list(records))

    def upsert(self, collection: Collection, scope: Scope, records: Sequence[StoredRecord]) -> None:
        self._call("upsert", collection, scope, list(records))

    def delete(self, collection: Collection, scope: Scope, ids: Sequence[str]) -> int:
        return int(self._call("delete", collection, scope, list(ids)))

    def delete_scope(self, collection: Collection, scope: Scope) -> int:
        return int(self._call("delete_scope", collection, scope))

    def get(self, collection: Collection, scope: Scope, ids: Sequence[str]) -> list[StoredRecord]:
        return list(self._call("get", collection, scope, list(ids)))

    def scan_scope(self, collection: Collection, scope: Scope,
                   limit: int = 16_384) -> list[StoredRecord]:
        return list(self._call("scan_scope", collection, scope, limit))

    def set_payloads(self, collection: Collection,
                     changes: Sequence[tuple[str, str, dict[str, Any]]]) -> int:
        return int(self._call("set_payloads", collection, list(changes)))

    def query(self, collection: Collection, scope: Scope, flt: RecordFilter | None = None,
              limit: int = 100) -> list[StoredRecord]:
        return list(self._call("query", collection, scope, flt, limit))

    def count(self, collection: Collection, scope: Scope) -> int:
        return int(self._call("count", collection, scope))

    def search_dense(self, collection: Collection, scope: Scope, vector: Sequence[float], k: int,
                     flt: RecordFilter | None = None) -> list[SearchHit]:
        return list(self._call("search_dense", collection, scope, list(vector), k, flt))

    def search_lexical(self, collection: Collection, scope: Scope, text: str, k: int,
                       flt: RecordFilter | None = None) -> list[SearchHit]:
        return list(self._call("search_lexical", collection, scope, text, k, flt))

    def search_hybrid(self, collection: Collection, scope: Scope, vector: Sequence[float],
                      text: str, k: int, flt: RecordFilter | None = None) -> list[SearchHit]:
        return list(self._call("search_hybrid", collection, scope, list(vector), text, k, flt))

    def decay_fields(self, collection: Collection,
                     keys: Sequence[tuple[str, str]]) -> list[DecayFields]:
        return list(self._call("decay_fields", collection, list(keys)))

    def set_statuses(self, collection: Collection,
                     changes: Sequence[tuple[str, str, str]]) -> int:
        return int(self._call("set_statuses", collection, list(changes)))

    def flush(self, collection: Collection | None = None) -> None:
        self._call("flush", collection)

    def purge_deleted(self) -> PurgeReport:
        """Compact what was deleted, in the owner (where the milvus-lite files are)."""
        report: PurgeReport = self._call("purge_deleted")
        return report

    def ping(self) -> None:
        self._call("ping")

    def close(self) -> None:
        return None


def start_store_owner(settings: Settings, dim: int, namespace: str | None = None) -> Any:
    """Start (or find) the named StoreOwner for a lite URI; returns its handle.

    It is pinned to the node that starts it: the milvus-lite file is on that node's disk.
    """
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    return StoreOwner.options(  # type: ignore[attr-defined]
        name=OWNER_NAME, namespace=namespace, get_if_exists=True, lifetime="detached",
        scheduling_strategy=here,
    ).remote(settings, dim)


def vector_store_for(settings: Settings, dim: int, namespace: str | None = None) -> VectorStore:
    """The vector store a component should use: the owner's proxy (lite) or a direct client."""
    if settings.milvus_is_lite:
        try:
            return RemoteVectorStore(ray.get_actor(OWNER_NAME, namespace=namespace))
        except ValueError as exc:  # not started, or gone for good
            raise VectorStoreError(f"no vector store owner is running ({exc})") from None
    return open_milvus(settings, dim)
