"""The rate limits' token buckets in Redis, shared by every ingress replica: one Lua script
takes from all of a request's buckets at once (``strata.ratelimit.decide``, line for line).

Each bucket is a hash ``{tokens, at}`` (``strata.stores.keys.rate_bucket``) that expires once
it would be full again. Time is the Redis server's (``TIME``), one clock for all replicas;
a test may pass its own. The client has short timeouts of its own: a rate check that waits
on a sick Redis is worse than one that falls back (``strata.ratelimit.RateLimiter``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import redis

from strata.ratelimit import ALLOWED, BucketTake, Verdict
from strata.stores.redis.connection import redis_errors

__all__ = ["RedisRateBuckets"]

TIMEOUT_S = 0.5


class RedisRateBuckets:
    """``RateBuckets`` in the Redis at ``url``, every key under ``prefix``."""

    def __init__(self, url: str, prefix: str = "strata:",
                 clock: Callable[[], float] | None = None) -> None:
        self._prefix = prefix
        self._clock = clock
        self._r: Any = redis.Redis.from_url(url, socket_timeout=TIMEOUT_S,
                                            socket_connect_timeout=TIMEOUT_S)
        self._script = self._r.register_script(_TAKE)

    def take(self, takes: Sequence[BucketTake]) -> Verdict:
        args: list[Any] = ["" if self._clock is None else repr(self._clock())]
        for take in takes:
            args += [repr(take.rule.rate_per_s), take.rule.capacity]
        with redis_errors("rate limit"):
            denied, wait = self._script(keys=[self._prefix + t.bucket for t in takes],
                                        args=args)
        if not denied:
            return ALLOWED
        return Verdict(False, float(wait), takes[int(denied) - 1].limit)

    def close(self) -> None:
        self._r.close()


# KEYS: the buckets. ARGV: now ('' for the server's clock), then each bucket's rate and
# capacity. Returns {0 or the 1-based index of the bucket that refused, its wait as text}.
_TAKE = """
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local tokens, wait, denied = {}, 0, 0
for i, key in ipairs(KEYS) do
  local rate, cap = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  local held = redis.call('HMGET', key, 'tokens', 'at')
  local have = cap
  if held[1] then
    have = math.min(cap, tonumber(held[1]) + math.max(0, now - tonumber(held[2])) * rate)
  end
  tokens[i] = have
  if have < 1 and (1 - have) / rate > wait then
    wait, denied = (1 - have) / rate, i
  end
end
local spent = 1
if denied > 0 then spent = 0 end
for i, key in ipairs(KEYS) do
  local rate, cap = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  redis.call('HSET', key, 'tokens', string.format('%.17g', tokens[i] - spent),
             'at', string.format('%.17g', now))
  redis.call('PEXPIRE', key, math.ceil(cap / rate * 1000) + 1000)
end
return {denied, string.format('%.17g', wait)}
"""
