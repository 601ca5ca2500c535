"""One local Ray instance for the folder (start-up costs seconds), as Ray's own tests do."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import ray
from local_ray import init_local_ray


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    init_local_ray("test")
    yield
    ray.shutdown()
