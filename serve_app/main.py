"""``strata serve``: local Ray (or RAY_ADDRESS), the StoreOwner, and the Serve app."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from pathlib import Path

import ray
from ray import serve

from actors.directory import ShardDirectory
from actors.extractor import start_extractors
from actors.store_owner import OWNER_NAME, start_store_owner
from serve_app.app import AppArgs, build_app
from strata.runtime import LocalServices
from strata.settings import Settings
from strata.stores.embedders import make_embedder

__all__ = ["serve_forever", "start"]

logger = logging.getLogger(__name__)
NAMESPACE = "strata"


def _dim(settings: Settings) -> int:
    if settings.embedder == "minilm":
        return 384  # all-MiniLM-L6-v2; avoids loading the model in the driver
    return make_embedder(settings).dim


def start(settings: Settings) -> None:
    """Start Ray, the store owner and the Serve app against already-running backends."""
    if not ray.is_initialized():
        # "local": a new local instance, never some other cluster found on the machine
        address = os.environ.get("RAY_ADDRESS") or "local"
        # a new local instance runs its workers at the driver's priority: Ray's default
        # (nice 15) lets any other process on the machine delay every recall
        extra = {"_system_config": {"worker_niceness": 0}} if address == "local" else {}
        ray.init(address=address, namespace=NAMESPACE, include_dashboard=False,
                 log_to_driver=False, **extra)
    if settings.milvus_is_lite:
        owner = start_store_owner(settings, _dim(settings), namespace=NAMESPACE)
        ray.get(owner.call.remote("ping"))
    # the shard pool is created here (and found by the ingress) so it exists before traffic
    ShardDirectory(settings.model_dump(mode="json"), settings.session_shards, NAMESPACE)
    start_extractors(settings, settings.extractors, NAMESPACE)
    serve.start(http_options={"host": settings.http_host, "port": settings.http_port})
    app = build_app(AppArgs(settings=settings.model_dump(mode="json"), namespace=NAMESPACE))
    serve.run(app, name="strata", route_prefix="/")
    if settings.demo_knowledge and not settings.api_keys:
        seed_demo_knowledge()


DEMO_DIR = Path(__file__).parent / "demo_knowledge"


def seed_demo_knowledge(tenant: str = "default") -> None:
    """Import the small demo knowledge base (idempotent: unchanged chunks are untouched)."""
    from strata.layers.knowledge import DocumentIn

    docs = [DocumentIn(doc_id=f"demo/{p.stem}", title=p.stem, text=p.read_text())
            for p in sorted(DEMO_DIR.glob("*.md"))]
    report = serve.get_app_handle("strata").import_knowledge.remote(tenant, docs, []).result()
    logger.info("demo knowledge base: %s", report.model_dump(exclude={"validation"}))


def stop(settings: Settings, shutdown_ray: bool = True) -> None:
    """Tear down the Serve app, the shards (snapshotting them) and the store owner."""
    try:
        serve.shutdown()
        for i in range(settings.extractors):
            with contextlib.suppress(ValueError):
                ray.kill(ray.get_actor(f"strata-extractor-{i}", namespace=NAMESPACE),
                         no_restart=True)
        ShardDirectory(settings.model_dump(mode="json"), settings.session_shards,
                       NAMESPACE).shutdown()
    finally:
        try:
            owner = ray.get_actor(OWNER_NAME, namespace=NAMESPACE)
            ray.get(owner.shutdown.remote(), timeout=60)
            ray.kill(owner)
        except ValueError:
            pass
        if shutdown_ray:
            ray.shutdown()


def serve_forever(settings: Settings) -> None:
    """Run Strata until SIGINT/SIGTERM."""
    if not settings.api_keys:
        logger.warning("no STRATA_API_KEYS configured: accepting the development key 'dev' "
                       "(tenant 'default', role admin) on %s only", settings.http_host)
        settings = settings.model_copy(update={"http_host": "127.0.0.1"})
    done = threading.Event()
    started = time.monotonic()
    with LocalServices(settings) as effective:
        try:
            start(effective)
            # after ray.init, whose own SIGTERM handler exits at once (a signal during
            # start-up still unwinds through this ``finally``)
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: done.set())
            print(f"Strata is serving on http://{effective.http_host}:{effective.http_port} "
                  f"(started in {time.monotonic() - started:.1f}s); Ctrl-C stops it.",
                  flush=True)
            done.wait()
        finally:
            stop(effective)
