"""The Python SDK: ``strata.Client`` and ``strata.AsyncClient`` over the HTTP API.

The API surface is written once (``_Api``); the two clients differ only in how they send a
request, so no method exists twice. Errors come back as Strata's own error classes.
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import datetime
from typing import Any

import httpx

from strata import errors

__all__ = ["AsyncClient", "Client"]

_BY_CODE: dict[str, type[errors.StrataError]] = {
    cls.code: cls for cls in (errors.InvalidInput, errors.Unauthorized, errors.Forbidden,
                              errors.NotFound, errors.Conflict, errors.LimitExceeded,
                              errors.BackendUnavailable, errors.VectorStoreError,
                              errors.QueueStoreError, errors.EmbedderError)}


def _raise_for(resp: httpx.Response) -> Any:
    if resp.status_code < 400:
        return resp.json() if resp.content else None
    try:
        body = resp.json()
        code, detail = body.get("error", ""), body.get("detail", resp.text)
    except ValueError:
        code, detail = "", resp.text
    cls = _BY_CODE.get(code, errors.StrataError)
    raise cls(f"{resp.status_code}: {detail}")


def _clean(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, datetime) else v
            for k, v in body.items() if v is not None}


class _Api:
    """Every endpoint once. ``_call`` returns the JSON (sync) or an awaitable of it (async)."""

    def _call(self, method: str, path: str, json: dict[str, Any] | None = None,
              params: dict[str, Any] | None = None) -> Any:
        raise NotImplementedError

    # sessions
    def add_turn(self, session_id: str, user_id: str, role: str, content: str,
                 created_at: datetime | None = None, metadata: dict[str, Any] | None = None,
                 turn_id: str | None = None) -> Any:
        return self._call("POST", f"/v1/sessions/{session_id}/turns", _clean({
            "user_id": user_id, "role": role, "content": content, "created_at": created_at,
            "metadata": metadata, "turn_id": turn_id}))

    def add_turns(self, session_id: str, user_id: str, turns: list[dict[str, Any]]) -> Any:
        """Many turns of one session, in order: ``{"session_id", "acks": [...]}`` once all are
        durable. Each turn: ``role``, ``content``, optional ``created_at``, ``metadata``,
        ``turn_id`` (a retried batch with the same ids is not written twice)."""
        return self._call("POST", f"/v1/sessions/{session_id}/turns/batch",
                          {"user_id": user_id, "turns": [_clean(t) for t in turns]})

    def close_session(self, session_id: str, user_id: str) -> Any:
        return self._call("POST", f"/v1/sessions/{session_id}/close", {"user_id": user_id})

    def working_memory(self, session_id: str, user_id: str) -> Any:
        return self._call("GET", f"/v1/sessions/{session_id}/working-memory",
                          params={"user_id": user_id})

    def patch_task_state(self, session_id: str, user_id: str, patch: dict[str, Any]) -> Any:
        return self._call("PATCH", f"/v1/sessions/{session_id}/task-state",
                          {"user_id": user_id, "patch": patch})

    # recall
    def recall(self, user_id: str, query: str, **options: Any) -> Any:
        return self._call("POST", "/v1/recall", _clean({"user_id": user_id, "query": query,
                                                        **options}))

    # memories
    def remember(self, user_id: str, kind: str = "fact", **fields: Any) -> Any:
        return self._call("POST", f"/v1/users/{user_id}/memories",
                          _clean({"kind": kind, **fields}))

    def memories(self, user_id: str, kind: str | None = None, status: str | None = None,
                 q: str | None = None, limit: int = 100) -> Any:
        return self._call("GET", f"/v1/users/{user_id}/memories", params=_clean(
            {"kind": kind, "status": status, "q": q, "limit": limit}))

    def history(self, user_id: str, memory_id: str) -> Any:
        return self._call("GET", f"/v1/users/{user_id}/memories/{memory_id}/history")

    def update_memory(self, user_id: str, memory_id: str, **patch: Any) -> Any:
        return self._call("PATCH", f"/v1/users/{user_id}/memories/{memory_id}", _clean(patch))

    def forget(self, user_id: str, memory_id: str) -> Any:
        return self._call("DELETE", f"/v1/users/{user_id}/memories/{memory_id}")

    def forget_user(self, user_id: str) -> Any:
        return self._call("DELETE", f"/v1/users/{user_id}")

    # knowledge
    def import_documents(self, documents: list[dict[str, Any]],
                         validate: list[dict[str, str]] | None = None) -> Any:
        return self._call("POST", "/v1/knowledge/documents",
                          _clean({"documents": documents, "validate": validate}))

    def document(self, doc_id: str) -> Any:
        return self._call("GET", f"/v1/knowledge/documents/{doc_id}")

    def search_knowledge(self, query: str, top_k: int = 5) -> Any:
        return self._call("POST", "/v1/knowledge/search", {"query": query, "top_k": top_k})

    # service
    def ready(self) -> Any:
        return self._call("GET", "/readyz")


class Client(_Api):
    """Synchronous client: ``Client("http://127.0.0.1:8000", api_key="dev")``."""

    def __init__(self, base_url: str = "http://127.0.0.1:8000", api_key: str = "dev",
                 timeout_s: float = 30.0, transport: httpx.BaseTransport | None = None) -> None:
        self._http = httpx.Client(base_url=base_url, timeout=timeout_s, transport=transport,
                                  headers={"Authorization": f"Bearer {api_key}"})

    def _call(self, method: str, path: str, json: dict[str, Any] | None = None,
              params: dict[str, Any] | None = None) -> Any:
        return _raise_for(self._http.request(method, path, json=json, params=params))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient(_Api):
    """Asynchronous client: every method returns an awaitable."""

    def __init__(self, base_url: str = "http://127.0.0.1:8000", api_key: str = "dev",
                 timeout_s: float = 30.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._http = httpx.AsyncClient(base_url=base_url, timeout=timeout_s,
                                       transport=transport,
                                       headers={"Authorization": f"Bearer {api_key}"})

    def _call(self, method: str, path: str, json: dict[str, Any] | None = None,
              params: dict[str, Any] | None = None) -> Awaitable[Any]:
        async def send() -> Any:
            return _raise_for(await self._http.request(method, path, json=json, params=params))

        return send()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
