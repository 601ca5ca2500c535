"""The rate limits (``strata.ratelimit``): the token-bucket rule on a clock the test moves,
the contract of both bucket stores (Redis and this process's), the limiter's keys, tenants,
overrides and Redis fallback, and the ingress guard without Ray."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from serve_app import metrics
from serve_app.ratelimit import RateLimitGuard
from strata.errors import QueueStoreError
from strata.ratelimit import (
    FALLBACK_S,
    BucketLimit,
    BucketTake,
    MemoryRateBuckets,
    RateLimiter,
    Verdict,
)
from strata.settings import Settings
from strata.stores.redis.ratelimit import RedisRateBuckets
from strata.stores.redis_server import EmbeddedRedis

Buckets = MemoryRateBuckets | RedisRateBuckets


class FakeClock:
    """Seconds that move only when a test says so."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def key(rate: float, burst: int = 0, name: str = "rate:key:k1") -> BucketTake:
    return BucketTake("key", name, BucketLimit(rate, burst))


def tenant(rate: float, burst: int = 0, name: str = "rate:tenant:acme") -> BucketTake:
    return BucketTake("tenant", name, BucketLimit(rate, burst))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=[pytest.param("redis", marks=pytest.mark.redis), "memory"])
def buckets(request: pytest.FixtureRequest, clock: FakeClock) -> Iterator[Buckets]:
    """The buckets in the session's real Redis, then in this process — on one fake clock."""
    if request.param == "memory":
        yield MemoryRateBuckets(clock)
        return
    server: EmbeddedRedis = request.getfixturevalue("redis_server")
    real = RedisRateBuckets(server.url, prefix=f"t:{request.node.originalname}:", clock=clock)
    yield real
    real.close()


def takes(store: Buckets, n: int, *plan: BucketTake) -> list[bool]:
    return [store.take(plan).allowed for _ in range(n)]


# -- the rule, on both stores -------------------------------------------------------------------
def test_a_new_bucket_allows_its_burst_then_refuses_until_a_token_refills(
        buckets: Buckets, clock: FakeClock) -> None:
    plan = key(rate=0.5, burst=2)
    assert takes(buckets, 2, plan) == [True, True]
    refused = buckets.take([plan])
    assert not refused.allowed and refused.limit == "key"
    assert refused.retry_after_s == pytest.approx(2.0) and refused.retry_after == 2
    clock.now += 1.0  # half a token: still refused, a second to go
    half = buckets.take([plan])
    assert not half.allowed and half.retry_after_s == pytest.approx(1.0)
    assert half.retry_after == 1
    clock.now += 1.0
    assert takes(buckets, 2, plan) == [True, False]


def test_refill_stops_at_the_burst(buckets: Buckets, clock: FakeClock) -> None:
    plan = key(rate=10, burst=3)
    assert takes(buckets, 4, plan) == [True, True, True, False]
    clock.now += 3600
    assert takes(buckets, 4, plan) == [True, True, True, False]


def test_a_refused_request_takes_nothing(buckets: Buckets, clock: FakeClock) -> None:
    plan = key(rate=1, burst=1)
    assert buckets.take([plan]).allowed
    for _ in range(5):  # knocking does not push the wait out
        assert buckets.take([plan]).retry_after_s == pytest.approx(1.0)
    clock.now += 1.0
    assert buckets.take([plan]).allowed


def test_both_buckets_or_neither(buckets: Buckets, clock: FakeClock) -> None:
    own, shared = key(rate=1, burst=5), tenant(rate=1, burst=1)
    assert buckets.take([own, shared]).allowed
    refused = buckets.take([own, shared])
    assert not refused.allowed and refused.limit == "tenant"
    # the tenant refused: the key's bucket kept its 4 tokens
    other_tenant = tenant(rate=1, burst=1, name="rate:tenant:globex")
    assert takes(buckets, 5, own, other_tenant) == [True, False, False, False, False]
    assert takes(buckets, 4, own) == [True, True, True, False]


