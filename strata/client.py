"""The Python SDK: ``strata.Client`` and ``strata.AsyncClient`` over the HTTP API.

The API surface is written once (``_Api``); the two clients differ only in how they send a
request and how they wait between attempts, so no method exists twice. Errors come back as
Strata's own error classes; a server that cannot be reached is ``BackendUnavailable``.

Every id that goes into a URL path is percent-encoded as one segment, and ``.``/``..`` are
refused: httpx would resolve them as dot segments and the request would reach another
user's resource (``forget("a", "../../victim")`` would delete user ``victim``).

A request that meets a 503 or a connection error is retried with exponential backoff,
honouring ``Retry-After`` (``RetryPolicy``). Turns get a client ``turn_id`` when the caller
gives none, generated once before the first attempt, so a retried turn is deduplicated by
the server instead of written twice.

Why this module is long: it is the whole HTTP API as one SDK — every endpoint written once in
``_Api``, each a few lines mapping arguments to a request — plus the retry policy and the
path-segment encoding every method relies on. Split by endpoint, the one small pattern would
be spread over a dozen files and the sync and async clients would need to import them all.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote

import httpx

from strata import errors
from strata.portability import MEDIA_TYPE, parse_export, split_export

__all__ = ["NO_RETRY", "AsyncClient", "Client", "RetryPolicy", "new_turn_id"]

_BY_CODE: dict[str, type[errors.StrataError]] = {
    cls.code: cls for cls in (errors.InvalidInput, errors.Unauthorized, errors.Forbidden,
                              errors.NotFound, errors.Conflict, errors.LimitExceeded,
                              errors.RateLimited, errors.PayloadTooLarge,
                              errors.BackendUnavailable, errors.VectorStoreError,
                              errors.QueueStoreError, errors.EmbedderError)}
# the request never reached the server: safe to send again whatever it was
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
_IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE"})
JOB_POLL_S = 0.2  # how often ``wait_for`` asks for a job's status
IMPORT_CHUNK_BYTES = 4 * 2**20  # half the server's default body limit (STRATA_MAX_BODY_BYTES)


@dataclass(frozen=True)
class RetryPolicy:
    """How the SDK retries a request that met an unavailable server (503), a rate limit
    (a 429 ``rate_limited``, refused before any work) or no server.

    ``attempts`` counts every try, the first included (1 = never retry). The n-th retry
    waits ``backoff_s * 2**(n-1)`` with jitter (between half and all of it), or what the
    server's ``Retry-After`` says; no wait exceeds ``max_wait_s``. A connection error after
    the request was sent is retried only for requests that are safe to repeat (reads,
    deletes, turns with their ``turn_id``, recall), and so is, for those, a 502/504 or a 500
    that is not Strata's own error (a proxy that lost its replica with a node).
    """

    attempts: int = 4
    backoff_s: float = 0.25
    max_wait_s: float = 30.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be at least 1")
        if self.backoff_s < 0 or self.max_wait_s < 0:
            raise ValueError("backoff_s and max_wait_s must not be negative")

    def wait_s(self, retry: int, retry_after: str | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0 for the first retry)."""
        told = _parse_retry_after(retry_after) if retry_after else None
        if told is not None:
            return min(told, self.max_wait_s)
        full = min(self.backoff_s * 2.0 ** retry, self.max_wait_s)
        return full / 2 + random.uniform(0, full / 2)


NO_RETRY = RetryPolicy(attempts=1)


def _parse_retry_after(value: str) -> float | None:
    """``Retry-After`` as seconds: a number of seconds or an HTTP date (RFC 9110 §10.2.3)."""
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def new_turn_id() -> str:
    """A client-generated turn id (``c-`` and 32 hex digits; the server's id rules allow it)."""
    return f"c-{uuid.uuid4().hex}"


def _segment(name: str, value: str, *, folders: bool = False) -> str:
    """``value`` as one percent-encoded URL path segment.

    ``.`` and ``..`` are refused (httpx resolves them as dot segments), and so are ids
    with a slash or backslash unless ``folders`` (a document id may name a folder): a proxy
    that decodes ``%2F`` and normalises the path would otherwise resolve them too.
    """
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string; got {type(value).__name__}")
    parts = value.split("/") if folders else [value]
    if any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"{name} {value!r} is not a valid id: empty, '.' or '..'")
    if "\\" in value or (not folders and "/" in value):
        raise ValueError(f"{name} {value!r} is not a valid id: it holds a slash")
    return quote(value, safe="")


