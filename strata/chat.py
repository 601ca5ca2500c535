"""One client of an OpenAI-compatible chat endpoint (``POST {base_url}/chat/completions``),
shared by the optional LLM paths: extraction, query expansion and working-memory summaries.
Whatever goes wrong — the network, the status, the reply's shape, JSON that does not fit the
schema — is one ``ChatFailed``; each caller then falls back to its rules."""

from __future__ import annotations

import json
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

__all__ = ["ChatClient", "ChatFailed"]

M = TypeVar("M", bound=BaseModel)


class ChatFailed(Exception):
    """The chat model gave no usable reply."""


class ChatClient:
    """``model`` at ``base_url``, with a bearer ``api_key`` when one is set."""

    def __init__(self, base_url: str, api_key: str, model: str, timeout_s: float,
                 transport: httpx.BaseTransport | None = None) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers,
                                  timeout=timeout_s, transport=transport)
        self.model = model

    def reply(self, messages: list[dict[str, str]], *, json_object: bool = False,
              max_tokens: int | None = None) -> str:
        """The model's answer to ``messages`` (temperature 0)."""
        body: dict[str, Any] = {"model": self.model, "temperature": 0, "messages": messages}
        if json_object:
            body["response_format"] = {"type": "json_object"}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        try:
            resp = self._http.post("/chat/completions", json=body)
            resp.raise_for_status()
            return str(resp.json()["choices"][0]["message"]["content"])
        except (httpx.HTTPError, httpx.InvalidURL, KeyError, IndexError, TypeError,
                ValueError) as exc:
            raise ChatFailed(f"{type(exc).__name__}: {exc}") from exc

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
