"""The Serve application on local Ray: health, readiness, and readiness failing honestly."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
import ray
from ray import serve

from actors.store_owner import OWNER_NAME
from serve_app import main
from serve_app.app import AppArgs, build_app
from strata.settings import Settings
from strata.stores.redis_server import EmbeddedRedis, free_port


def wait_status(url: str, want: int, timeout_s: float = 60) -> httpx.Response:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            resp = httpx.get(url, timeout=30)
            if resp.status_code == want:
                return resp
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} never answered {want}")
        time.sleep(0.5)


@pytest.mark.usefixtures("ray_session")
def test_readyz_tracks_the_backends(tmp_path: Path) -> None:
    redis_server = EmbeddedRedis(tmp_path / "redis").start()
    port = free_port()
    settings = Settings(data_dir=tmp_path, embedder="hash", hash_dim=64, http_port=port,
                        redis_url=redis_server.url)
    try:
        main.start(settings)
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/healthz", timeout=10).json() == {"status": "ok"}
        ready = wait_status(f"{base}/readyz", 200).json()
        assert ready == {"ready": True,
                         "checks": {"milvus": "ok", "redis": "ok", "embedder": "ok"}}

        redis_server.stop()
        down = wait_status(f"{base}/readyz", 503).json()
        assert down["ready"] is False
        assert down["checks"]["redis"] != "ok" and down["checks"]["milvus"] == "ok"
    finally:
        serve.shutdown()
        ray.kill(ray.get_actor(OWNER_NAME, namespace=main.NAMESPACE), no_restart=True)
        redis_server.stop()


def test_build_app_validates_args() -> None:
    with pytest.raises(ValueError):
        build_app({"embedder_replicas": 0})
    assert AppArgs.model_validate({}).namespace == "strata"
