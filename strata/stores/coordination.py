"""What must hold across every process of a cluster, kept in Redis: a lock, shared metrics.

Keys (under the store's prefix)::

    lock:{name}        string   the holder's token, SET NX with a TTL renewed while held
    metrics:replicas   hash     replica id → its metric samples and when they were published

A Serve deployment may run several replicas on several nodes; what one replica keeps in its
own memory (an ``asyncio.Lock``, a Prometheus registry) is seen by that replica only.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import redis

from strata.errors import Conflict, QueueStoreError

__all__ = ["ClusterLock", "HeldLock", "MetricSamples", "MetricsBoard"]

# compare-and-delete / compare-and-extend: only the holder's token releases or renews
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end " \
           "return 0"
_RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then " \
         "return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"


def _client(url: str) -> Any:
    return redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5,
                                retry_on_timeout=True)


class HeldLock:
    """A lock this process holds; ``release`` stops the renewal and frees it."""

    def __init__(self, lock: ClusterLock, key: str, token: str, stop: threading.Event,
                 renewer: threading.Thread) -> None:
        self._lock, self._key, self._token = lock, key, token
        self._stop, self._renewer = stop, renewer

    def release(self) -> None:
        self._stop.set()
        self._renewer.join()
        with suppress(redis.RedisError):  # else the TTL frees it
            self._lock._r.eval(_RELEASE, 1, self._key, self._token)


class ClusterLock:
    """A named lock held in Redis, so at most one holder in the whole cluster.

    The TTL bounds how long a crashed holder blocks the others; a thread renews it every
    third of the TTL while the holder runs, so a long holder never loses it.
    """

    def __init__(self, url: str, prefix: str, ttl_s: float = 60.0) -> None:
        self._r = _client(url)
        self._prefix = prefix
        self._ttl_ms = int(ttl_s * 1000)

    def acquire(self, name: str, wait_s: float = 600.0, poll_s: float = 0.2) -> HeldLock:
        """Block until the lock is ours (``Conflict`` after ``wait_s``); release the result."""
        key, token = f"{self._prefix}lock:{name}", secrets.token_hex(16)
        deadline = time.monotonic() + wait_s
        try:
            while not self._r.set(key, token, nx=True, px=self._ttl_ms):
                if time.monotonic() > deadline:
                    raise Conflict(f"{name} is held by another process; try again later")
                time.sleep(poll_s)
        except redis.RedisError as exc:
            raise QueueStoreError(f"redis lock {name} failed: {exc}") from exc
        stop = threading.Event()
        renewer = threading.Thread(target=self._renew, args=(key, token, stop), daemon=True)
        renewer.start()
        return HeldLock(self, key, token, stop, renewer)

    @contextmanager
    def hold(self, name: str, wait_s: float = 600.0, poll_s: float = 0.2) -> Iterator[None]:
        """``acquire`` … ``release`` around a block."""
        held = self.acquire(name, wait_s, poll_s)
        try:
            yield
        finally:
            held.release()

    def _renew(self, key: str, token: str, stop: threading.Event) -> None:
        while not stop.wait(self._ttl_ms / 3000):
            try:
                self._r.eval(_RENEW, 1, key, token, self._ttl_ms)
            except redis.RedisError:  # retried on the next tick
                continue

    def close(self) -> None:
        self._r.close()


# (metric family name, type, help, [(sample name, labels, value)])
MetricSamples = list[tuple[str, str, str, list[tuple[str, dict[str, str], float]]]]


class MetricsBoard:
    """Each replica publishes its cumulative counters and histograms; a scrape sums them.

    A replica's entry is kept ``keep_s`` after its last publication (a restarted replica
    starts a new entry, so its old counts stay in the sums until then).
    """

    def __init__(self, url: str, prefix: str, keep_s: float = 3600.0) -> None:
        self._r = _client(url)
        self._key = f"{prefix}metrics:replicas"
        self._keep_s = keep_s

    def publish(self, replica: str, samples: MetricSamples) -> None:
        entry = json.dumps({"at": time.time(), "samples": samples})
        try:
            self._r.hset(self._key, replica, entry)
        except redis.RedisError as exc:
            raise QueueStoreError(f"redis metrics publish failed: {exc}") from exc

    def gather(self) -> MetricSamples:
        """Every live replica's samples, summed by sample name and labels."""
        try:
            entries = self._r.hgetall(self._key)
        except redis.RedisError as exc:
            raise QueueStoreError(f"redis metrics read failed: {exc}") from exc
        now, stale = time.time(), []
        families: dict[str, tuple[str, str, dict[tuple[str, str], float]]] = {}
        for replica, raw in entries.items():
            entry = json.loads(raw)
            if now - entry["at"] > self._keep_s:
                stale.append(replica)
                continue
            for name, kind, doc, samples in entry["samples"]:
                _, _, sums = families.setdefault(name, (kind, doc, {}))
                for sample, labels, value in samples:
                    at = (sample, json.dumps(labels, sort_keys=True))
                    sums[at] = sums.get(at, 0.0) + value
        if stale:
            self._r.hdel(self._key, *stale)
        return [(name, kind, doc, [(s, json.loads(labels), v) for (s, labels), v in sums.items()])
                for name, (kind, doc, sums) in families.items()]

    def close(self) -> None:
        self._r.close()