@dataclass(frozen=True)
class _Request:
    method: str
    path: str
    json: dict[str, Any] | None = None
    params: dict[str, Any] | None = None
    repeatable: bool = False  # safe to send again after a connection error mid-request
    retry: bool = True
    text: bool = False  # the answer is text (Prometheus metrics, an export), not JSON
    content: str | None = None  # a body that is not JSON (an export's JSON Lines)
    timeout_s: float | None = None  # longer than the client's (a request that waits)

    @property
    def safe_to_repeat(self) -> bool:
        return self.repeatable or self.method in _IDEMPOTENT_METHODS


def _next_wait(policy: RetryPolicy, retry: int, request: _Request,
               outcome: httpx.Response | httpx.TransportError) -> float | None:
    """Seconds to wait before sending ``request`` again, or None: this outcome is final."""
    if not request.retry or retry + 1 >= policy.attempts:
        return None
    if isinstance(outcome, httpx.Response):
        if outcome.status_code == 503 or _rate_limited(outcome):
            return policy.wait_s(retry, outcome.headers.get("retry-after"))
        if request.safe_to_repeat and _lost_before_strata(outcome):
            return policy.wait_s(retry)
        return None
    if isinstance(outcome, _NOT_SENT) or request.safe_to_repeat:
        return policy.wait_s(retry)
    return None


def _error_code(resp: httpx.Response) -> str | None:
    """The ``error`` of a Strata ``{error, detail}`` body; None for any other body."""
    try:
        body = resp.json()
    except ValueError:
        return None
    code = body.get("error") if isinstance(body, dict) else None
    return code if isinstance(code, str) else None


def _rate_limited(resp: httpx.Response) -> bool:
    """A 429 of the rate limit: refused before any work, so any request may be sent again
    (another 429, such as a full scope's, is final)."""
    return resp.status_code == 429 and _error_code(resp) == errors.RateLimited.code


def _lost_before_strata(resp: httpx.Response) -> bool:
    """A gateway error, or a 500 that is not Strata's ``{error, detail}``: the request died
    on its way (a proxy whose replica was lost with its node), not in Strata's code."""
    return resp.status_code in (502, 504) or (resp.status_code == 500
                                              and _error_code(resp) is None)


def _read(resp: httpx.Response, text: bool = False) -> Any:
    if resp.status_code < 400:
        if text:
            return resp.text
        return resp.json() if resp.content else None
    try:
        body = resp.json()
        code, detail = body.get("error", ""), body.get("detail", resp.text)
    except ValueError:
        code, detail = "", resp.text
    cls = _BY_CODE.get(code, errors.StrataError)
    raise cls(f"{resp.status_code}: {detail}")


def _unreachable(base_url: httpx.URL, exc: httpx.TransportError) -> errors.BackendUnavailable:
    return errors.BackendUnavailable(
        f"cannot reach Strata at {base_url}: {type(exc).__name__}: {exc}")


_Outcome = httpx.Response | httpx.TransportError


@dataclass(frozen=True)
class _Step:
    """What one attempt decided: wait ``wait`` seconds and send again, or (``wait`` None)
    the request is answered with ``answer``."""

    wait: float | None
    answer: Any = None


def _settle(policy: RetryPolicy, retry: int, request: _Request, outcome: _Outcome,
            base_url: httpx.URL) -> _Step:
    """The retry loop's decision, shared by both clients (only sending and sleeping differ):
    send again after a wait, answer with the response, or raise its error."""
    wait = _next_wait(policy, retry, request, outcome)
    if wait is not None:
        return _Step(wait)
    if isinstance(outcome, httpx.TransportError):
        raise _unreachable(base_url, outcome) from outcome
    return _Step(None, _read(outcome, request.text))


def _clean(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, datetime) else v
            for k, v in body.items() if v is not None}


def _users(user_id: str) -> str:
    return f"/v1/users/{_segment('user_id', user_id)}"


def _session(session_id: str) -> str:
    return f"/v1/sessions/{_segment('session_id', session_id)}"


def _memory(user_id: str, memory_id: str) -> str:
    return f"{_users(user_id)}/memories/{_segment('memory_id', memory_id)}"


