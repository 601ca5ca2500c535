"""The SDK's safety rules against a fake transport: ids in URL paths, turn ids, retries."""

from __future__ import annotations

import asyncio
import json
import re
import time
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import httpx
import pytest

from strata import AsyncClient, Client
from strata.client import NO_RETRY, RetryPolicy
from strata.errors import BackendUnavailable, LimitExceeded, NotFound, RateLimited, StrataError

FAST = RetryPolicy(attempts=4, backoff_s=0.001, max_wait_s=0.01)
CLIENT_TURN_ID = re.compile(r"^c-[0-9a-f]{32}$")

class Wire:
    """A fake server: answers from a script (one outcome per request), records requests."""

    def __init__(self, *outcomes: httpx.Response | Exception) -> None:
        self.outcomes = list(outcomes)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        outcome = self.outcomes.pop(0) if self.outcomes else httpx.Response(200, json={})
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def bodies(self) -> list[dict[str, object]]:
        return [json.loads(r.content) for r in self.requests]

    def paths(self) -> list[str]:
        return [r.url.raw_path.decode() for r in self.requests]


def client(wire: Wire, retry: RetryPolicy = FAST) -> Client:
    return Client("http://x", api_key="k", transport=httpx.MockTransport(wire), retry=retry)


def unavailable(retry_after: str | None = None) -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return httpx.Response(503, headers=headers,
                          json={"error": "backend_unavailable", "detail": "restarting"})


# -- ids in URL paths ----------------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda c: c.forget("a", "../../victim"),
    lambda c: c.forget("a", ".."),
    lambda c: c.forget("..", "m1"),
    lambda c: c.forget_user("."),
    lambda c: c.forget_user("a/../../victim"),
    lambda c: c.update_memory("a", "..", text="x"),
    lambda c: c.history("a", "."),
    lambda c: c.history("a\\..", "m1"),
    lambda c: c.memories(""),
    lambda c: c.remember("..", key="k", value="v"),
    lambda c: c.add_turn("..", "a", "user", "hi"),
    lambda c: c.add_turns(".", "a", [{"role": "user", "content": "hi"}]),
    lambda c: c.close_session("..", "a"),
    lambda c: c.working_memory("..", "a"),
    lambda c: c.patch_task_state(".", "a", {}),
    lambda c: c.document("../other"),
    lambda c: c.document("guide/./x"),
])
def test_dot_segments_and_slashes_are_refused_before_any_request(call) -> None:  # type: ignore[no-untyped-def]
    wire = Wire()
    with pytest.raises(ValueError):
        call(client(wire))
    assert wire.requests == []


def test_ids_are_percent_encoded_as_one_segment() -> None:
    wire = Wire()
    c = client(wire)
    c.forget("ann@x.org", "m 1?#%")
    c.history("a+b", "m.1")
    c.document("guide/setup")
    c.working_memory("s 1", "ann")
    assert wire.paths() == [
        "/v1/users/ann%40x.org/memories/m%201%3F%23%25",
        "/v1/users/a%2Bb/memories/m.1/history",
        "/v1/knowledge/documents/guide%2Fsetup",
        "/v1/sessions/s%201/working-memory?user_id=ann"]


def test_endpoints_the_inspector_added_are_in_the_sdk() -> None:
    wire = Wire(*[httpx.Response(200, json={"ok": i}) for i in range(6)],
                httpx.Response(200, text="strata_up 1\n"))
    c = client(wire)
    assert c.whoami() == {"ok": 0}
    c.users(q="an", limit=5)
    c.queues()
    c.documents()
    c.hot_index()
    c.health()
    assert c.metrics() == "strata_up 1\n"
    assert [(r.method, r.url.raw_path.decode()) for r in wire.requests] == [
        ("GET", "/v1/whoami"), ("GET", "/v1/users?q=an&limit=5"), ("GET", "/v1/queues"),
        ("GET", "/v1/knowledge/documents"), ("GET", "/v1/admin/hot-index"),
        ("GET", "/healthz"), ("GET", "/metrics")]


