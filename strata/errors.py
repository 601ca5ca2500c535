"""Strata's one error tree. Every class carries the HTTP status the API answers with.

    StrataError (500)
    ├── InvalidInput (422)      bad fields, sizes, ranges; nothing was written
    ├── Unauthorized (401)      missing or unknown API key
    ├── Forbidden (403)         the key's role may not do this
    ├── NotFound (404)          no such session, memory or document
    ├── Conflict (409)          the write contradicts what is stored (duplicate id, …)
    ├── PayloadTooLarge (413)   the request body is over the limit; it was not read
    ├── LimitExceeded (429)     a per-scope cap (e.g. procedures) or queue bound
    │   └── RateLimited         the key's or tenant's request rate (with Retry-After)
    └── BackendUnavailable (503)
        ├── VectorStoreError    Milvus / milvus-lite failed or is unreachable
        ├── QueueStoreError     Redis failed or is unreachable
        └── EmbedderError       the embedding model failed

Lower-layer errors (pymilvus, redis, httpx) are translated at the adapter boundary
with ``raise … from exc`` so callers only ever catch ``StrataError``. The HTTP API answers
every failure, its own or the framework's (unknown route, bad JSON, an unexpected bug), as
``{"error": code, "detail": text}`` (``serve_app/guards.py``).
"""

from __future__ import annotations

__all__ = [
    "BackendUnavailable",
    "Conflict",
    "EmbedderError",
    "Forbidden",
    "InvalidInput",
    "LimitExceeded",
    "NotFound",
    "PayloadTooLarge",
    "QueueStoreError",
    "RateLimited",
    "StrataError",
    "Unauthorized",
    "VectorStoreError",
]


class StrataError(Exception):
    """Base of every error Strata raises on purpose."""

    status_code: int = 500
    code: str = "internal_error"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail

    def to_dict(self) -> dict[str, str]:
        """The JSON body the HTTP API returns for this error."""
        return {"error": self.code, "detail": self.detail}


class InvalidInput(StrataError):
    status_code = 422
    code = "invalid_input"


class Unauthorized(StrataError):
    status_code = 401
    code = "unauthorized"


class Forbidden(StrataError):
    status_code = 403
    code = "forbidden"


class NotFound(StrataError):
    status_code = 404
    code = "not_found"


class Conflict(StrataError):
    status_code = 409
    code = "conflict"


class PayloadTooLarge(StrataError):
    status_code = 413
    code = "payload_too_large"


class LimitExceeded(StrataError):
    status_code = 429
    code = "limit_exceeded"


class RateLimited(LimitExceeded):
    """Over a token-bucket rate limit (``strata.ratelimit``); ``retry_after_s`` is the
    ``Retry-After`` header: whole seconds until a token is there."""

    code = "rate_limited"

    def __init__(self, detail: str, retry_after_s: int = 1) -> None:
        super().__init__(detail)
        self.retry_after_s = retry_after_s


class BackendUnavailable(StrataError):
    status_code = 503
    code = "backend_unavailable"


class VectorStoreError(BackendUnavailable):
    code = "vector_store_unavailable"


class QueueStoreError(BackendUnavailable):
    code = "redis_unavailable"


class EmbedderError(BackendUnavailable):
    code = "embedder_unavailable"