class _Api:
    """Every endpoint once. ``_send`` returns the JSON (sync) or an awaitable of it (async)."""

    def _send(self, request: _Request) -> Any:
        raise NotImplementedError

    def _send_each(self, requests: list[_Request],
                   combine: Callable[[list[Any]], Any]) -> Any:
        """Send in order, one after the other; ``combine`` makes one answer of the answers."""
        raise NotImplementedError

    def _after(self, request: _Request, then: Callable[[Any], Any]) -> Any:
        """Send ``request``, then answer what ``then`` makes of its answer (an awaitable
        of the async client's methods awaited)."""
        raise NotImplementedError

    def _poll(self, job_id: str | None, timeout_s: float, interval_s: float,
              ack: dict[str, Any] | None, user_id: str | None) -> Any:
        """The job's record once finished (under ``job`` in ``ack`` when one is given)."""
        raise NotImplementedError

    def _call(self, method: str, path: str, json: dict[str, Any] | None = None,
              params: dict[str, Any] | None = None, **how: Any) -> Any:
        return self._send(_Request(method, path, json, params, **how))

    # sessions
    def add_turn(self, session_id: str, user_id: str, role: str, content: str,
                 created_at: datetime | None = None, metadata: dict[str, Any] | None = None,
                 turn_id: str | None = None, *, auto_turn_id: bool = True,
                 context: str | None = None, agent: str | None = None) -> Any:
        """Append a turn; without ``turn_id`` the SDK makes one, so a retry is not a
        second turn (``auto_turn_id=False``: the server numbers it ``<session>:<n>``).
        ``context``: the project / business line from this turn on (a new one sets the
        session's working memory aside); ``agent``: for a key not bound to one.
        Answers the ack: ``turn_id``, ``turn_count``, ``pinned``, intents, ``context``."""
        if turn_id is None and auto_turn_id:
            turn_id = new_turn_id()
        return self._call("POST", f"{_session(session_id)}/turns", _clean({
            "user_id": user_id, "role": role, "content": content, "created_at": created_at,
            "metadata": metadata, "turn_id": turn_id, "context": context, "agent": agent}),
            repeatable=turn_id is not None)

    def add_turns(self, session_id: str, user_id: str, turns: list[dict[str, Any]], *,
                  auto_turn_id: bool = True) -> Any:
        """Many turns of one session, in order: ``{"session_id", "acks": [...]}`` once all are
        durable. Each turn: ``role``, ``content``, optional ``created_at``, ``metadata``,
        ``turn_id`` (made by the SDK when absent, so a retried batch is not written twice;
        ``auto_turn_id=False`` leaves the numbering ``<session>:<n>`` to the server)."""
        body = [_clean({**t, "turn_id": t.get("turn_id") or new_turn_id()} if auto_turn_id
                       else t) for t in turns]
        return self._call("POST", f"{_session(session_id)}/turns/batch",
                          {"user_id": user_id, "turns": body},
                          repeatable=all(t.get("turn_id") for t in body))

    def close_session(self, session_id: str, user_id: str, *, wait: bool = False,
                      timeout_s: float = 60.0) -> Any:
        """Close the session; its long-term extraction runs in the background, as the ack's
        ``extraction_job`` (None when there was nothing new). ``wait``: return once that
        job is done or failed, its record under ``job`` (``TimeoutError`` past
        ``timeout_s``), so a recall right after sees what it wrote."""
        request = _Request("POST", f"{_session(session_id)}/close", {"user_id": user_id},
                           repeatable=True)
        if not wait:
            return self._send(request)
        return self._after(request, lambda ack: self._poll(
            ack.get("extraction_job"), timeout_s, JOB_POLL_S, ack, user_id))

    def job(self, job_id: str, user_id: str | None = None) -> Any:
        """A queued job's record: ``status`` (queued, running, done, failed), ``attempts``,
        ``written`` (counts by kind and action: ``facts.insert``, ``episodes.merge``, …).
        ``user_id``: not found unless the job is that user's."""
        return self._call("GET", f"/v1/jobs/{_segment('job_id', job_id)}",
                          params=_clean({"user_id": user_id}))

    def wait_for(self, job: str | dict[str, Any] | None, timeout_s: float = 60.0,
                 interval_s: float = JOB_POLL_S, user_id: str | None = None) -> Any:
        """Poll a job (its id, or a close ack) until it is done or failed: its final record,
        or None for no job. A failed job is returned, not raised; ``TimeoutError`` past
        ``timeout_s``."""
        job_id = job.get("extraction_job") if isinstance(job, dict) else job
        return self._poll(job_id, timeout_s, interval_s, None, user_id)

    def working_memory(self, session_id: str, user_id: str, agent: str | None = None) -> Any:
        return self._call("GET", f"{_session(session_id)}/working-memory",
                          params=_clean({"user_id": user_id, "agent": agent}))

    def patch_task_state(self, session_id: str, user_id: str, patch: dict[str, Any]) -> Any:
        """RFC 7396 merge patch of the session's task state (repeating it is harmless)."""
        return self._call("PATCH", f"{_session(session_id)}/task-state",
                          {"user_id": user_id, "patch": patch}, repeatable=True)

    # recall
    def recall(self, user_id: str, query: str, **options: Any) -> Any:
        """The labelled context for ``query``; options: ``session_id``, ``budget_tokens``,
        ``layers``, ``top_k``, ``debug``, ``include_cold``, ``recipe``, ``context`` (the
        current project / business line), ``context_only``, ``agent``."""
        return self._call("POST", "/v1/recall", _clean({"user_id": user_id, "query": query,
                                                        **options}), repeatable=True)

    # memories
    def remember(self, user_id: str, kind: str = "fact", **fields: Any) -> Any:
        """Create a memory: a fact (``key`` and ``value``), an episode (``text``) or, with
        an admin key, a procedure; optional ``context``, ``visibility`` (shared, private,
        agents) and ``shared_with``."""
        return self._call("POST", f"{_users(user_id)}/memories",
                          _clean({"kind": kind, **fields}))

    def memories(self, user_id: str, kind: str | None = None, status: str | None = None,
                 q: str | None = None, limit: int = 100, context: str | None = None,
                 agent: str | None = None) -> Any:
        """The memories the calling agent may see (``context``: one project's only)."""
        return self._call("GET", f"{_users(user_id)}/memories", params=_clean(
            {"kind": kind, "status": status, "q": q, "limit": limit, "context": context,
             "agent": agent}))

    def history(self, user_id: str, memory_id: str) -> Any:
        return self._call("GET", f"{_memory(user_id, memory_id)}/history")

    def update_memory(self, user_id: str, memory_id: str, **patch: Any) -> Any:
        """Edit: ``text``, ``value``, ``confidence``, ``status``, ``scope_tags``,
        ``metadata``, ``context`` ("" for none), ``visibility``, ``shared_with``."""
        return self._call("PATCH", _memory(user_id, memory_id), _clean(patch))

    def forget(self, user_id: str, memory_id: str) -> Any:
        return self._call("DELETE", _memory(user_id, memory_id))

    def forget_user(self, user_id: str) -> Any:
        return self._call("DELETE", _users(user_id))

    def forgets(self, user_id: str, agent: str | None = None) -> Any:
        """The user's forgets said in conversation, newest first: what each named, how many
        memories it hid, ``state`` (``undoable`` until ``undo_until``, then ``final``)."""
        return self._call("GET", f"{_users(user_id)}/forgets", params=_clean({"agent": agent}))

    def undo_forget(self, user_id: str, forget_id: str, agent: str | None = None) -> Any:
        """Undo a conversational forget (``forget_id``: from a turn's ``intents.forgets`` or
        ``forgets``) within its grace period: what it hid is recalled again. ``Conflict``
        once it is final."""
        path = f"{_users(user_id)}/forgets/{_segment('forget_id', forget_id)}/undo"
        return self._call("POST", path, params=_clean({"agent": agent}))

    def erase_verified(self, user_id: str, phrase: str, memory_id: str | None = None,
                       bound_s: float | None = None) -> Any:
        """Forget the memory (or, with no ``memory_id``, everything about the user), then
        have the server check that ``phrase`` is gone from its own files: ``verify`` says
        what it scanned, what remains and ``forgotten``. A server with no local files to
        scan refuses before deleting (``Conflict``)."""
        return self._call("POST", f"{_users(user_id)}/erasure", _clean(
            {"phrase": phrase, "memory_id": memory_id, "bound_s": bound_s}),
            timeout_s=(bound_s or 120.0) + 60)  # 120: the longest bound the server takes

    def follow_ups(self, user_id: str, session_id: str | None = None, limit: int = 2) -> Any:
        """Proactive recall: open threads to bring up now (plans whose time has come, what
        closed sessions left open), each with its reason; rationed per topic and session."""
        return self._call("POST", f"{_users(user_id)}/follow-ups",
                          _clean({"session_id": session_id, "limit": limit}))

    def follow_up_feedback(self, user_id: str, topic: str, outcome: str) -> Any:
        """Report a proposed follow-up ``used`` (never again) or ``dismissed`` (quiet 30 d)."""
        path = f"{_users(user_id)}/follow-ups/{_segment('topic', topic)}/feedback"
        return self._call("POST", path, {"outcome": outcome})

    def correct_knowledge(self, user_id: str, chunk_id: str, text: str) -> Any:
        """The user's correction of a knowledge chunk (``chunk_id``: a knowledge item's id
        from a recall): kept as the user's memory, shown under the chunk in that user's
        later recalls; the knowledge base is not changed."""
        return self._call("POST", f"{_users(user_id)}/knowledge/corrections",
                          {"chunk_id": chunk_id, "text": text})

    def export_user(self, user_id: str) -> Any:
        """The user's memories, every kind and status, as JSON Lines text (the format of
        ``strata.portability``: a header, then one memory a line, no vectors)."""
        return self._call("GET", f"{_users(user_id)}/export", text=True)

    def export_tenant(self) -> Any:
        """(admin) Every user of the key's tenant, as one JSON Lines text."""
        return self._call("GET", "/v1/export", text=True)

    def import_user(self, user_id: str, export: str,
                    chunk_bytes: int = IMPORT_CHUNK_BYTES) -> Any:
        """Import one user's export into ``user_id``, ids kept, in chunks of whole lines of
        at most ``chunk_bytes`` (each under the server's body limit). Every line is checked
        here first, so a bad file sends nothing. Answers the summed counts:
        ``{"lines", "created", "updated", "unchanged", "chunks"}``; importing the same file
        again answers all ``unchanged``."""
        parse_export(export).one_user()
        path = f"{_users(user_id)}/import"
        requests = [_Request("POST", path, content=chunk, repeatable=True)  # idempotent
                    for chunk in split_export(export, chunk_bytes)]
        return self._send_each(requests, _import_totals)

    def users(self, q: str | None = None, limit: int = 1000) -> Any:
        """The tenant's users that have long-term memory: ``{"users", "truncated"}``."""
        return self._call("GET", "/v1/users", params=_clean({"q": q, "limit": limit}))

    # knowledge
    def import_documents(self, documents: list[dict[str, Any]],
                         validate: list[dict[str, str]] | None = None) -> Any:
        return self._call("POST", "/v1/knowledge/documents",
                          _clean({"documents": documents, "validate": validate}))

    def documents(self) -> Any:
        """The tenant's documents with their versions and chunk statuses."""
        return self._call("GET", "/v1/knowledge/documents")

    def document(self, doc_id: str) -> Any:
        path = _segment("doc_id", doc_id, folders=True)  # the route takes the rest of the path
        return self._call("GET", f"/v1/knowledge/documents/{path}")

    def search_knowledge(self, query: str, top_k: int = 5) -> Any:
        return self._call("POST", "/v1/knowledge/search", {"query": query, "top_k": top_k},
                          repeatable=True)

    # service
    def whoami(self) -> Any:
        """The key's tenant and role."""
        return self._call("GET", "/v1/whoami")

    def queues(self) -> Any:
        """Backlog and extraction lag of the long-term write queues."""
        return self._call("GET", "/v1/queues")

    def hot_index(self) -> Any:
        """(admin) Each shard's hot index: users, memories, bytes, loads, evictions."""
        return self._call("GET", "/v1/admin/hot-index")

    def health(self) -> Any:
        return self._call("GET", "/healthz")

    def ready(self) -> Any:
        """Readiness; a 503 (not ready) is an answer here, not retried."""
        return self._call("GET", "/readyz", retry=False)

    def metrics(self) -> Any:
        """The Prometheus metrics, as text."""
        return self._call("GET", "/metrics", text=True)


