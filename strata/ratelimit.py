"""Token-bucket rate limits per API key and per tenant: one tenant's burst must not be every
tenant's latency.

A request takes one token from its key's bucket and one from its tenant's — both or neither.
A bucket holds at most ``capacity`` tokens (the burst) and refills at ``rate_per_s``; a new
bucket starts full. A request that finds a bucket without a whole token is refused, and
``Verdict.retry_after_s`` says when that bucket will have one (``retry_after`` rounds it up
to the whole seconds of a ``Retry-After`` header). A refused request takes nothing, so a
client that keeps knocking does not push its own wait further out.

Where the buckets live (``RateBuckets``, one port, two adapters held to one contract):

- ``strata.stores.redis.ratelimit.RedisRateBuckets``: in Redis, shared by every ingress
  replica, taken in one Lua script (atomic) — the limit is the cluster's;
- ``MemoryRateBuckets``: in this process — the test double, and the fallback.

``RateLimiter`` takes from the shared buckets; when Redis fails it uses its own for
``FALLBACK_S`` before trying Redis again, so a Redis outage never becomes 429s or 5xx for
everyone: each replica then enforces the limit by itself (so the cluster allows up to the
limit times the number of replicas). With no limit configured (the default) it does nothing.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from strata.auth import authenticate
from strata.errors import QueueStoreError, RateLimited, Unauthorized
from strata.settings import ApiKey, Settings
from strata.stores import keys

__all__ = ["ALLOWED", "FALLBACK_S", "BucketLimit", "BucketTake", "MemoryRateBuckets",
           "RateBuckets", "RateLimiter", "Refusal", "Verdict", "decide"]

logger = logging.getLogger(__name__)

FALLBACK_S = 5.0  # after a Redis failure, this replica's own buckets for this long
LimitName = Literal["key", "tenant"]


@dataclass(frozen=True)
class BucketLimit:
    """A bucket's refill rate (tokens a second; 0: no limit) and burst (0: one second of the
    rate, at least one token)."""

    rate_per_s: float
    burst: int = 0

    @property
    def on(self) -> bool:
        return self.rate_per_s > 0

    @property
    def capacity(self) -> int:
        return self.burst or max(1, math.ceil(self.rate_per_s))

    @property
    def refill_s(self) -> float:
        """How long an empty bucket takes to fill (a full one is as good as none)."""
        return self.capacity / self.rate_per_s


@dataclass(frozen=True)
class BucketTake:
    """One bucket a request takes a token from: which limit, its stored name, its limit."""

    limit: LimitName
    bucket: str
    rule: BucketLimit


@dataclass(frozen=True)
class Verdict:
    """Whether a request may go on; if not, which limit refused it and for how long."""

    allowed: bool
    retry_after_s: float = 0.0
    limit: LimitName | None = None

    @property
    def retry_after(self) -> int:
        """``Retry-After`` in whole seconds: the wait rounded up (never 0, which invites a
        retry at once)."""
        return max(1, math.ceil(round(self.retry_after_s, 6)))


ALLOWED = Verdict(allowed=True)
Held = tuple[float, float]  # a bucket's tokens and when they were counted


def decide(takes: Sequence[BucketTake], held: Sequence[Held | None], now: float
           ) -> tuple[Verdict, list[Held]]:
    """The token-bucket rule over one request's buckets (``held[i]`` is ``takes[i]``'s state,
    None if it has none): the verdict and every bucket's new state. The Lua script of the
    Redis adapter is this function, line for line."""
    tokens: list[float] = []
    wait, denied = 0.0, None
    for take, state in zip(takes, held, strict=True):
        rule = take.rule
        have = float(rule.capacity) if state is None else min(
            float(rule.capacity), state[0] + max(0.0, now - state[1]) * rule.rate_per_s)
        tokens.append(have)
        if have < 1 and (1 - have) / rule.rate_per_s > wait:
            wait, denied = (1 - have) / rule.rate_per_s, take.limit
    spent = 0.0 if denied else 1.0
    verdict = ALLOWED if denied is None else Verdict(False, wait, denied)
    return verdict, [(have - spent, now) for have in tokens]


class RateBuckets(Protocol):
    """Where the token buckets live."""

    def take(self, takes: Sequence[BucketTake]) -> Verdict:
        """A token from every bucket of ``takes``, or none and the wait (``decide``)."""
        ...


class MemoryRateBuckets:
    """``RateBuckets`` in this process (``clock``: seconds, monotonic by default). Buckets
    that have filled up are dropped now and then: a full bucket is as good as none."""

    SWEEP_EVERY = 1024

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._held: dict[str, tuple[Held, float]] = {}  # bucket -> state, when it is full
        self._lock = threading.Lock()
        self._takes = 0

    def take(self, takes: Sequence[BucketTake]) -> Verdict:
        with self._lock:
            now = self._clock()
            held = [self._held.get(t.bucket, (None, 0.0))[0] for t in takes]
            verdict, states = decide(takes, held, now)
            for take, state in zip(takes, states, strict=True):
                self._held[take.bucket] = (state, now + take.rule.refill_s)
            self._takes += 1
            if self._takes % self.SWEEP_EVERY == 0:
                self._held = {b: v for b, v in self._held.items() if v[1] > now}
            return verdict

    def __len__(self) -> int:
        return len(self._held)


@dataclass(frozen=True)
class Refusal:
    """A request refused by a rate limit: the key's tenant and the limit that refused (the
    metric's labels), and the error to answer with."""

    tenant: str
    limit: LimitName
    error: RateLimited


