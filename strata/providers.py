"""The boundary to OpenAI-compatible model servers (chat and embeddings), through the
maintained ``openai`` SDK: one client per endpoint, Strata's retry policy, and the SDK's
errors translated into one ``ProviderFailed``.

The SDK speaks the one protocol that OpenAI, vLLM, Ollama, TEI, llama.cpp's server and
LiteLLM's proxy all serve; it is smaller than LiteLLM, which would bring a hundred
providers' adapters to reach the same endpoints (``docs/providers.md``).

Retries are Strata's, not the SDK's (its ``max_retries`` is 0): the SDK's own loop honours
``Retry-After`` too, but waits up to two minutes for it, sleeps with ``time.sleep`` (a test
can only patch it) and takes no cap, and a recall or an extraction should rather give up
than wait that long. ``RetryPolicy`` retries what the SDK would (408, 409, 429, 5xx,
timeouts, refused connections), waits what the server asks in ``Retry-After``
(``Retry-After-Ms``, seconds or an HTTP date) or else an exponential backoff, and gives up
at once when the server asks for longer than ``max_wait_s``. A refused key (401, 403) and
any other 4xx are never retried.
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from strata.settings import Settings

if TYPE_CHECKING:  # imported where it is used: ~0.6 s that a deployment without an
    import openai  # OpenAI-compatible endpoint need not pay at start

__all__ = ["NO_RETRY", "ProviderFailed", "RetryPolicy", "call_with_retries", "openai_client",
           "provider_retry", "retry_after_s"]

logger = logging.getLogger(__name__)
T = TypeVar("T")
RETRIED_STATUSES = frozenset({408, 409, 429})  # and every 5xx
# a key-less server (vLLM, Ollama, llama.cpp) still gets a bearer: the SDK refuses to send
# none; "EMPTY" is the placeholder vLLM's own documentation uses
NO_KEY = "EMPTY"


class ProviderFailed(Exception):
    """A call to a model server failed for good: ``status`` is the last HTTP status (None
    for a timeout or a connection that failed), ``auth`` whether the key was refused."""

    def __init__(self, detail: str, status: int | None = None) -> None:
        super().__init__(detail)
        self.status = status

    @property
    def auth(self) -> bool:
        return self.status in (401, 403)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry one call. ``sleep`` and ``clock`` are injectable so
    a test sees the waits without spending them."""

    retries: int = 2
    max_wait_s: float = 30.0  # the longest single wait; a longer Retry-After gives up
    backoff_s: float = 0.5  # the first wait without Retry-After, doubled each retry
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)
    clock: Callable[[], float] = field(default=time.time, compare=False)

    def backoff(self, attempt: int) -> float:
        """The wait before retry ``attempt + 1`` when the server named none (25% jitter)."""
        return min(self.backoff_s * 2.0**attempt, self.max_wait_s) * (1 - 0.25 * random.random())


NO_RETRY = RetryPolicy(retries=0)


def provider_retry(settings: Settings) -> RetryPolicy:
    """The retries ``settings`` give calls to a provider off the recall path."""
    return RetryPolicy(retries=settings.openai_retries, max_wait_s=settings.openai_retry_max_wait_s)


def retry_after_s(headers: Mapping[str, str], now: float) -> float | None:
    """The wait a server asks for: ``Retry-After-Ms``, or ``Retry-After`` in seconds or as an
    HTTP date (a date in the past: 0); None when it names none or nothing readable."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - now)


def openai_client(base_url: str, api_key: str, timeout_s: float,
                  transport: httpx.BaseTransport | None = None) -> openai.OpenAI:
    """An SDK client of ``base_url`` that never retries by itself; ``transport`` replaces the
    network (a test's ``httpx.MockTransport``)."""
    import openai

    # the SDK's 3.x types http_client as its own httpx2.Client but takes an httpx.Client too
    # (it checks for either at run time), so tests keep httpx.MockTransport
    http: Any = httpx.Client(timeout=timeout_s, transport=transport)
    return openai.OpenAI(api_key=api_key or NO_KEY, base_url=base_url.rstrip("/"),
                         timeout=timeout_s, max_retries=0, http_client=http)


def _describe(exc: openai.APIStatusError, what: str, keyed: bool) -> str:
    if exc.status_code in (401, 403):
        hint = ("check STRATA_OPENAI_API_KEY" if keyed
                else "STRATA_OPENAI_API_KEY is empty and this server wants one")
        return f"{what}: the server refused the API key ({exc.status_code}; {hint}): {exc.message}"
    return f"{what}: HTTP {exc.status_code}: {exc.message}"


def call_with_retries(call: Callable[[], T], policy: RetryPolicy, what: str,
                      keyed: bool = True) -> T:
    """``call()``, retried under ``policy``; ``ProviderFailed`` once it fails for good.
    ``what`` names the call in messages; ``keyed``: an API key was configured."""
    import openai

    attempt = 0
    while True:
        failure: openai.APIError
        status: int | None
        try:
            return call()
        except openai.APIStatusError as exc:
            status = exc.status_code
            if status not in RETRIED_STATUSES and status < 500:
                raise ProviderFailed(_describe(exc, what, keyed), status) from exc
            asked = retry_after_s(exc.response.headers, policy.clock())
            if asked is not None and asked > policy.max_wait_s:
                raise ProviderFailed(f"{what}: HTTP {status}, the server asks to retry after "
                                     f"{asked:.0f} s, past the {policy.max_wait_s:.0f} s cap",
                                     status) from exc
            failure = exc
            wait = asked if asked is not None else policy.backoff(attempt)
        except openai.APIConnectionError as exc:  # APITimeoutError is one
            failure, status, wait = exc, None, policy.backoff(attempt)
        except openai.APIResponseValidationError as exc:
            raise ProviderFailed(f"{what}: malformed reply: {exc}", exc.status_code) from exc
        except openai.OpenAIError as exc:  # the SDK's own refusals (a bad argument, …)
            raise ProviderFailed(f"{what}: {type(exc).__name__}: {exc}") from exc
        if attempt >= policy.retries:
            tries = f"{attempt + 1} attempt{'s' if attempt else ''}"
            raise ProviderFailed(f"{what}: {type(failure).__name__} after {tries}: "
                                 f"{failure.message}", status) from failure
        logger.info("%s: %s, retry %d of %d in %.2f s", what, type(failure).__name__,
                    attempt + 1, policy.retries, wait)
        policy.sleep(wait)
        attempt += 1
