"""One client of an OpenAI-compatible chat endpoint (``POST {base_url}/chat/completions``)
through the ``openai`` SDK (``strata.providers``), shared by the optional LLM paths:
extraction, query expansion and working-memory summaries. Whatever goes wrong — the network,
the status, the reply's shape, JSON that does not fit the schema — is one ``ChatFailed``;
each caller then falls back to its rules.

Retries are the caller's choice and none by default: every chat path has a rule fallback,
and the query expander sits on a recall's path, where a wait costs more than the rules'
answer (``docs/providers.md``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TypeVar, cast

import httpx
from pydantic import BaseModel, ValidationError

from strata.providers import (
    NO_RETRY,
    ProviderFailed,
    RetryPolicy,
    call_with_retries,
    openai_client,
)

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

__all__ = ["ChatClient", "ChatFailed"]

M = TypeVar("M", bound=BaseModel)


class ChatFailed(ProviderFailed):
    """The chat model gave no usable reply; ``status`` is the endpoint's HTTP status when it
    answered with an error (401/403: the key was refused, and that was not retried)."""


class ChatClient:
    """``model`` at ``base_url``, with a bearer ``api_key`` when one is set; each attempt is
    cut at ``timeout_s``, and failed attempts are retried under ``retry``. ``transport``
    replaces the network (a test's ``httpx.MockTransport``)."""

    def __init__(self, base_url: str, api_key: str, model: str, timeout_s: float,
                 transport: httpx.BaseTransport | None = None, *,
                 retry: RetryPolicy = NO_RETRY) -> None:
        self._client = openai_client(base_url, api_key, timeout_s, transport)
        self._keyed = bool(api_key)
        self._retry = retry
        self.model = model

    def reply(self, messages: list[dict[str, str]], *, json_object: bool = False,
              max_tokens: int | None = None, frequency_penalty: float | None = None) -> str:
        """The model's answer to ``messages`` (temperature 0)."""
        options: dict[str, Any] = {}
        if json_object:
            options["response_format"] = {"type": "json_object"}
        if max_tokens is not None:
            options["max_tokens"] = max_tokens
        if frequency_penalty is not None:
            options["frequency_penalty"] = frequency_penalty

        def create() -> Any:
            return self._client.chat.completions.create(
                model=self.model, temperature=0,
                messages=cast("list[ChatCompletionMessageParam]", messages), **options)

        try:
            completion = call_with_retries(create, self._retry, f"chat model {self.model}",
                                           self._keyed)
        except ProviderFailed as exc:
            raise ChatFailed(str(exc), exc.status) from exc
        choices = getattr(completion, "choices", None)  # the SDK passes a non-JSON body on
        if not isinstance(choices, list) or not choices:
            raise ChatFailed(f"malformed reply from {self.model}: no choices")
        content = getattr(getattr(choices[0], "message", None), "content", None)
        if content is None:
            raise ChatFailed(f"malformed reply from {self.model}: no message content")
        return str(content)

    def ask(self, schema: type[M], system: str, user: str,
            max_tokens: int | None = None) -> M:
        """A JSON answer to ``user`` under ``system``, validated against ``schema``."""
        content = self.reply([{"role": "system", "content": system},
                              {"role": "user", "content": user}],
                             json_object=True, max_tokens=max_tokens)
        try:
            return schema.model_validate(json.loads(content))
        except (ValueError, ValidationError) as exc:
            raise ChatFailed(f"the reply does not fit {schema.__name__}: {exc}") from exc
