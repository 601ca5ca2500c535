"""The inspector's browser tests start what they need: local Ray, an embedded Redis, Strata
(hash embedder, three API keys in two tenants) and Debian's Chromium driven by Playwright,
headless. No browser is downloaded: ``playwright install`` is never run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import ray
from local_ray import init_local_ray
from playwright.sync_api import Browser, expect, sync_playwright
from ui_harness import Strata, Watched

from serve_app import main
from strata.settings import Settings
from strata.stores.redis_server import EmbeddedRedis, free_port

CHROMIUM = Path(os.environ.get("STRATA_CHROMIUM", "/usr/bin/chromium"))
SCREENSHOTS = Path(os.environ.get(
    "STRATA_UI_SCREENSHOTS", Path(__file__).resolve().parents[2] / "test-artifacts" / "ui"))
# the machine may be busy (a shared 2-core box): wait for the page longer than the default 5 s
expect.set_options(timeout=30_000)
# and for Serve's HTTP proxy to be ready longer than Serve's 5 s: at a load average of 20 its
# worker has been seen to take longer, and the controller then kills it (serve.start fails
# with ActorDiedError); Ray's workers read the variable from the environment they inherit
os.environ.setdefault("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", "60")
KEYS = {
    "acme-admin-key": {"tenant": "acme", "role": "admin"},
    "acme-agent-key": {"tenant": "acme", "role": "agent"},
    "globex-admin-key": {"tenant": "globex", "role": "admin"},
    # two agents of acme (per-agent visibility)
    "acme-planner-key": {"tenant": "acme", "role": "agent", "agent": "planner"},
    "acme-coach-key": {"tenant": "acme", "role": "agent", "agent": "coach"},
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if CHROMIUM.exists():
        return
    reason = (f"no Chromium at {CHROMIUM}: install Debian's (apt-get install -y chromium) "
              "or point STRATA_CHROMIUM at one")
    for item in items:
        if Path(str(item.fspath)).parent == Path(__file__).parent:
            item.add_marker(pytest.mark.skip(reason=reason))


def _wait_ready(url: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=30).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{url} never became ready")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Strata]:
    # module scope: another folder's session-wide Ray (tests/ray) is reused, never re-inited
    own_ray = not ray.is_initialized()
    if own_ray:
        init_local_ray("test-ui")
    tmp = tmp_path_factory.mktemp("ui")
    redis_server = EmbeddedRedis(tmp / "redis").start()
    port = free_port()
    settings = Settings(data_dir=tmp, embedder="hash", hash_dim=64, http_port=port,
                        redis_url=redis_server.url, session_shards=1,
                        api_keys=KEYS)  # type: ignore[arg-type]
    try:
        main.start(settings)
        base = f"http://127.0.0.1:{port}"
        _wait_ready(f"{base}/readyz")
        yield Strata(base, settings)
    finally:
        main.stop(settings, shutdown_ray=False)
        redis_server.stop()
        if own_ray:
            ray.shutdown()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                      args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Browser, server: Strata) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    watched = Watched(pg, [], [])
    # an answered 4xx is logged as "Failed to load resource"; the tests provoke some on purpose
    pg.on("console", lambda m: watched.errors.append(m.text) if m.type == "error"
          and not m.text.startswith("Failed to load resource") else None)
    pg.on("pageerror", lambda exc: watched.errors.append(str(exc)))
    pg.on("request", lambda r: watched.urls.append(r.url))
    try:
        yield watched
    finally:
        context.close()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
