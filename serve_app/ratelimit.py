"""The rate-limit guard of the ingress: a request over its API key's or its tenant's rate
(``strata.ratelimit``) is answered 429 ``rate_limited`` with ``Retry-After`` before anything
else runs — its body is not read, no route or actor is reached.

The probes and the scrape (``EXEMPT_PATHS``) are never limited; a request with no known key
passes on to the route's own 401. Each refusal is counted in ``strata_rate_limited_total``
by tenant and limit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from serve_app import metrics
from strata.ratelimit import RateLimiter

__all__ = ["EXEMPT_PATHS", "RateLimitGuard"]

EXEMPT_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


class RateLimitGuard:
    """ASGI middleware: ``limiter()`` (the replica's, asked per request: its settings reach
    the replica after the app is built) admits a request or refuses it with 429."""

    def __init__(self, app: ASGIApp, limiter: Callable[[], RateLimiter]) -> None:
        self.app = app
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        limiter = self.limiter()
        if limiter.active:  # else no limit is set: not even the key is looked at
            authorization = Headers(scope=scope).get("authorization")
            refusal = await asyncio.to_thread(limiter.admit, authorization)  # Redis: blocking
            if refusal is not None:
                metrics.observe_rate_limited(refusal.tenant, refusal.limit)
                error = refusal.error
                await JSONResponse(status_code=error.status_code, content=error.to_dict(),
                                   headers={"Retry-After": str(error.retry_after_s)}
                                   )(scope, receive, send)
                return
        await self.app(scope, receive, send)
