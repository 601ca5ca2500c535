"""The whole Strata app in this process's own local Ray, as ``strata serve`` runs it
(``serve_app.main.start``: store owner, session shards, extractors, the Serve app), for the
benchmarks that also call its actors directly (``bench/sessions.py``,
``bench/recall_load.py``). Unlike the rest of ``bench.common`` this module imports Ray and
the server packages: only those benchmarks import it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import ray

from actors.directory import ShardDirectory
from actors.store_owner import OWNER_NAME
from bench.common.server import wait_ready
from serve_app import main as serve_main
from strata.settings import Settings

__all__ = ["LocalApp", "start_local_app"]


@dataclass
class LocalApp:
    """A started app: its HTTP base URL, the shard directory and the store owner's handle."""

    base: str
    shards: ShardDirectory

    @property
    def handles(self) -> list[Any]:
        """The session shards' actor handles (the directory's own list)."""
        handles: list[Any] = self.shards.handles
        return handles

    @property
    def owner(self) -> Any:
        """The StoreOwner actor (milvus-lite's one process)."""
        return ray.get_actor(OWNER_NAME, namespace=serve_main.NAMESPACE)


def start_local_app(settings: Settings, object_store_mb: int,
                    ready_timeout_s: float = 900) -> LocalApp:
    """``ray.init`` a local Ray (all cores, no dashboard, workers' logs kept out of this
    output), start the app on it and wait until ``/readyz`` answers 200."""
    ray.init(address="local", num_cpus=os.cpu_count(), namespace=serve_main.NAMESPACE,
             object_store_memory=object_store_mb * 1024 * 1024, include_dashboard=False,
             log_to_driver=False)
    serve_main.start(settings)
    base = f"http://127.0.0.1:{settings.http_port}"
    wait_ready(base, ready_timeout_s)
    shards = ShardDirectory.start(settings.model_dump(mode="json"), settings.session_shards,
                                  serve_main.NAMESPACE)
    return LocalApp(base, shards)
