"""Wiring the stores from settings, the embedded Redis, and readiness checks (no Ray here)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from strata.errors import StrataError
from strata.settings import Settings
from strata.stores.milvus import FlushPolicy, MilvusVectorStore
from strata.stores.redis_server import EmbeddedRedis

__all__ = ["LocalServices", "RayEndpoint", "check_ready", "open_milvus"]

logger = logging.getLogger(__name__)


def open_milvus(settings: Settings, dim: int) -> MilvusVectorStore:
    """Open the configured Milvus and make sure every layer's collection exists."""
    uri = settings.resolved_milvus_uri
    if settings.milvus_is_lite:
        Path(uri).parent.mkdir(parents=True, exist_ok=True)
    store = MilvusVectorStore(
        uri, token=settings.milvus_token,
        flush_policy=FlushPolicy(settings.flush_unflushed_rows, settings.flush_interval_s))
    store.ensure_collections(dim)
    return store


def check_ready(checks: dict[str, Callable[[], object]]) -> dict[str, str]:
    """Run each named check; the value is "ok" or the reason it failed."""
    status: dict[str, str] = {}
    for name, check in checks.items():
        try:
            check()
            status[name] = "ok"
        except StrataError as exc:
            status[name] = exc.detail
        except Exception as exc:  # a readiness probe reports any failure, it never raises
            status[name] = f"{type(exc).__name__}: {exc}"
    return status


class LocalServices:
    """Starts what the settings leave to Strata: an embedded Redis when no URL is given.

    ``with LocalServices(settings) as effective:`` yields settings whose ``redis_url``
    points at a live Redis; the embedded one is stopped on exit.
    """

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._redis: EmbeddedRedis | None = None

    def __enter__(self) -> Settings:
        if self._settings.redis_url:
            return self._settings
        self._redis = EmbeddedRedis(self._settings.data_dir / "redis",
                                    appendfsync=self._settings.redis_appendfsync).start()
        return self._settings.model_copy(update={"redis_url": self._redis.url})

    def __exit__(self, *exc: object) -> None:
        if self._redis is not None:
            self._redis.stop()


class RayEndpoint(BaseModel):
    """Where the Ray cluster that ``strata serve`` started can be reached.

    Written to ``<data_dir>/ray.json`` while the service runs, so ``strata job`` and the
    batch jobs find the running service's Ray (its GCS for drivers, its dashboard for
    ``ray job submit``) instead of starting or guessing another one.
    """

    gcs_address: str
    dashboard_url: str
    namespace: str
    auth_mode: str = "disabled"  # "token": clients need RAY_AUTH_MODE=token and the token
    pid: int

    @staticmethod
    def path(data_dir: Path) -> Path:
        return data_dir / "ray.json"

    def write(self, data_dir: Path) -> None:
        target = self.path(data_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".json.tmp")
        partial.write_text(self.model_dump_json())
        partial.replace(target)

    @classmethod
    def read(cls, data_dir: Path) -> RayEndpoint | None:
        """The endpoint of a running service, or None (no file, or its process is gone)."""
        try:
            endpoint = cls.model_validate_json(cls.path(data_dir).read_text())
        except (OSError, ValueError):
            return None
        try:
            os.kill(endpoint.pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:  # alive, another user's
            pass
        return endpoint
