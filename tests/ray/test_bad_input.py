"""Issue #15 over HTTP on the real Serve app: bad input gets a 4xx ``{error, detail}`` and
changes nothing; an agent key finds no way round the roles."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from live import wait_status

from serve_app import main
from strata.models import Scope
from strata.settings import Settings
from strata.stores.keys import SessionRef
from strata.stores.redis import RedisStore
from strata.stores.redis_server import EmbeddedRedis, free_port

ADMIN = {"Authorization": "Bearer admin-key"}
AGENT = {"Authorization": "Bearer agent-key"}
MAX_BODY = 64 * 1024


@dataclass
class App:
    base: str
    redis: RedisStore

    def send(self, method: str, path: str, body: str | bytes | None = None,
             headers: dict[str, str] | None = None) -> httpx.Response:
        """A raw body, so that what a JSON encoder would never write can be sent."""
        return httpx.request(method, f"{self.base}{path}", content=body, timeout=30,
                             headers={**(headers or ADMIN), "content-type": "application/json"})

    def json(self, method: str, path: str, body: Any = None,
             headers: dict[str, str] | None = None) -> httpx.Response:
        return httpx.request(method, f"{self.base}{path}", json=body, timeout=30,
                             headers=headers or ADMIN)

    def turns(self, user: str, session: str) -> list[dict[str, Any]]:
        wal = self.redis.sessions.read(SessionRef(Scope(tenant="acme", user=user), session))
        return [r["turn"] for _, r in wal if r["op"] == "turn"]

    def memories(self, user: str) -> list[dict[str, Any]]:
        resp = self.json("GET", f"/v1/users/{user}/memories")
        assert resp.status_code == 200, resp.text
        listed: list[dict[str, Any]] = resp.json()["memories"]
        return listed


@pytest.fixture(scope="module")
def app(ray_session: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    tmp = tmp_path_factory.mktemp("bad-input")
    redis_server = EmbeddedRedis(tmp / "redis").start()
    port = free_port()
    settings = Settings(
        data_dir=tmp, embedder="hash", hash_dim=64, http_port=port, redis_url=redis_server.url,
        session_shards=2, max_turn_bytes=2000, max_body_bytes=MAX_BODY, extractors=0,
        api_keys={"admin-key": {"tenant": "acme", "role": "admin"},
                  "agent-key": {"tenant": "acme", "role": "agent"}})
    main.start(settings)
    base = f"http://127.0.0.1:{port}"
    wait_status(f"{base}/readyz", 200)
    handle = App(base, RedisStore(redis_server.url, settings.redis_prefix))
    try:
        yield handle
    finally:
        main.stop(settings, shutdown_ray=False)
        handle.redis.close()
        redis_server.stop()


def assert_error(resp: httpx.Response, status: int, error: str | None = None) -> str:
    """The one error shape; returns the detail."""
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json"), resp.text
    body = resp.json()
    assert set(body) == {"error", "detail"}, body
    assert isinstance(body["detail"], str) and body["detail"]
    if error is not None:
        assert body["error"] == error, body
    detail: str = body["detail"]
    return detail


DEEP = "[" * 900 + "]" * 900


# -- 1. text that is not text, nesting past any use -------------------------------------------
@pytest.mark.parametrize("body", [
    '{"user_id": "ann", "role": "user", "content": "a\\ud800b"}',
    '{"user_id": "ann", "role": "user", "content": "ok", "turn_id": "t\\udc00"}',
    '{"user_id": "ann", "role": "user", "content": "ok", "metadata": {"k\\ud800": 1}}',
    '{"user_id": "ann", "role": "user", "content": "ok", "metadata": {"x": ' + DEEP + "}}",
    '{"user_id": "ann", "role": "user", "content": "ok", "metadata": {"x": NaN}}',
], ids=["surrogate-content", "surrogate-turn-id", "surrogate-key", "deep-metadata", "nan"])
def test_a_turn_that_is_not_storable_json_is_refused(app: App, body: str) -> None:
    assert_error(app.send("POST", "/v1/sessions/s-json/turns", body), 422, "invalid_input")
    assert app.turns("ann", "s-json") == []


def test_a_memory_with_a_surrogate_session_id_is_refused(app: App) -> None:
    resp = app.send("POST", "/v1/users/bea/memories",
                    '{"kind": "episode", "text": "went hiking", "session_id": "s\\ud800"}')
    assert_error(resp, 422, "invalid_input")
    assert app.memories("bea") == []


def test_a_task_state_patch_nested_900_deep_is_refused(app: App) -> None:
    assert app.json("POST", "/v1/sessions/s-task/turns",
                    {"user_id": "cid", "role": "user", "content": "plan a trip"}).status_code == 200
    deep = '{"a": ' * 900 + "1" + "}" * 900
    resp = app.send("PATCH", "/v1/sessions/s-task/task-state",
                    '{"user_id": "cid", "patch": ' + deep + "}")
    assert "nested deeper than" in assert_error(resp, 422, "invalid_input")
    state = app.json("GET", "/v1/sessions/s-task/working-memory?user_id=cid").json()["task_state"]
    assert state == {"goal": None, "done_steps": [], "open_questions": []}


# -- 2. control characters in ids and keys; no filter in an error -----------------------------
def test_control_characters_in_ids_and_keys_are_refused_without_echoing_a_filter(
        app: App) -> None:
    made = app.json("POST", "/v1/users/dan/memories",
                    {"kind": "fact", "key": "seat", "value": "window"})
    assert made.status_code == 200, made.text
    before = app.memories("dan")
    answers = [
        app.json("POST", "/v1/users/dan/memories",
                 {"kind": "fact", "key": "seat\x00x", "value": "aisle"}),
        app.json("POST", "/v1/users/dan/memories",
                 {"kind": "fact", "key": "diet", "value": "vegan", "scope_tags": ["a\x1fb"]}),
        app.json("PATCH", "/v1/users/dan/memories/ab%00c", {"text": "changed"}),
        app.json("DELETE", "/v1/users/dan/memories/ab%00c"),
        app.json("GET", "/v1/users/dan/memories/ab%00c/history"),
        app.json("GET", "/v1/knowledge/documents/guide%00x"),
        app.json("POST", "/v1/sessions/s-ctl/turns",
                 {"user_id": "dan", "role": "user", "content": "hi", "turn_id": "t\x00"}),
    ]
    for resp in answers:
        detail = assert_error(resp, 422, "invalid_input")
        assert "scope ==" not in detail and "payload[" not in detail, detail
    assert app.memories("dan") == before
    assert app.turns("dan", "s-ctl") == []


# -- 3. an id is the whole string: no trailing newline ----------------------------------------
def test_ids_with_a_trailing_newline_are_refused(app: App) -> None:
    assert_error(app.json("POST", "/v1/sessions/s-nl%0A/turns",
                          {"user_id": "eve", "role": "user", "content": "hi"}), 422)
    assert_error(app.json("POST", "/v1/sessions/s-nl/turns",
                          {"user_id": "eve\n", "role": "user", "content": "hi"}), 422)
    assert_error(app.json("POST", "/v1/users/eve/memories",
                          {"kind": "episode", "text": "went sailing", "session_id": "s-nl\n"}),
                 422)
    assert_error(app.json("GET", "/v1/users/eve/memories/abc%0A/history"), 422)
    assert app.turns("eve", "s-nl\n") == [] and app.turns("eve", "s-nl") == []
    assert app.memories("eve") == []


# -- 4. one size limit over the whole body ----------------------------------------------------
def test_a_body_over_the_limit_is_refused_before_it_is_read(app: App) -> None:
    blob = {"user_id": "fay", "role": "user", "content": "hi", "metadata": {"b": "x" * MAX_BODY}}
    detail = assert_error(app.json("POST", "/v1/sessions/s-big/turns", blob), 413,
                          "payload_too_large")
    assert "STRATA_MAX_BODY_BYTES" in detail

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams in
        yield b'{"user_id": "fay", "role": "user", "content": "hi", "metadata": {"b": "'
        for _ in range(MAX_BODY // 1024 + 1):
            yield b"x" * 1024
        yield b'"}}'

    streamed = httpx.post(f"{app.base}/v1/sessions/s-big/turns", content=chunks(),
                          headers={**ADMIN, "content-type": "application/json"}, timeout=30)
    assert_error(streamed, 413, "payload_too_large")
    assert app.turns("fay", "s-big") == []


def test_a_turn_cannot_grow_past_its_limit_through_metadata(app: App) -> None:
    resp = app.json("POST", "/v1/sessions/s-meta/turns", {
        "user_id": "fay", "role": "user", "content": "hi", "metadata": {"b": "x" * 4000}})
    assert "STRATA_MAX_TURN_BYTES" in assert_error(resp, 422, "invalid_input")
    batch = app.json("POST", "/v1/sessions/s-meta/turns/batch", {"user_id": "fay", "turns": [
        {"role": "user", "content": "hi"},
        {"role": "user", "content": "hi", "metadata": {"b": "x" * 4000}}]})
    assert "turn 1" in assert_error(batch, 422, "invalid_input")
    assert app.turns("fay", "s-meta") == []


# -- 5. every error in one shape --------------------------------------------------------------
def test_framework_errors_have_the_one_shape(app: App) -> None:
    assert_error(app.json("PUT", "/v1/recall", {}), 405, "method_not_allowed")
    assert_error(app.json("DELETE", "/v1/sessions/s1/turns"), 405, "method_not_allowed")
    assert_error(app.json("GET", "/v1/no-such-route"), 404, "not_found")
    bad_json = app.send("POST", "/v1/recall", '{"user_id": "gus", "query": ')
    assert "not valid JSON" in assert_error(bad_json, 422, "invalid_input")
    assert_error(app.send("POST", "/v1/recall", b'{"user_id": "gus", "query": "\xff"}'), 422)
    missing = app.json("POST", "/v1/recall", {"user_id": "gus"})
    assert "query" in assert_error(missing, 422, "invalid_input")


def test_bad_procedure_and_episode_metadata_is_input_not_a_bug(app: App) -> None:
    for body in ({"kind": "procedure", "key": "p", "metadata": {"priority": 1e308}},
                 {"kind": "procedure", "key": "p", "metadata": {"keywords": "not a list"}},
                 {"kind": "episode", "text": "went out", "metadata": {"type": {"a": 1}}}):
        assert_error(app.json("POST", "/v1/users/hal/memories", body), 422, "invalid_input")
    assert app.memories("hal") == []


# -- 6. roles ---------------------------------------------------------------------------------
def test_an_agent_key_cannot_touch_what_only_an_admin_writes(app: App) -> None:
    procedure = app.json("POST", "/v1/users/ida/memories", {
        "kind": "procedure", "key": "refunds", "metadata": {"keywords": ["refund"],
                                                            "steps": ["check the order"]}})
    ruled = app.json("POST", "/v1/users/ida/memories",
                     {"kind": "fact", "key": "tier", "value": "gold", "source": "admin"})
    assert procedure.status_code == ruled.status_code == 200, (procedure.text, ruled.text)
    before = app.memories("ida")
    for memory in (procedure.json()["memory"], ruled.json()["memory"]):
        path = f"/v1/users/ida/memories/{memory['id']}"
        assert_error(app.json("PATCH", path, {"text": "changed by an agent"}, AGENT), 403,
                     "forbidden")
        assert_error(app.json("PATCH", path, {"metadata": {"steps": []}}, AGENT), 403)
        assert_error(app.json("DELETE", path, headers=AGENT), 403, "forbidden")
    for body in ({"kind": "fact", "key": "tier", "value": "platinum", "source": "admin"},
                 {"kind": "episode", "text": "the admin approved it", "source": "admin"},
                 {"kind": "procedure", "key": "skip", "metadata": {"steps": ["skip checks"]}}):
        assert_error(app.json("POST", "/v1/users/ida/memories", body, AGENT), 403, "forbidden")
    assert app.memories("ida") == before
    # what is the agent's stays the agent's; the admin may still change anything
    own = app.json("POST", "/v1/users/ida/memories",
                   {"kind": "fact", "key": "seat", "value": "aisle"}, AGENT)
    assert own.status_code == 200 and own.json()["memory"]["source"] == "user_stated"
    assert app.json("PATCH", f"/v1/users/ida/memories/{own.json()['memory']['id']}",
                    {"value": "window"}, AGENT).status_code == 200
    assert app.json("DELETE", f"/v1/users/ida/memories/{procedure.json()['memory']['id']}"
                    ).status_code == 200


# -- 7. client turn ids and generated ones never meet -----------------------------------------
def test_a_client_turn_id_cannot_take_a_generated_one(app: App) -> None:
    first = app.json("POST", "/v1/sessions/s-ids/turns",
                     {"user_id": "jo", "role": "user", "content": "first"})
    assert first.json()["turn_id"] == "s-ids:1"
    for turn_id in ("s-ids:1", "s-ids:2"):  # taken already, or next in line
        resp = app.json("POST", "/v1/sessions/s-ids/turns", {
            "user_id": "jo", "role": "user", "content": "second", "turn_id": turn_id})
        assert "may not start with 's-ids:'" in assert_error(resp, 422, "invalid_input")
    batch = app.json("POST", "/v1/sessions/s-ids/turns/batch", {"user_id": "jo", "turns": [
        {"role": "user", "content": "ok", "turn_id": "c-1"},
        {"role": "user", "content": "taken", "turn_id": "s-ids:3"}]})
    assert_error(batch, 422, "invalid_input")
    assert [t["content"] for t in app.turns("jo", "s-ids")] == ["first"]
    # a client may still use colons, and the generated ids go on where they were
    other = app.json("POST", "/v1/sessions/s-ids/turns", {
        "user_id": "jo", "role": "user", "content": "third", "turn_id": "other:1"})
    assert other.status_code == 200 and other.json()["turn_id"] == "other:1"
    last = app.json("POST", "/v1/sessions/s-ids/turns",
                    {"user_id": "jo", "role": "user", "content": "fourth"})
    assert last.json()["turn_id"] == "s-ids:3"
    assert [t["turn_id"] for t in app.turns("jo", "s-ids")] == ["s-ids:1", "other:1", "s-ids:3"]
