"""One Redis connection under a key prefix, shared by every adapter of the package, and the
small helpers they share (error translation, JSON, decoding)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import redis

from strata.errors import QueueStoreError

__all__ = ["RedisConnection", "decode", "dumps", "redis_errors", "stream_id"]


@contextmanager
def redis_errors(action: str) -> Iterator[None]:
    """Translate redis-py's errors into Strata's ``QueueStoreError``."""
    try:
        yield
    except redis.RedisError as exc:
        raise QueueStoreError(f"redis {action} failed: {exc}") from exc


def dumps(value: Any) -> str:
    # ensure_ascii=False keeps text as text, so a forgetting scan sees what is stored.
    return json.dumps(value, ensure_ascii=False)


def decode(fields: Mapping[bytes, bytes]) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in fields.items()}


def stream_id(entry: Any) -> str:
    return str(entry.decode() if isinstance(entry, bytes) else entry)


class RedisConnection:
    """A redis-py client and the prefix every key is stored under."""

    def __init__(self, url: str, prefix: str = "strata:") -> None:
        self.prefix = prefix
        # Any: redis-py's return types are unions of bytes/str/None decided at run time by
        # decode_responses; the adapters decode explicitly instead.
        self.client: Any = redis.Redis.from_url(
            url, socket_timeout=10, socket_connect_timeout=5, retry_on_timeout=True,
            health_check_interval=30)

    def key(self, name: str) -> str:
        """The stored name of key ``name`` (built by ``strata.stores.keys``)."""
        return f"{self.prefix}{name}"

    def ping(self) -> None:
        with redis_errors("ping"):
            self.client.ping()

    def close(self) -> None:
        self.client.close()

    def keys(self, pattern: str) -> list[str]:
        """The keys matching ``pattern`` (under the prefix), with the prefix."""
        with redis_errors("scan"):
            return [k.decode() for k in self.client.scan_iter(match=self.key(pattern),
                                                              count=500)]

    def dump_values(self) -> Iterator[tuple[str, bytes]]:
        """Every key under the prefix with its raw contents (a forgetting audit scans this)."""
        r = self.client
        with redis_errors("dump"):
            for key in r.scan_iter(match=self.key("*"), count=500):
                kind = r.type(key).decode()
                if kind == "string":
                    yield key.decode(), r.get(key) or b""
                elif kind == "hash":
                    yield key.decode(), dumps(decode(r.hgetall(key))).encode()
                elif kind == "stream":
                    for _, fields in r.xrange(key):
                        yield key.decode(), dumps(decode(fields)).encode()
                elif kind == "list":
                    for item in r.lrange(key, 0, -1):
                        yield key.decode(), item
