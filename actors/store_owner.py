"""StoreOwner: the one process that holds a milvus-lite client, and a proxy to reach it.

milvus-lite locks its file to one process, so with a lite URI every other component
talks to the store through this actor. With a Milvus server URI there is no owner:
``vector_store_for`` opens a direct client in the calling process.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.boundary import strata_errors
from actors.remote import actor_class, named_actor
from strata.errors import VectorStoreError
from strata.layers.decay import DecayPolicy, SweepPlan, plan_sweep
from strata.models import Collection, MemoryStatus, RecordFilter, Scope, SearchHit, StoredRecord
from strata.runtime import open_milvus
from strata.settings import Settings
from strata.stores import lexical
from strata.stores.milvus import MilvusVectorStore
from strata.stores.ports import DecayFields, PurgeReport, VectorStore
from strata.stores.reembed import ReembedReport, reembed_with

__all__ = ["OWNER_NAME", "RemoteVectorStore", "StoreOwner", "StoreOwnerService",
           "start_store_owner", "vector_store_for"]

logger = logging.getLogger(__name__)
OWNER_NAME = "strata-store-owner"


class StoreOwnerService:
    """Holds the milvus-lite client; flushes in the background when the policy says so.

    One typed method per ``VectorStore`` method (``RemoteVectorStore`` calls them), plus
    what runs where the data is: the decay sweep's plan and re-embedding.
    """

    def __init__(self, settings: Settings, dim: int, tick_s: float = 1.0) -> None:
        self._store: MilvusVectorStore = open_milvus(settings, dim)
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, args=(tick_s,), daemon=True)
        self._ticker.start()
        threading.Thread(target=lexical.warm, daemon=True).start()  # BM25 terms of writes

    def _tick(self, tick_s: float) -> None:
        while not self._stop.wait(tick_s):
            try:
                self._store.flush_due()
            except Exception:  # the next tick retries; a failed flush loses nothing
                logger.exception("background flush failed")

    # -- the VectorStore port, in this process -----------------------------------------
    def ensure_collections(self, dim: int) -> None:
        self._store.ensure_collections(dim)

    def insert(self, collection: Collection, scope: Scope, records: list[StoredRecord]) -> None:
        self._store.insert(collection, scope, records)

    def upsert(self, collection: Collection, scope: Scope, records: list[StoredRecord]) -> None:
        self._store.upsert(collection, scope, records)

    def delete(self, collection: Collection, scope: Scope, ids: list[str]) -> int:
        return self._store.delete(collection, scope, ids)

    def delete_scope(self, collection: Collection, scope: Scope) -> int:
        return self._store.delete_scope(collection, scope)

    def get(self, collection: Collection, scope: Scope, ids: list[str]) -> list[StoredRecord]:
        return self._store.get(collection, scope, ids)

    def scan_scope(self, collection: Collection, scope: Scope, limit: int) -> list[StoredRecord]:
        return self._store.scan_scope(collection, scope, limit)

    def scan_scope_terms(self, collection: Collection, scope: Scope, limit: int
                         ) -> list[tuple[StoredRecord, list[str] | None]]:
        return self._store.scan_scope_terms(collection, scope, limit)

    def set_payloads(self, collection: Collection,
                     changes: list[tuple[str, str, dict[str, Any]]]) -> int:
        return self._store.set_payloads(collection, changes)

    def query(self, collection: Collection, scope: Scope, flt: RecordFilter | None,
              limit: int) -> list[StoredRecord]:
        return self._store.query(collection, scope, flt, limit)

    def count(self, collection: Collection, scope: Scope) -> int:
        return self._store.count(collection, scope)

    def search_dense(self, collection: Collection, scope: Scope, vector: list[float], k: int,
                     flt: RecordFilter | None) -> list[SearchHit]:
        return self._store.search_dense(collection, scope, vector, k, flt)

    def search_lexical(self, collection: Collection, scope: Scope, text: str, k: int,
                       flt: RecordFilter | None) -> list[SearchHit]:
        return self._store.search_lexical(collection, scope, text, k, flt)

    def search_hybrid(self, collection: Collection, scope: Scope, vector: list[float],
                      text: str, k: int, flt: RecordFilter | None) -> list[SearchHit]:
        return self._store.search_hybrid(collection, scope, vector, text, k, flt)

    def decay_fields(self, collection: Collection,
                     keys: list[tuple[str, str]]) -> list[DecayFields]:
        return self._store.decay_fields(collection, keys)

    def set_statuses(self, collection: Collection,
                     changes: list[tuple[str, str, MemoryStatus]]) -> int:
        return self._store.set_statuses(collection, changes)

    def flush(self, collection: Collection | None) -> None:
        self._store.flush(collection)

    def purge_deleted(self) -> PurgeReport:
        return self._store.purge_deleted()

    def ping(self) -> None:
        self._store.ping()

    # -- work that runs where the data is ----------------------------------------------
    def plan_decay(self, policy: DecayPolicy, now: float) -> SweepPlan:
        """The decay sweep's one pass over each collection, where the data is: only the
        planned changes travel back, not the million rows scanned."""
        return plan_sweep(self._store, policy, now)

    def reembed(self, settings: Settings) -> ReembedReport:
        """Re-embed the knowledge base with the model ``settings`` name (``jobs.reembed``)."""
        return reembed_with(self._store, settings, on_batch=lambda n: logger.info(
            "%s chunks re-embedded", n))

    def stats(self) -> dict[str, float]:
        return dict(self._store.flush_stats)

    def pid(self) -> int:
        return os.getpid()

    def shutdown(self) -> None:
        self._stop.set()
        self._store.flush()
        self._store.close()


StoreOwner = actor_class(StoreOwnerService, max_restarts=-1, max_task_retries=3,
                         max_concurrency=16, num_cpus=0)


class RemoteVectorStore:
    """``VectorStore`` whose calls run in the StoreOwner actor."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    def _get(self, ref: Any) -> Any:
        """One call's result; Ray's failures become Strata's errors here."""
        with strata_errors(lambda exc: VectorStoreError(
                f"the vector store owner is unavailable ({exc})")):
            return ray.get(ref)

    def ensure_collections(self, dim: int) -> None:
        self._get(self._handle.ensure_collections.remote(dim))

    def insert(self, collection: Collection, scope: Scope, records: Sequence[StoredRecord]) -> None:
        self._get(self._handle.insert.remote(collection, scope, list(records)))

    def upsert(self, collection: Collection, scope: Scope, records: Sequence[StoredRecord]) -> None:
        self._get(self._handle.upsert.remote(collection, scope, list(records)))

    def delete(self, collection: Collection, scope: Scope, ids: Sequence[str]) -> int:
        return int(self._get(self._handle.delete.remote(collection, scope, list(ids))))

    def delete_scope(self, collection: Collection, scope: Scope) -> int:
        return int(self._get(self._handle.delete_scope.remote(collection, scope)))

    def get(self, collection: Collection, scope: Scope, ids: Sequence[str]) -> list[StoredRecord]:
        return list(self._get(self._handle.get.remote(collection, scope, list(ids))))

    def scan_scope(self, collection: Collection, scope: Scope,
                   limit: int = 16_384) -> list[StoredRecord]:
        return list(self._get(self._handle.scan_scope.remote(collection, scope, limit)))

    def scan_scope_terms(self, collection: Collection, scope: Scope, limit: int = 16_384
                         ) -> list[tuple[StoredRecord, list[str] | None]]:
        """``scan_scope`` with each row's stored BM25 terms (``hot.TermsScanner``)."""
        return list(self._get(self._handle.scan_scope_terms.remote(collection, scope, limit)))

    def set_payloads(self, collection: Collection,
                     changes: Sequence[tuple[str, str, dict[str, Any]]]) -> int:
        return int(self._get(self._handle.set_payloads.remote(collection, list(changes))))

    def query(self, collection: Collection, scope: Scope, flt: RecordFilter | None = None,
              limit: int = 100) -> list[StoredRecord]:
        return list(self._get(self._handle.query.remote(collection, scope, flt, limit)))

    def count(self, collection: Collection, scope: Scope) -> int:
        return int(self._get(self._handle.count.remote(collection, scope)))

    def search_dense(self, collection: Collection, scope: Scope, vector: Sequence[float], k: int,
                     flt: RecordFilter | None = None) -> list[SearchHit]:
        return list(self._get(self._handle.search_dense.remote(
            collection, scope, list(vector), k, flt)))

    def search_lexical(self, collection: Collection, scope: Scope, text: str, k: int,
                       flt: RecordFilter | None = None) -> list[SearchHit]:
        return list(self._get(self._handle.search_lexical.remote(collection, scope, text, k,
                                                                 flt)))

    def search_hybrid(self, collection: Collection, scope: Scope, vector: Sequence[float],
                      text: str, k: int, flt: RecordFilter | None = None) -> list[SearchHit]:
        return list(self._get(self._handle.search_hybrid.remote(
            collection, scope, list(vector), text, k, flt)))

    def decay_fields(self, collection: Collection,
                     keys: Sequence[tuple[str, str]]) -> list[DecayFields]:
        return list(self._get(self._handle.decay_fields.remote(collection, list(keys))))

    def set_statuses(self, collection: Collection,
                     changes: Sequence[tuple[str, str, MemoryStatus]]) -> int:
        return int(self._get(self._handle.set_statuses.remote(collection, list(changes))))

    def flush(self, collection: Collection | None = None) -> None:
        self._get(self._handle.flush.remote(collection))

    def purge_deleted(self) -> PurgeReport:
        """Compact what was deleted, in the owner (where the milvus-lite files are)."""
        report: PurgeReport = self._get(self._handle.purge_deleted.remote())
        return report

    def ping(self) -> None:
        self._get(self._handle.ping.remote())

    def close(self) -> None:
        return None


def start_store_owner(settings: Settings, dim: int, namespace: str | None = None) -> Any:
    """Start (or find) the named StoreOwner for a lite URI; returns its handle.

    It is pinned to the node that starts it: the milvus-lite file is on that node's disk.
    """
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    return StoreOwner.options(
        name=OWNER_NAME, namespace=namespace, get_if_exists=True, lifetime="detached",
        scheduling_strategy=here,
    ).remote(settings, dim)


def vector_store_for(settings: Settings, dim: int, namespace: str | None = None) -> VectorStore:
    """The vector store a component should use: the owner's proxy (lite) or a direct client."""
    if settings.milvus_is_lite:
        try:
            return RemoteVectorStore(named_actor(OWNER_NAME, namespace))
        except ValueError as exc:  # not started, or gone for good
            raise VectorStoreError(f"no vector store owner is running ({exc})") from None
    return open_milvus(settings, dim)
