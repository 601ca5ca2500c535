"""Helpers of the tests that start the real Serve application (imported by them)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from serve_app import main
from strata.settings import Settings
from strata.stores.redis import QUEUE_LOW, RedisStore
from strata.stores.redis_server import EmbeddedRedis, free_port

KEYS = {"key-acme": {"tenant": "acme", "role": "admin"},
        "key-acme-agent": {"tenant": "acme", "role": "agent"},
        "key-globex": {"tenant": "globex", "role": "admin"}}
ACME = {"Authorization": "Bearer key-acme"}
GLOBEX = {"Authorization": "Bearer key-globex"}


def wait_status(url: str, want: int, timeout_s: float = 90) -> httpx.Response:
    """Poll ``url`` until it answers ``want`` (connection errors count as not yet)."""
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


class Api:
    def __init__(self, base: str, redis: RedisStore) -> None:
        self.base = base
        self.redis = redis
        self.http = httpx.Client(base_url=base, timeout=60)

    def say(self, user: str, session: str, text: str, role: str = "user",
            headers: dict[str, str] = ACME) -> dict[str, Any]:
        resp = self.http.post(f"/v1/sessions/{session}/turns", headers=headers,
                              json={"user_id": user, "role": role, "content": text})
        assert resp.status_code == 200, resp.text
        return resp.json()  # type: ignore[no-any-return]

    def close(self, user: str, session: str, headers: dict[str, str] = ACME) -> None:
        resp = self.http.post(f"/v1/sessions/{session}/close", headers=headers,
                              json={"user_id": user})
        assert resp.status_code == 200, resp.text

    def memories(self, user: str, headers: dict[str, str] = ACME, **params: str
                 ) -> list[dict[str, Any]]:
        resp = self.http.get(f"/v1/users/{user}/memories", headers=headers, params=params)
        assert resp.status_code == 200, resp.text
        return resp.json()["memories"]  # type: ignore[no-any-return]

    def recall(self, user: str, query: str, headers: dict[str, str] = ACME,
               **extra: Any) -> dict[str, Any]:
        resp = self.http.post("/v1/recall", headers=headers,
                              json={"user_id": user, "query": query, **extra})
        assert resp.status_code == 200, resp.text
        return resp.json()  # type: ignore[no-any-return]

    def wait_for(self, check: Callable[[], bool], timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while not check():
            assert time.monotonic() < deadline, "extraction did not finish in time"
            time.sleep(0.3)

    def drained(self) -> bool:
        depth = self.redis.queues.depth(QUEUE_LOW, "extractors")
        return depth.backlog == 0


@contextmanager
def live_app(tmp: Path, **settings: Any) -> Iterator[tuple[str, Settings]]:
    """The real Serve app on a free port with its own Redis under ``tmp``, ready; stopped
    after (Ray stays up for the folder's other tests)."""
    redis_server = EmbeddedRedis(tmp / "redis").start()
    config = Settings(data_dir=tmp, http_port=free_port(), redis_url=redis_server.url,
                      **settings)
    main.start(config)
    url = f"http://127.0.0.1:{config.http_port}"
    try:
        wait_status(f"{url}/readyz", 200, timeout_s=120)
        yield url, config
    finally:
        main.stop(config, shutdown_ray=False)
        redis_server.stop()
