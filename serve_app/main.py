"""``strata serve``: local Ray (or the cluster at RAY_ADDRESS), the actors, the Serve app."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import ray
from ray import serve
from ray.exceptions import RayError

from actors.bootstrap import ensure_backend
from actors.directory import ShardDirectory
from actors.store_owner import OWNER_NAME
from serve_app.app import AppArgs, build_app
from strata.runtime import LocalServices, RayEndpoint
from strata.settings import Settings
from strata.stores.redis_server import free_port

__all__ = ["serve_forever", "start"]

logger = logging.getLogger(__name__)
NAMESPACE = "strata"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def connect_ray(settings: Settings) -> RayEndpoint | None:
    """Join the cluster at RAY_ADDRESS, or start a local Ray that other processes can reach.

    The local one is a head node with its dashboard on ``settings.ray_dashboard_port`` (the
    job API ``ray job submit`` and ``strata job`` use); the endpoint is returned so the
    caller can publish it. Joining a cluster returns None: the cluster is the user's.
    """
    address = os.environ.get("RAY_ADDRESS")
    if address:
        _token_auth_if_available()
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=False)
        return None
    # jobs submitted to this Ray run `python …` with this process's PATH: make it the
    # environment Strata is installed in
    bindir = str(Path(sys.executable).parent)
    os.environ["PATH"] = os.pathsep.join([bindir, os.environ.get("PATH", "")])
    # a new local instance runs its workers at the driver's priority: Ray's default
    # (nice 15) lets any other process on the machine delay every recall
    context = ray.init(address="local", namespace=NAMESPACE, include_dashboard=True,
                       dashboard_host="127.0.0.1",
                       dashboard_port=_free_or_any(settings.ray_dashboard_port),
                       log_to_driver=False, _system_config={"worker_niceness": 0})
    return RayEndpoint(gcs_address=context.address_info["gcs_address"],
                       dashboard_url=f"http://{context.dashboard_url}", namespace=NAMESPACE,
                       auth_mode=os.environ.get("RAY_AUTH_MODE", "disabled"), pid=os.getpid())


def _token_auth_if_available() -> None:
    """Ray 2.60 clusters started with `ray start --head` use token authentication once a
    token exists; a driver must say so (as `ray start --address` does for a node)."""
    has_token = os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH") or (
        Path.home() / ".ray" / "auth_token").exists()
    if "RAY_AUTH_MODE" not in os.environ and has_token:
        os.environ["RAY_AUTH_MODE"] = "token"


def _free_or_any(port: int) -> int:
    """``port`` when it can be bound on 127.0.0.1, else a free one (tests run several)."""
    if port:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
                return port
            except OSError:
                logger.warning("Ray dashboard port %s is taken; using a free port", port)
    return free_port()


def start(settings: Settings) -> RayEndpoint | None:
    """Ray (unless this process has joined one), the backend actors and the Serve app."""
    endpoint = None if ray.is_initialized() else connect_ray(settings)
    # the same start-up the ingress runs when the app is deployed alone; done here first
    # so the shard pool exists before traffic
    ensure_backend(settings, NAMESPACE)
    # one HTTP proxy, on this node: the address printed is the one that answers (every
    # node's proxy would bind the same port; a cluster's load balancer uses serve deploy)
    serve.start(proxy_location="HeadOnly",
                http_options={"host": settings.http_host, "port": settings.http_port})
    app = build_app(AppArgs(settings=settings.model_dump(mode="json"), namespace=NAMESPACE))
    serve.run(app, name="strata", route_prefix="/")
    if settings.demo_knowledge and not settings.api_keys:
        seed_demo_knowledge()
    return endpoint


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

    Each step is bounded and logged with its duration: a signal sent to the whole process
    group reaches Ray's own processes too, and waiting on a dead cluster helps nobody (every
    acknowledged turn is in Redis already; the snapshots only shorten the next start).
    """
    steps: list[tuple[str, float]] = []
    started = time.monotonic()

    def done(step: str) -> None:
        steps.append((step, time.monotonic() - started - sum(s for _, s in steps)))

    try:
        serve.shutdown()
        done("serve")
        for i in range(settings.extractors):
            with contextlib.suppress(ValueError):
                ray.kill(ray.get_actor(f"strata-extractor-{i}", namespace=NAMESPACE),
                         no_restart=True)
        with contextlib.suppress(RuntimeError):  # never started
            ShardDirectory.find(settings.session_shards, NAMESPACE).shutdown(timeout_s=10)
        done("shards")
    finally:
        try:
            owner = ray.get_actor(OWNER_NAME, namespace=NAMESPACE)
            ray.get(owner.shutdown.remote(), timeout=20)  # the last flush
            ray.kill(owner)
        except ValueError:
            pass
        except RayError as exc:
            logger.warning("the store owner did not shut down cleanly: %s", exc)
        done("store owner")
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
    with LocalServices(settings) as effective:
        try:
            endpoint = start(effective)
            if endpoint is not None:
                endpoint.write(effective.data_dir)
            # after ray.init, whose own SIGTERM handler exits at once (a signal during
            # start-up still unwinds through this ``finally``)
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: done.set())
            jobs = f"; Ray jobs: {endpoint.dashboard_url}" if endpoint else ""
            print(f"Strata is serving on http://{effective.http_host}:{effective.http_port} "
                  f"(started in {time.monotonic() - started:.1f}s{jobs}); Ctrl-C stops it.",
                  flush=True)
            done.wait()
        finally:
            RayEndpoint.path(effective.data_dir).unlink(missing_ok=True)
            stop(effective)