def test_the_longest_wait_names_the_limit(buckets: Buckets) -> None:
    slow, fast = tenant(rate=0.1, burst=1), key(rate=1, burst=1)
    assert buckets.take([fast, slow]).allowed
    refused = buckets.take([fast, slow])
    assert refused.limit == "tenant" and refused.retry_after == 10


def test_buckets_are_separate(buckets: Buckets) -> None:
    assert takes(buckets, 2, key(rate=1, burst=1)) == [True, False]
    assert takes(buckets, 2, key(rate=1, burst=1, name="rate:key:k2")) == [True, False]


# -- Redis itself ---------------------------------------------------------------------------
def test_redis_counts_on_its_own_clock_and_expires_a_full_bucket(
        redis_server: EmbeddedRedis) -> None:
    import time

    store = RedisRateBuckets(redis_server.url, prefix="t:own-clock:")  # the server's TIME
    plan = key(rate=20, burst=1)
    assert store.take([plan]).allowed
    refused = store.take([plan])
    assert not refused.allowed and 0 < refused.retry_after_s <= 0.05
    time.sleep(0.06)
    assert store.take([plan]).allowed
    ttl_ms = store._r.pttl("t:own-clock:rate:key:k1")
    assert 0 < ttl_ms <= 1000 + 50  # full again after 1/20 s: gone a second later
    store.close()


