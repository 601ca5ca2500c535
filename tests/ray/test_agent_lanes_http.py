"""The per-agent boundary inside one tenant, black-box through HTTP (and MCP for sessions
and recall), with four keys: an admin, an agent key bound to no agent, and keys bound to
"planner" and "coach". Each test is one finding of a probe of the lanes: sessions, import,
write oracles and cross-lane writes, the users' listing, secrets in every field.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from live import live_app
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from strata.stores.redis import RedisStore

KEYS = {"lane-admin": {"tenant": "lanes", "role": "admin"},
        "lane-agent": {"tenant": "lanes", "role": "agent"},
        "lane-planner": {"tenant": "lanes", "role": "agent", "agent": "planner"},
        "lane-coach": {"tenant": "lanes", "role": "agent", "agent": "coach"}}
ADMIN, UNBOUND, PLANNER, COACH = ({"Authorization": f"Bearer {k}"} for k in KEYS)
MARK = "zebraquill"  # a word that only the planner's private memories hold

# one secret, and ways people (or attackers) write it so a plain pattern misses it
AWS = "AKIAIOSFODNN7EXAMPLE"
CARD = "4111111111111111"
OBFUSCATED = {
    "zero-width in a key": "my key is AKIA\u200bIOSF\u200bODNN7EXAMPLE ok",
    "zero-width in a card": "card 4111\u200b1111\u200b1111\u200b1111 thanks",
    "fullwidth key": "the key ＡＫＩＡＩＯＳＦＯＤＮＮ７ＥＸＡＭＰＬＥ here",
    "spaced-out key": "key: A K I A I O S F O D N N 7 E X A M P L E",
    "lower-case pass": "router pass: Hunter2Blue!",
}
# what must appear nowhere once any of the above was written
NEEDLES = ("IOSF", "ＩＯＳＦ", "I O S F", "4111", "Hunter2Blue")


@pytest.fixture(scope="module")
def app(ray_session: None, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[tuple[httpx.Client, str, RedisStore, Path]]:
    tmp = tmp_path_factory.mktemp("lanes")
    with live_app(tmp, embedder="hash", hash_dim=64, session_shards=2, extractors=1,
                  api_keys=KEYS) as (url, settings):
        redis = RedisStore(settings.redis_url, settings.redis_prefix)
        with httpx.Client(base_url=url, timeout=60) as http:
            yield http, url, redis, tmp
        redis.close()


@pytest.fixture()
def http(app: tuple[httpx.Client, str, RedisStore, Path]) -> httpx.Client:
    return app[0]


def ok(resp: httpx.Response) -> Any:
    assert resp.status_code == 200, resp.text
    return resp.json()


def say(http: httpx.Client, headers: dict[str, str], user: str, session: str,
        text: str) -> Any:
    return ok(http.post(f"/v1/sessions/{session}/turns", headers=headers,
                        json={"user_id": user, "role": "user", "content": text}))


def create(http: httpx.Client, headers: dict[str, str], user: str, **body: Any) -> Any:
    return ok(http.post(f"/v1/users/{user}/memories", headers=headers, json=body))


def listed(http: httpx.Client, headers: dict[str, str], user: str) -> list[dict[str, Any]]:
    return ok(http.get(f"/v1/users/{user}/memories", headers=headers))["memories"]  # type: ignore[no-any-return]


# -- sessions -----------------------------------------------------------------------------------
def test_another_agent_neither_patches_the_task_state_nor_closes_the_session(
        http: httpx.Client) -> None:
    say(http, PLANNER, "sam", "plan-1", "Let's plan my trip to Lisbon.")
    ok(http.patch("/v1/sessions/plan-1/task-state", headers=PLANNER,
                  json={"user_id": "sam", "patch": {"goal": "Lisbon itinerary"}}))
    for headers in (COACH, UNBOUND):
        patched = http.patch("/v1/sessions/plan-1/task-state", headers=headers,
                             json={"user_id": "sam", "patch": {"goal": None}})
        assert patched.status_code == 403 and patched.json()["error"] == "forbidden", patched.text
        closed = http.post("/v1/sessions/plan-1/close", headers=headers, json={"user_id": "sam"})
        assert closed.status_code == 403, closed.text
    view = ok(http.get("/v1/sessions/plan-1/working-memory", headers=PLANNER,
                       params={"user_id": "sam"}))
    assert view["task_state"]["goal"] == "Lisbon itinerary" and not view["closed"]
    say(http, PLANNER, "sam", "plan-1", "Three days is enough.")  # still open for its agent
    # an admin acts for the tenant
    ok(http.patch("/v1/sessions/plan-1/task-state", headers=ADMIN,
                  json={"user_id": "sam", "patch": {"done": ["flights"]}}))


def test_recall_with_another_agents_session_gets_no_turns_of_it(http: httpx.Client) -> None:
    say(http, PLANNER, "sam", "plan-2", f"My {MARK} budget is tight this month.")
    for headers in (COACH, UNBOUND):
        resp = http.post("/v1/recall", headers=headers, json={
            "user_id": "sam", "query": "what about the budget?", "session_id": "plan-2"})
        assert resp.status_code == 403 and resp.json()["error"] == "forbidden", resp.text
        assert MARK not in resp.text
    mine = ok(http.post("/v1/recall", headers=PLANNER, json={
        "user_id": "sam", "query": "what about the budget?", "session_id": "plan-2"}))
    assert MARK in mine["context"]


# -- import -------------------------------------------------------------------------------------
def _export_line(item: dict[str, Any], user: str) -> str:
    return json.dumps({**item, "user_id": user})


def _import(http: httpx.Client, headers: dict[str, str], user: str,
            items: list[dict[str, Any]]) -> httpx.Response:
    exported = http.get(f"/v1/users/{user}/export", headers=ADMIN)
    assert exported.status_code == 200, exported.text
    header = exported.text.splitlines()[0]
    body = "\n".join([header, *(_export_line(i, user) for i in items)]) + "\n"
    return http.post(f"/v1/users/{user}/import", headers=headers, content=body.encode())


def test_import_takes_the_agent_from_the_key_and_never_overwrites_a_hidden_memory(
        http: httpx.Client) -> None:
    private = create(http, PLANNER, "ivy", kind="episode", visibility="private",
                     text=f"Ivy's {MARK} diagnosis is confidential")["memory"]
    # a coach line that claims to be the planner's private memory
    forged = {**private, "id": "forged-by-coach", "text": "coach wrote this as the planner"}
    answer = ok(_import(http, COACH, "ivy", [forged]))
    assert answer["created"] == 1
    everyone = {m["id"]: m for m in listed(http, ADMIN, "ivy")}
    assert everyone["forged-by-coach"]["agent"] == "coach"
    assert "coach wrote this" not in json.dumps(listed(http, PLANNER, "ivy"))

    # a line reusing the planner's private id: the planner's memory is untouched, and the
    # answer is that of a new id
    reused = {**private, "text": "overwritten by the coach", "agent": "coach",
              "visibility": "shared"}
    fresh = {**reused, "id": "a-new-id-of-the-coach"}
    seen_reused = ok(_import(http, COACH, "ivy", [reused]))
    seen_fresh = ok(_import(http, COACH, "ivy", [fresh]))
    assert {k: seen_reused[k] for k in ("created", "updated", "unchanged")} == \
           {k: seen_fresh[k] for k in ("created", "updated", "unchanged")} == \
           {"created": 1, "updated": 0, "unchanged": 0}
    planner_view = {m["id"]: m for m in listed(http, PLANNER, "ivy")}
    assert planner_view[private["id"]]["text"] == private["text"]
    assert planner_view[private["id"]]["visibility"] == "private"
    # the same through the SDK
    from strata.client import Client
    with Client(str(http.base_url), api_key="lane-coach") as sdk:
        exported = http.get("/v1/users/ivy/export", headers=ADMIN).text.splitlines()[0]
        line = _export_line({**private, "text": "sdk overwrite"}, "ivy")
        sdk.import_user("ivy", f"{exported}\n{line}\n")
    assert {m["id"]: m for m in listed(http, PLANNER, "ivy")}[private["id"]]["text"] == \
        private["text"]


def test_an_agent_import_never_reuses_an_admin_memorys_id(http: httpx.Client) -> None:
    admins = create(http, ADMIN, "ada", kind="fact", key="policy.refunds", value="30 days",
                    source="admin")["memory"]
    as_episode = {**admins, "kind": "episode", "key": None, "value": None,
                  "source": "user_stated", "text": "refunds are forever"}
    resp = _import(http, COACH, "ada", [as_episode])
    assert resp.status_code in (200, 403, 422), resp.text
    ids = [m["id"] for m in listed(http, ADMIN, "ada")]
    assert ids.count(admins["id"]) == 1
    kept = {m["id"]: m for m in listed(http, ADMIN, "ada")}[admins["id"]]
    assert kept["value"] == "30 days" and kept["kind"] == "fact"


# -- oracles and cross-lane writes -------------------------------------------------------------
def test_writing_another_agents_private_text_reveals_nothing(http: httpx.Client) -> None:
    text = f"Noor keeps a {MARK} journal about her sister"
    private = create(http, PLANNER, "noor", kind="episode", text=text,
                     visibility="private")["memory"]
    answer = create(http, COACH, "noor", kind="episode", text=text)
    assert answer["action"] != "duplicate"
    assert answer["memory"]["id"] != private["id"] and answer["memory"]["agent"] == "coach"
    assert private["id"] not in json.dumps(answer)
    # both stand, each in its lane
    assert private["id"] in {m["id"] for m in listed(http, PLANNER, "noor")}


def test_a_coach_fact_beside_a_planner_private_fact_is_two_facts(http: httpx.Client) -> None:
    mine = create(http, PLANNER, "omar", kind="fact", key="preference.coffee",
                  value=f"{MARK} espresso", visibility="private")["memory"]
    theirs = create(http, COACH, "omar", kind="fact", key="preference.coffee", value="tea")
    assert theirs["action"] == "insert", theirs
    planner = {m["id"]: m for m in listed(http, PLANNER, "omar")}
    assert planner[mine["id"]]["status"] == "active"
    assert planner[mine["id"]]["value"] == f"{MARK} espresso"
    coach = listed(http, COACH, "omar")
    assert MARK not in json.dumps(coach)
    assert any(m["value"] == "tea" and m["status"] == "active" for m in coach)


def test_a_non_admin_fact_never_supersedes_an_admin_fact(http: httpx.Client) -> None:
    admins = create(http, ADMIN, "pia", kind="fact", key="account.tier", value="gold",
                    source="admin")["memory"]
    for headers in (COACH, UNBOUND):
        create(http, headers, "pia", kind="fact", key="account.tier", value="platinum")
    stored = {m["id"]: m for m in listed(http, ADMIN, "pia")}
    assert stored[admins["id"]]["status"] == "active"
    assert all(m["status"] != "active" for m in stored.values()
               if m.get("key") == "account.tier" and m["id"] != admins["id"])
    # an admin still changes it
    create(http, ADMIN, "pia", kind="fact", key="account.tier", value="silver", source="admin")
    assert {m["id"]: m for m in listed(http, ADMIN, "pia")}[admins["id"]]["status"] == \
        "superseded"


def test_users_listing_shows_only_users_with_something_the_caller_sees(
        http: httpx.Client) -> None:
    create(http, PLANNER, "quinn-private-only", kind="episode", visibility="private",
           text=f"quinn {MARK} secret plan")
    create(http, COACH, "rae-shared", kind="episode", text="Rae likes climbing")
    for headers, sees_quinn in ((ADMIN, True), (PLANNER, True), (COACH, False),
                                (UNBOUND, False)):
        users = ok(http.get("/v1/users", headers=headers))["users"]
        assert ("quinn-private-only" in users) is sees_quinn, (headers, users)
        assert "rae-shared" in users


# -- secrets ------------------------------------------------------------------------------------
def _all_of(http: httpx.Client, user: str) -> str:
    """Everything the API gives back about ``user``: export, list, recall."""
    out = [http.get(f"/v1/users/{user}/export", headers=ADMIN).text,
           json.dumps(listed(http, ADMIN, user), ensure_ascii=False)]
    for query in ("key", "card", "pass", "AKIA"):
        out.append(json.dumps(ok(http.post("/v1/recall", headers=ADMIN, json={
            "user_id": user, "query": query, "session_id": "sec-1"})), ensure_ascii=False))
    return "\n".join(out)


@pytest.mark.parametrize("case", sorted(OBFUSCATED))
def test_an_obfuscated_secret_is_stored_nowhere_and_served_nowhere(
        app: tuple[httpx.Client, str, RedisStore, Path], case: str) -> None:
    http, _, redis, _ = app
    user = "sec-" + case.replace(" ", "-")
    text = OBFUSCATED[case]
    say(http, ADMIN, user, "sec-1", "hello")
    say(http, ADMIN, user, "sec-1", text)  # working memory, the WAL
    resp = http.post(f"/v1/users/{user}/memories", headers=ADMIN,
                     json={"kind": "episode", "text": f"Noted: {text}"})
    assert resp.status_code in (200, 422), resp.text  # refused, or stored redacted
    view = ok(http.get("/v1/sessions/sec-1/working-memory", headers=ADMIN,
                       params={"user_id": user}))
    served = json.dumps(view, ensure_ascii=False) + _all_of(http, user)
    assert not [n for n in NEEDLES if n in served], served
    stored = _raw_redis(redis)  # the WAL, the snapshots, the queues: all of Redis
    assert not [n for n in NEEDLES if n in stored]


def _raw_redis(redis: RedisStore) -> str:
    """Every string value, hash, list and stream entry in Redis, as text."""
    client = redis.connection.client
    out: list[str] = []
    for key in client.scan_iter(count=1000):
        kind = client.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind == "string":
            out.append(str(client.get(key)))
        elif kind == "hash":
            out.append(str(client.hgetall(key)))
        elif kind == "list":
            out.append(str(client.lrange(key, 0, -1)))
        elif kind == "set":
            out.append(str(client.smembers(key)))
        elif kind == "zset":
            out.append(str(client.zrange(key, 0, -1)))
        elif kind == "stream":
            out.append(str(client.xrange(key)))
    return "\n".join(_decoded(s) for s in out)


def _decoded(text: str) -> str:
    """Redis answers bytes reprs: turn escaped UTF-8 back into characters."""
    try:
        return text.encode("latin-1", "backslashreplace").decode("unicode_escape").encode(
            "latin-1", "replace").decode("utf-8", "replace")
    except UnicodeError:
        return text


def test_a_secret_in_an_id_or_a_context_name_is_refused(http: httpx.Client) -> None:
    for body, session in (
            ({"content": "hi", "turn_id": AWS}, "ids-1"),
            ({"content": "hi", "context": f"proj {AWS}"}, "ids-2"),
            ({"content": "hi"}, f"s-{AWS}")):
        resp = http.post(f"/v1/sessions/{session}/turns", headers=ADMIN,
                         json={"user_id": "ids", "role": "user", **body})
        assert resp.status_code == 422 and resp.json()["error"] == "invalid_input", resp.text
        assert "IOSF" not in resp.text
    meta = http.post("/v1/sessions/ids-3/turns", headers=ADMIN, json={
        "user_id": "ids", "role": "user", "content": "hi", "metadata": {"note": f"k {AWS}"}})
    assert meta.status_code in (200, 422), meta.text
    if meta.status_code == 200:
        view = ok(http.get("/v1/sessions/ids-3/working-memory", headers=ADMIN,
                           params={"user_id": "ids"}))
        assert "IOSF" not in json.dumps(view)


def test_knowledge_documents_are_masked(http: httpx.Client) -> None:
    ok(http.post("/v1/knowledge/documents", headers=ADMIN, json={"documents": [{
        "doc_id": "ops/runbook", "title": "Runbook",
        "text": f"To deploy, export AWS_ACCESS_KEY_ID={AWS} and run the release script. "
                "Then check the dashboard for errors and roll back when needed."}]}))
    found = ok(http.post("/v1/knowledge/search", headers=COACH,
                         json={"query": "how to deploy release script"}))
    assert found["results"] and "IOSF" not in json.dumps(found)
    for path in ("ops/runbook", "ops%2Frunbook", "ops%2frunbook"):
        doc = http.get(f"/v1/knowledge/documents/{path}", headers=ADMIN)
        assert doc.status_code == 200, doc.text  # an id import accepts, every route takes
        assert "IOSF" not in doc.text and "[REDACTED:" in doc.text
    recalled = ok(http.post("/v1/recall", headers=COACH, json={
        "user_id": "kb-reader", "query": "how do I deploy with the release script?",
        "layers": ["knowledge"]}))
    assert "IOSF" not in json.dumps(recalled)


def test_metrics_need_a_key(app: tuple[httpx.Client, str, RedisStore, Path]) -> None:
    http = app[0]
    assert http.get("/metrics").status_code == 401
    assert http.get("/metrics", headers=COACH).status_code == 403
    scraped = http.get("/metrics", headers=ADMIN)
    assert scraped.status_code == 200 and "strata_" in scraped.text


# -- the same session and recall cases over MCP -------------------------------------------------
async def _mcp_call(url: str, key: str, tool: str, arguments: dict[str, Any]) -> Any:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as client,
        streamable_http_client(f"{url}/mcp", http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        result = await session.call_tool(tool, arguments)
        return result.is_error, result.content[0].text  # type: ignore[union-attr]


def test_over_mcp_another_agent_gets_no_session_of_the_planner(
        app: tuple[httpx.Client, str, RedisStore, Path]) -> None:
    http, url, _, _ = app
    say(http, PLANNER, "tia", "plan-mcp", f"The {MARK} surprise party is on Friday.")
    for key in ("lane-coach", "lane-agent"):
        failed, text = asyncio.run(_mcp_call(url, key, "recall", {
            "user_id": "tia", "session_id": "plan-mcp", "query": "what is on Friday?"}))
        assert failed and MARK not in text, text
    failed, text = asyncio.run(_mcp_call(url, "lane-planner", "recall", {
        "user_id": "tia", "session_id": "plan-mcp", "query": "what is on Friday?"}))
    assert not failed and MARK in text
