"""``strata serve``: local Ray (or the cluster at RAY_ADDRESS), the actors, the Serve app."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path

import ray
from ray import serve

from actors.bootstrap import ensure_backend, stop_backend
from serve_app.app import AppArgs, build_app
from serve_app.local_ray import LocalRay
from strata.runtime import LocalServices, RayEndpoint
from strata.settings import Settings

__all__ = ["serve_forever", "start"]

logger = logging.getLogger(__name__)
NAMESPACE = "strata"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
STOP_DEADLINE_S = 6.0  # a healthy stop takes ~2.5 s (docs/benchmarks.md)


def connect_ray(settings: Settings) -> LocalRay | None:
    """Join the cluster at RAY_ADDRESS, or start a local Ray that other processes can reach.

    Joining a cluster returns None: the cluster is the user's. Otherwise the local head
    (``LocalRay``: its dashboard and job API on ``settings.ray_dashboard_port``) is returned
    for the caller to publish (``endpoint``) and stop.
    """
    address = os.environ.get("RAY_ADDRESS")
    if address:  # `strata serve` has set RAY_AUTH_MODE as the cluster needs it
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=False)
        return None
    local = LocalRay(settings, NAMESPACE)
    endpoint = local.start()
    try:
        ray.init(address=endpoint.gcs_address, namespace=NAMESPACE, log_to_driver=False)
    except Exception:
        local.stop()
        raise
    return local


def start(settings: Settings) -> LocalRay | None:
    """Ray (unless this process has joined one), the backend actors and the Serve app;
    returns the local Ray it started, if it started one."""
    local = None if ray.is_initialized() else connect_ray(settings)
    try:
        # the same start-up the ingress runs when the app is deployed alone; done here first
        # so the shard pool exists before traffic
        ensure_backend(settings, NAMESPACE)
        # one HTTP proxy, on this node: the address printed is the one that answers (every
        # node's proxy would bind the same port; a cluster's load balancer uses serve deploy)
        serve.start(proxy_location="HeadOnly",
                    http_options={"host": settings.http_host, "port": settings.http_port})
        app = build_app(AppArgs(settings=settings.model_dump(mode="json"),
                                namespace=NAMESPACE, on_head=True))
        serve.run(app, name="strata", route_prefix="/")
        if settings.demo_knowledge and not settings.api_keys:
            seed_demo_knowledge()
    except BaseException:
        if local is not None:
            ray.shutdown()
            local.stop()
        raise
    return local


DEMO_DIR = Path(__file__).parent / "demo_knowledge"


def seed_demo_knowledge(tenant: str = "default") -> None:
    """Import the small demo knowledge base (idempotent: unchanged chunks are untouched)."""
    from strata.layers.knowledge import DocumentIn

    docs = [DocumentIn(doc_id=f"demo/{p.stem}", title=p.stem, text=p.read_text())
            for p in sorted(DEMO_DIR.glob("*.md"))]
    report = serve.get_app_handle("strata").import_knowledge.remote(tenant, docs, []).result()
    logger.info("demo knowledge base: %s", report.model_dump(exclude={"validation"}))


def stop(settings: Settings, shutdown_ray: bool = True) -> None:
    """Tear down the Serve app, the shards (snapshotting them) and the store owner.

    Each step is bounded and logged with its duration: waiting on a Ray that stopped
    answering helps nobody (every acknowledged turn is in Redis already; the snapshots only
    shorten the next start).
    """
    steps: list[tuple[str, float]] = []
    started = time.monotonic()

    def done(step: str) -> None:
        steps.append((step, time.monotonic() - started - sum(s for _, s in steps)))

    try:
        try:
            serve.shutdown()  # type: ignore[no-untyped-call]  # untyped in Ray Serve
            done("serve")
        finally:
            stop_backend(settings, NAMESPACE, done)
    finally:
        if shutdown_ray:
            ray.shutdown()
            done("ray")
        logger.info("stopped in %.1fs (%s)", time.monotonic() - started,
                    ", ".join(f"{step} {s:.1f}s" for step, s in steps))


def serve_forever(settings: Settings) -> None:
    """Run Strata until SIGINT/SIGTERM."""
    if not settings.api_keys:
        if settings.http_host not in LOOPBACK:
            raise SystemExit(
                f"STRATA_HTTP_HOST={settings.http_host} needs STRATA_API_KEYS: without keys "
                "Strata accepts the development key 'dev' and listens on 127.0.0.1 only")
        logger.warning("no STRATA_API_KEYS configured: accepting the development key 'dev' "
                       "(tenant 'default', role admin) on %s only", settings.http_host)
    done = threading.Event()
    started = time.monotonic()
    local: LocalRay | None = None
    stopped = True
    with LocalServices(settings) as effective:
        try:
            local = start(effective)
            endpoint = local.endpoint if local is not None else None
            if endpoint is not None:
                endpoint.write(effective.data_dir)
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: done.set())
            jobs = f"; Ray jobs: {endpoint.dashboard_url}" if endpoint else ""
            print(f"Strata is serving on http://{effective.http_host}:{effective.http_port} "
                  f"(started in {time.monotonic() - started:.1f}s{jobs}); Ctrl-C stops it.",
                  flush=True)
            done.wait()
        finally:
            stopping = time.monotonic()
            RayEndpoint.path(effective.data_dir).unlink(missing_ok=True)
            if ray.is_initialized():
                stopped = _stop_within(effective, STOP_DEADLINE_S)
            if local is not None:  # a started Ray is stopped, whatever else happened
                local.stop()
                logger.info("the local Ray's processes stopped at +%.1fs",
                            time.monotonic() - stopping)
    logger.info("embedded services stopped at +%.1fs", time.monotonic() - stopping)
    if not stopped:  # Ray's own atexit would wait on the cluster again
        os._exit(0)


def _stop_within(settings: Settings, deadline_s: float) -> bool:
    """``stop``, given up after ``deadline_s`` (a Ray that stopped answering would hold every
    call a minute). Nothing is lost by giving up: every acknowledged turn and queued job is
    in Redis already."""
    finished = threading.Event()
    failed: list[BaseException] = []

    def run() -> None:
        try:
            stop(settings)
        except BaseException as exc:  # handed to the caller's thread below
            failed.append(exc)
        finally:
            finished.set()

    threading.Thread(target=run, daemon=True).start()
    if finished.wait(deadline_s):
        if failed:
            raise failed[0]
        return True
    logger.warning("Ray did not answer within %.0fs: exiting without the graceful steps",
                   deadline_s)
    return False
