"""One local Ray instance for the folder (start-up costs seconds), as Ray's own tests do."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import ray


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    ray.init(address="local", num_cpus=2, object_store_memory=256 * 1024 * 1024,
             namespace="test",
             include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