# -- turn ids ------------------------------------------------------------------------------
def test_turns_without_an_id_get_one_that_survives_retries() -> None:
    wire = Wire(unavailable("0"), httpx.ConnectError("refused"),
                httpx.Response(200, json={"turn_id": "whatever"}))
    client(wire).add_turn("s1", "ann", "user", "hi")
    ids = [b["turn_id"] for b in wire.bodies()]
    assert len(ids) == 3 and len(set(ids)) == 1 and CLIENT_TURN_ID.match(str(ids[0]))


def test_batch_turns_get_ids_only_where_missing_and_the_callers_dicts_stay() -> None:
    wire = Wire(unavailable("0"))
    turns = [{"role": "user", "content": "a"}, {"role": "user", "content": "b", "turn_id": "t2"}]
    client(wire).add_turns("s1", "ann", turns)
    first, retried = wire.bodies()
    assert first == retried
    sent = first["turns"]
    assert CLIENT_TURN_ID.match(sent[0]["turn_id"]) and sent[1]["turn_id"] == "t2"  # type: ignore[index]
    assert "turn_id" not in turns[0]
    again = Wire()
    client(again).add_turns("s1", "ann", turns)
    assert again.bodies()[0]["turns"][0]["turn_id"] != sent[0]["turn_id"]  # type: ignore[index]


# -- retries -------------------------------------------------------------------------------
def test_503_is_retried_until_the_attempts_run_out() -> None:
    wire = Wire(*[unavailable() for _ in range(5)])
    with pytest.raises(BackendUnavailable):
        client(wire, RetryPolicy(attempts=3, backoff_s=0.001)).recall("ann", "q")
    assert len(wire.requests) == 3
    once = Wire(unavailable())
    with pytest.raises(BackendUnavailable):
        client(once, NO_RETRY).recall("ann", "q")
    assert len(once.requests) == 1


def test_other_errors_are_not_retried() -> None:
    wire = Wire(httpx.Response(404, json={"error": "not_found", "detail": "no memory"}))
    with pytest.raises(NotFound):
        client(wire).history("ann", "m1")
    assert len(wire.requests) == 1


def test_a_proxy_that_lost_its_replica_is_retried_only_where_safe() -> None:
    """Serve's proxy answers a plain-text 500 when the replica died with its node: a turn
    (its turn_id makes it safe) is sent again; Strata's own 500 and a new memory are not."""
    lost = httpx.Response(500, text="Internal Server Error")
    turn = Wire(lost, httpx.Response(502, text="Bad Gateway"), httpx.Response(200, json={}))
    client(turn).add_turn("s1", "ann", "user", "hi")
    assert len(turn.requests) == 3
    assert len({body["turn_id"] for body in turn.bodies()}) == 1
    ours = Wire(httpx.Response(500, json={"error": "internal", "detail": "a bug"}))
    with pytest.raises(StrataError):
        client(ours).add_turn("s1", "ann", "user", "hi")
    assert len(ours.requests) == 1
    memory = Wire(httpx.Response(500, text="Internal Server Error"))
    with pytest.raises(StrataError):
        client(memory).remember("ann", key="k", value="v")
    assert len(memory.requests) == 1


def test_retry_after_is_honoured_and_capped() -> None:
    wire = Wire(unavailable("0.3"))
    started = time.monotonic()
    client(wire, RetryPolicy(backoff_s=0.0)).whoami()
    assert time.monotonic() - started >= 0.3 and len(wire.requests) == 2
    capped = Wire(unavailable("3600"))
    started = time.monotonic()
    client(capped, RetryPolicy(backoff_s=0.0, max_wait_s=0.05)).whoami()
    assert time.monotonic() - started < 5