def test_a_redis_that_is_down_is_a_queue_store_error() -> None:
    from strata.stores.redis_server import free_port

    store = RedisRateBuckets(f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(QueueStoreError, match="rate limit"):
        store.take([key(rate=1)])


# -- the rule's small parts -----------------------------------------------------------------
@pytest.mark.parametrize(("wait", "header"), [(0.001, 1), (0.5, 1), (1.0, 1), (1.2, 2),
                                              (4.9999999999, 5), (5.0, 5), (5.01, 6)])
def test_retry_after_is_the_wait_rounded_up_to_whole_seconds(wait: float, header: int) -> None:
    assert Verdict(False, wait, "key").retry_after == header


def test_a_burst_of_zero_is_one_second_of_the_rate() -> None:
    assert BucketLimit(2.5).capacity == 3
    assert BucketLimit(0.2).capacity == 1
    assert BucketLimit(2.5, burst=10).capacity == 10
    assert not BucketLimit(0).on


def test_the_memory_buckets_drop_buckets_that_are_full_again(clock: FakeClock) -> None:
    store = MemoryRateBuckets(clock)
    for i in range(MemoryRateBuckets.SWEEP_EVERY - 1):
        store.take([key(rate=1, burst=1, name=f"k{i}")])
    assert len(store) == MemoryRateBuckets.SWEEP_EVERY - 1
    clock.now += 1.5
    store.take([key(rate=1, burst=1, name="last")])
    assert len(store) == 1


# -- the limiter: keys, tenants, overrides, fallback ----------------------------------------
KEYS: dict[str, Any] = {
    "k-acme-1": {"tenant": "acme"},
    "k-acme-2": {"tenant": "acme"},
    "k-globex": {"tenant": "globex"},
    "k-vip": {"tenant": "globex", "rate_per_s": 0},  # no key limit of its own
    "k-small": {"tenant": "initech", "rate_per_s": 1, "burst": 1},
}


def bearer(api_key: str) -> str:
    return f"Bearer {api_key}"


def limiter(clock: FakeClock, shared: Any = None, **limits: float) -> RateLimiter:
    return RateLimiter(Settings(api_keys=KEYS, **limits), shared, clock=clock)


def test_no_limit_is_the_default_and_nothing_is_asked(clock: FakeClock) -> None:
    assert Settings().rate_limit_key_per_s == 0 and Settings().rate_limit_tenant_per_s == 0
    quiet = RateLimiter(Settings(), Unreachable(), clock=clock)
    assert not quiet.active
    assert all(quiet.admit(bearer("dev")) is None for _ in range(1000))


def test_a_tenant_over_its_limit_is_refused_while_another_is_served(clock: FakeClock) -> None:
    limits = limiter(clock, rate_limit_tenant_per_s=1, rate_limit_tenant_burst=2)
    assert limits.admit(bearer("k-acme-1")) is None
    assert limits.admit(bearer("k-acme-2")) is None  # the tenant's bucket is shared
    refusal = limits.admit(bearer("k-acme-1"))
    assert refusal is not None and refusal.tenant == "acme" and refusal.limit == "tenant"
    assert refusal.error.status_code == 429 and refusal.error.code == "rate_limited"
    assert refusal.error.retry_after_s == 1 and "tenant 'acme'" in refusal.error.detail
    assert limits.admit(bearer("k-globex")) is None
    assert limits.admit(bearer("unknown")) is None  # the route answers 401
    assert limits.admit(None) is None


def test_a_key_limit_is_per_key_and_a_key_may_set_its_own(clock: FakeClock) -> None:
    limits = limiter(clock, rate_limit_key_per_s=2, rate_limit_key_burst=3)
    assert [limits.admit(bearer("k-acme-1")) is None for _ in range(4)] == [True] * 3 + [False]
    assert limits.admit(bearer("k-acme-2")) is None  # another key of the same tenant
    assert all(limits.admit(bearer("k-vip")) is None for _ in range(50))  # rate_per_s=0
    assert limits.admit(bearer("k-small")) is None
    refusal = limits.admit(bearer("k-small"))
    assert refusal is not None and refusal.limit == "key"
    assert "this API key" in refusal.error.detail and "k-small" not in refusal.error.detail


def test_a_key_override_alone_turns_the_limiter_on(clock: FakeClock) -> None:
    assert limiter(clock).active  # k-small sets rate_per_s
    assert not RateLimiter(Settings(api_keys={"k": {"tenant": "a"}}), None, clock=clock).active


class Unreachable:
    """Shared buckets whose Redis is down."""

    def __init__(self) -> None:
        self.calls = 0

    def take(self, takes: Sequence[BucketTake]) -> Verdict:
        self.calls += 1
        raise QueueStoreError("redis rate limit failed: connection refused")


def test_a_redis_outage_falls_back_to_the_replicas_own_buckets(clock: FakeClock) -> None:
    down = Unreachable()
    limits = limiter(clock, down, rate_limit_tenant_per_s=1, rate_limit_tenant_burst=2)
    assert limits.admit(bearer("k-acme-1")) is None  # not a 5xx, not a 429
    assert limits.admit(bearer("k-acme-1")) is None
    refusal = limits.admit(bearer("k-acme-1"))  # this replica still limits
    assert refusal is not None and refusal.limit == "tenant"
    assert down.calls == 1  # Redis is not asked again while it is presumed down
    clock.now += FALLBACK_S
    limits.admit(bearer("k-globex"))
    assert down.calls == 2


# -- the guard in the HTTP app (no Ray) -----------------------------------------------------
def refused_count(tenant_name: str, limit: str) -> float:
    value = metrics.REGISTRY.get_sample_value(
        "strata_rate_limited_total", {"tenant": tenant_name, "limit": limit})
    return value or 0.0


def test_the_guard_answers_429_with_retry_after_and_counts_it(clock: FakeClock) -> None:
    limits = limiter(clock, rate_limit_tenant_per_s=0.25, rate_limit_tenant_burst=1)
    api = FastAPI()
    api.add_middleware(RateLimitGuard, limiter=lambda: limits)

    @api.get("/v1/whoami")
    async def whoami() -> dict[str, str]:
        return {"ok": "yes"}

    @api.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    before = refused_count("acme", "tenant")
    with TestClient(api) as http:
        acme = {"Authorization": bearer("k-acme-1")}
        assert http.get("/v1/whoami", headers=acme).status_code == 200
        refused = http.get("/v1/whoami", headers=acme)
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "4"
        assert refused.json() == {"error": "rate_limited", "detail": refused.json()["detail"]}
        assert http.get("/v1/whoami", headers={"Authorization": bearer("k-globex")}
                        ).status_code == 200
        assert all(http.get("/healthz", headers=acme).status_code == 200 for _ in range(5))
    assert refused_count("acme", "tenant") == before + 1
