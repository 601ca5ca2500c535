"""Rate limits through the live HTTP API (#40): a tenant over its limit gets 429 with
``Retry-After`` while another tenant is served, the probes and the scrape are never limited,
the buckets are in Redis (named by a digest, never the key), and /metrics counts the 429s."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from live import ACME, GLOBEX, KEYS, live_app
from prometheus_client.parser import text_string_to_metric_families

from strata.client import NO_RETRY, Client, RetryPolicy
from strata.errors import RateLimited
from strata.stores.redis import RedisStore

ACME_AGENT = {"Authorization": "Bearer key-acme-agent"}
RATE, BURST = 0.2, 3  # a token every 5 s: the test is over long before one refills


def test_a_tenant_over_its_limit_gets_429_while_another_is_served(
        ray_session: None, tmp_path: Path) -> None:
    with live_app(tmp_path, embedder="hash", hash_dim=64, api_keys=KEYS, extractors=0,
                  session_shards=1, rate_limit_tenant_per_s=RATE,
                  rate_limit_tenant_burst=BURST) as (url, settings):
        http = httpx.Client(base_url=url, timeout=30)
        served = [http.get("/v1/whoami", headers=ACME).status_code for _ in range(BURST)]
        assert served == [200] * BURST
        refused = http.get("/v1/whoami", headers=ACME)
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"] == "rate_limited"
        assert "tenant 'acme'" in refused.json()["detail"]
        assert 1 <= int(refused.headers["retry-after"]) <= 5  # ceil((1 - refilled) / 0.2)

        # the tenant's other key shares its bucket; a turn is refused before it is read
        turn = http.post("/v1/sessions/s1/turns", headers=ACME_AGENT,
                         json={"user_id": "ann", "role": "user", "content": "hello"})
        assert turn.status_code == 429 and "retry-after" in turn.headers
        # another tenant is served; the probes and the scrape are never limited
        assert http.get("/v1/whoami", headers=GLOBEX).status_code == 200
        assert http.get("/healthz").status_code == 200
        assert http.get("/readyz").status_code == 200

        redis = RedisStore(settings.redis_url, settings.redis_prefix)
        try:
            buckets = redis.keys("rate:*")
            assert not [k for k in redis.keys("wal:*") if ":s1" in k]  # nothing was written
        finally:
            redis.close()
        assert f"{settings.redis_prefix}rate:tenant:acme" in buckets
        assert not [k for k in buckets if "key-acme" in k]  # a digest, never the key

        scrape = http.get("/metrics", headers=ACME)
        assert scrape.status_code == 200, scrape.text
        samples = [s for family in text_string_to_metric_families(scrape.text)
                   for s in family.samples]
        limited = {(s.labels["tenant"], s.labels["limit"]): s.value for s in samples
                   if s.name == "strata_rate_limited_total"}
        assert limited == {("acme", "tenant"): 2.0}  # by tenant; no user, no key
        assert sum(s.value for s in samples if s.name == "strata_requests_total"
                   and s.labels["status"] == "429") == 2.0


def test_the_sdk_waits_out_the_limiter_s_retry_after(ray_session: None, tmp_path: Path) -> None:
    """A key of one request a second: the SDK's second call meets a real 429, waits its
    ``Retry-After`` and is served, once; with no retries it raises ``RateLimited``."""
    keys = {"slow-key": {"tenant": "acme", "role": "admin", "rate_per_s": 1.0, "burst": 1}}
    with live_app(tmp_path, embedder="hash", hash_dim=64, api_keys=keys, extractors=0,
                  session_shards=1) as (url, _):
        with Client(url, api_key="slow-key", retry=RetryPolicy(attempts=3)) as sdk:
            sdk.whoami()
            started = time.monotonic()
            assert sdk.whoami()["tenant"] == "acme"
            assert 0.5 <= time.monotonic() - started <= 10  # waited for the next token
        time.sleep(1.2)  # the bucket refills its one token
        with Client(url, api_key="slow-key", retry=NO_RETRY) as once:
            once.whoami()
            with pytest.raises(RateLimited) as refused:
                once.whoami()
            assert "rate" in str(refused.value).lower()