def test_wait_grows_exponentially_with_jitter_and_reads_http_dates() -> None:
    policy = RetryPolicy(backoff_s=1.0, max_wait_s=5.0)
    for retry, full in ((0, 1.0), (1, 2.0), (2, 4.0), (3, 5.0), (9, 5.0)):
        waits = [policy.wait_s(retry) for _ in range(50)]
        assert all(full / 2 <= w <= full for w in waits)
    assert policy.wait_s(0, "2") == 2.0 and policy.wait_s(0, "120") == 5.0
    soon = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=3), usegmt=True)
    assert 1.0 < policy.wait_s(0, soon) <= 3.0
    assert 0.5 <= policy.wait_s(0, "not a date") <= 1.0
    with pytest.raises(ValueError):
        RetryPolicy(attempts=0)


def test_connection_errors_repeat_only_what_is_safe_to_repeat() -> None:
    never_sent = Wire(httpx.ConnectError("refused"), httpx.Response(200, json={"id": "m1"}))
    assert client(never_sent).remember("ann", key="k", value="v") == {"id": "m1"}
    assert len(never_sent.requests) == 2
    # the request went out and the answer was lost: a new memory could be written twice
    lost = Wire(httpx.ReadError("reset"), httpx.Response(200, json={}))
    with pytest.raises(BackendUnavailable, match="cannot reach Strata"):
        client(lost).remember("ann", key="k", value="v")
    assert len(lost.requests) == 1
    read = Wire(httpx.ReadError("reset"), httpx.Response(200, json={"context": "c"}))
    assert client(read).recall("ann", "q") == {"context": "c"}
    down = Wire(*[httpx.ConnectError("refused") for _ in range(4)])
    with pytest.raises(BackendUnavailable):
        client(down).whoami()
    assert len(down.requests) == 4


def test_async_client_retries_and_makes_turn_ids_the_same_way() -> None:
    wire = Wire(unavailable("0"), httpx.Response(200, json={"acks": []}))

    async def run() -> object:
        async with AsyncClient("http://x", api_key="k", transport=httpx.MockTransport(wire),
                               retry=FAST) as c:
            with pytest.raises(ValueError):
                await c.forget("ann", "..")
            return await c.add_turns("s1", "ann", [{"role": "user", "content": "hi"}])

    assert asyncio.run(run()) == {"acks": []}
    first, retried = wire.bodies()
    assert first == retried and CLIENT_TURN_ID.match(first["turns"][0]["turn_id"])  # type: ignore[index]


def test_turns_left_to_the_server_are_not_resent_after_a_lost_answer() -> None:
    wire = Wire(httpx.ReadError("reset"), httpx.Response(200, json={}))
    with pytest.raises(BackendUnavailable):
        client(wire).add_turns("s1", "ann", [{"role": "user", "content": "a"}],
                               auto_turn_id=False)
    assert len(wire.requests) == 1 and "turn_id" not in wire.bodies()[0]["turns"][0]  # type: ignore[index]
    single = Wire(unavailable("0"))
    client(single).add_turn("s1", "ann", "user", "hi", auto_turn_id=False)
    assert [b.get("turn_id") for b in single.bodies()] == [None, None]  # a 503 wrote nothing


def test_a_rate_limit_s_429_is_retried_after_what_it_says_and_a_full_scope_s_is_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr("strata.client.time.sleep", slept.append)
    limited = httpx.Response(429, headers={"Retry-After": "2"},
                             json={"error": "rate_limited", "detail": "over 5/s"})
    wire = Wire(limited, httpx.Response(200, json={"memory": {}}))
    client(wire, RetryPolicy()).remember("ann", key="k", value="v")  # refused unread: resent
    assert len(wire.requests) == 2 and slept == [2.0]
    always = Wire(*[limited] * 5)
    with pytest.raises(RateLimited):
        client(always, RetryPolicy(attempts=3, backoff_s=0.001)).recall("ann", "q")
    assert len(always.requests) == 3
    full = Wire(httpx.Response(429, json={"error": "limit_exceeded", "detail": "100 per scope"}))
    with pytest.raises(LimitExceeded):
        client(full).remember("ann", key="k", value="v")
    assert len(full.requests) == 1
