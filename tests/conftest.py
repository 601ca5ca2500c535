"""Shared fixtures: a real Redis server per test session, temp data dirs; the test tiers' markers
(``redis``, ``ray``) put on every test that uses a fixture starting that service."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from strata.stores.redis import RedisStore
from strata.stores.redis_server import EmbeddedRedis

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


# the fixtures that start a service, and the tier marker a test using one (even through
# another fixture) gets; pyproject.toml registers the markers
SERVICE_FIXTURES = {"redis_server": "redis", "ray_session": "ray"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for fixture in set(getattr(item, "fixturenames", ())) & SERVICE_FIXTURES.keys():
            item.add_marker(SERVICE_FIXTURES[fixture])


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    """A real redis-server process (AOF on) for the whole test session."""
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def redis_store(
    redis_server: EmbeddedRedis, request: pytest.FixtureRequest
) -> Iterator[RedisStore]:
    """A RedisStore on the session's server, under a key prefix of its own. The prefix has
    no glob characters: a parametrized test's name holds ``[...]``, which ``KEYS``/``SCAN``
    read as a character class, so a scan under it would find nothing and a "no secret left
    in Redis" check would pass without looking."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)
    digest = hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:8]
    store = RedisStore(redis_server.url, prefix=f"t:{name}-{digest}:")
    yield store
    store.close()


@pytest.fixture(scope="session")
def minilm():  # type: ignore[no-untyped-def]
    from strata.stores.embedders import MiniLMEmbedder

    return MiniLMEmbedder()


def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir(exist_ok=True)
    return path