def _import_totals(answers: list[Any]) -> dict[str, Any]:
    totals = {"lines": 0, "created": 0, "updated": 0, "unchanged": 0, "chunks": len(answers)}
    for answer in answers:
        for name in ("lines", "created", "updated", "unchanged"):
            totals[name] += int(answer[name])
    return totals


def _finished(job_id: str, record: Any, deadline: float, ack: dict[str, Any] | None
              ) -> tuple[bool, Any]:
    """Whether polling ``job_id`` stops at ``record``, and the answer if it does."""
    if record.get("status") in ("done", "failed"):
        return True, record if ack is None else {**ack, "job": record}
    if time.monotonic() >= deadline:
        raise TimeoutError(f"job {job_id} still {record.get('status')!r} after the wait")
    return False, None


def _headers(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"}


def _content_type(request: _Request) -> dict[str, str] | None:
    return {"Content-Type": MEDIA_TYPE} if request.content is not None else None


def _http_args(request: _Request) -> dict[str, Any]:
    """``request`` as the arguments of ``httpx.Client.request`` (and the async one)."""
    args: dict[str, Any] = {
        "method": request.method, "url": request.path, "json": request.json,
        "params": request.params, "content": request.content, "headers": _content_type(request)}
    if request.timeout_s is not None:
        args["timeout"] = request.timeout_s
    return args


class Client(_Api):
    """Synchronous client: ``Client("http://127.0.0.1:8000", api_key="dev")``.

    ``retry`` sets how 503s and connection errors are retried (``NO_RETRY`` to never).
    """

    def __init__(self, base_url: str = "http://127.0.0.1:8000", api_key: str = "dev",
                 timeout_s: float = 30.0, transport: httpx.BaseTransport | None = None,
                 retry: RetryPolicy | None = None) -> None:
        self.retry = retry or RetryPolicy()
        self._http = httpx.Client(base_url=base_url, timeout=timeout_s, transport=transport,
                                  headers=_headers(api_key))

    def _send(self, request: _Request) -> Any:
        retry = 0
        while True:
            step = _settle(self.retry, retry, request, self._attempt(request),
                           self._http.base_url)
            if step.wait is None:
                return step.answer
            time.sleep(step.wait)
            retry += 1

    def _attempt(self, request: _Request) -> _Outcome:
        try:
            return self._http.request(**_http_args(request))
        except httpx.TransportError as exc:
            return exc

    def _send_each(self, requests: list[_Request],
                   combine: Callable[[list[Any]], Any]) -> Any:
        return combine([self._send(r) for r in requests])

    def _after(self, request: _Request, then: Callable[[Any], Any]) -> Any:
        return then(self._send(request))

    def _poll(self, job_id: str | None, timeout_s: float, interval_s: float,
              ack: dict[str, Any] | None, user_id: str | None) -> Any:
        if job_id is None:
            return None if ack is None else {**ack, "job": None}
        deadline = time.monotonic() + timeout_s
        while True:
            done, answer = _finished(job_id, self.job(job_id, user_id), deadline, ack)
            if done:
                return answer
            time.sleep(interval_s)

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
                 transport: httpx.AsyncBaseTransport | None = None,
                 retry: RetryPolicy | None = None) -> None:
        self.retry = retry or RetryPolicy()
        self._http = httpx.AsyncClient(base_url=base_url, timeout=timeout_s,
                                       transport=transport, headers=_headers(api_key))

    def _send(self, request: _Request) -> Awaitable[Any]:
        async def send() -> Any:
            retry = 0
            while True:
                step = _settle(self.retry, retry, request, await self._attempt(request),
                               self._http.base_url)
                if step.wait is None:
                    return step.answer
                await asyncio.sleep(step.wait)
                retry += 1

        return send()

    async def _attempt(self, request: _Request) -> _Outcome:
        try:
            return await self._http.request(**_http_args(request))
        except httpx.TransportError as exc:
            return exc

    def _send_each(self, requests: list[_Request],
                   combine: Callable[[list[Any]], Any]) -> Awaitable[Any]:
        async def send_each() -> Any:
            return combine([await self._send(r) for r in requests])

        return send_each()

    def _after(self, request: _Request, then: Callable[[Any], Any]) -> Awaitable[Any]:
        async def after() -> Any:
            return await then(await self._send(request))

        return after()

    def _poll(self, job_id: str | None, timeout_s: float, interval_s: float,
              ack: dict[str, Any] | None, user_id: str | None) -> Awaitable[Any]:
        async def poll() -> Any:
            if job_id is None:
                return None if ack is None else {**ack, "job": None}
            deadline = time.monotonic() + timeout_s
            while True:
                done, answer = _finished(job_id, await self.job(job_id, user_id), deadline,
                                         ack)
                if done:
                    return answer
                await asyncio.sleep(interval_s)

        return poll()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