class RateLimiter:
    """The rate limits of ``settings`` (``rate_limit_*`` and each key's own ``rate_per_s`` /
    ``burst``) over ``shared`` buckets, falling back to its own when those fail."""

    def __init__(self, settings: Settings, shared: RateBuckets | None,
                 local: MemoryRateBuckets | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._keys = settings.api_keys
        self._key_default = BucketLimit(settings.rate_limit_key_per_s,
                                        settings.rate_limit_key_burst)
        self._tenant = BucketLimit(settings.rate_limit_tenant_per_s,
                                   settings.rate_limit_tenant_burst)
        self._shared = shared
        self._local = local if local is not None else MemoryRateBuckets(clock)
        self._clock = clock
        self._shared_down_until = -math.inf
        self.active = self._tenant.on or self._key_default.on or any(
            k.rate_per_s for k in self._keys.values())

    def key_limit(self, entry: ApiKey | None) -> BucketLimit:
        """A key's own limit where it sets one, else the default of every key."""
        if entry is None or (entry.rate_per_s is None and entry.burst is None):
            return self._key_default
        rate = self._key_default.rate_per_s if entry.rate_per_s is None else entry.rate_per_s
        return BucketLimit(rate, self._key_default.burst if entry.burst is None else entry.burst)

    def admit(self, authorization: str | None) -> Refusal | None:
        """None if the request may go on: it is within its limits, or it has no known key
        (the route answers 401; only known keys have buckets). Blocking (Redis)."""
        if not self.active:
            return None
        try:
            principal = authenticate(authorization, self._keys)
        except Unauthorized:
            return None
        presented = (authorization or "")[7:].strip()  # authenticate checked the form
        takes = [take for take in (
            BucketTake("key", keys.rate_bucket("key", _digest(presented)),
                       self.key_limit(self._keys.get(presented))),
            BucketTake("tenant", keys.rate_bucket("tenant", principal.tenant), self._tenant),
        ) if take.rule.on]
        if not takes:
            return None
        verdict = self._take(takes)
        if verdict.allowed:
            return None
        whose = "this API key" if verdict.limit == "key" else f"tenant {principal.tenant!r}"
        return Refusal(principal.tenant, verdict.limit or "key", RateLimited(
            f"{whose} is over its rate limit; retry after {verdict.retry_after} s",
            verdict.retry_after))

    def _take(self, takes: list[BucketTake]) -> Verdict:
        if self._shared is not None and self._clock() >= self._shared_down_until:
            try:
                return self._shared.take(takes)
            except QueueStoreError as exc:
                self._shared_down_until = self._clock() + FALLBACK_S
                logger.warning("rate limits: the shared buckets are unavailable (%s); this "
                               "replica counts by itself for %.0f s", exc.detail, FALLBACK_S)
        return self._local.take(takes)


def _digest(api_key: str) -> str:
    """What a key's bucket is named by: never the key itself."""
    return hashlib.sha256(api_key.encode()).hexdigest()[:24]
