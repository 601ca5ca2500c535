"""The entity view over HTTP on the real Serve app (#38): a user's entities listed and
inspected, renamed, merged, deleted (the memories stay), forgotten (the memories are no
longer recalled, and the forget is undoable), carried by export and import, gone with the
user; bad ids and bodies answered 4xx ``{error, detail}``; another tenant sees nothing and
an agent key sees only its lane, with its edits its own."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from live import live_app

from strata.stores.redis import QUEUE_LOW, RedisStore

KEYS = {"ent-admin": {"tenant": "ent", "role": "admin"},
        "ent-planner": {"tenant": "ent", "role": "agent", "agent": "planner"},
        "ent-coach": {"tenant": "ent", "role": "agent", "agent": "coach"},
        "other-admin": {"tenant": "other", "role": "admin"}}
ADMIN, PLANNER, COACH, OTHER = ({"Authorization": f"Bearer {k}"} for k in KEYS)
TAMPA = "I took my dog Max to the beach in Tampa last weekend."
PARK = "Every morning Max runs to the park near the house."
MIAMI = "Nate visited Miami, Florida in June."


@pytest.fixture(scope="module")
def app(ray_session: None, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[tuple[httpx.Client, RedisStore]]:
    with live_app(tmp_path_factory.mktemp("entities"), embedder="hash", hash_dim=64,
                  session_shards=2, extractors=1, api_keys=KEYS,
                  forget_grace_s=3600.0) as (url, settings):
        redis = RedisStore(settings.redis_url, settings.redis_prefix)
        with httpx.Client(base_url=url, timeout=120) as http:
            yield http, redis
        redis.close()


@pytest.fixture()
def http(app: tuple[httpx.Client, RedisStore]) -> httpx.Client:
    return app[0]


def ok(resp: httpx.Response) -> Any:
    assert resp.status_code == 200, resp.text
    return resp.json()


def refused(resp: httpx.Response, status: int, error: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    body: dict[str, Any] = resp.json()
    assert body["error"] == error and body["detail"], body
    return body


def episode(http: httpx.Client, user: str, text: str, headers: dict[str, str] = ADMIN,
            **extra: Any) -> str:
    made = ok(http.post(f"/v1/users/{user}/memories", headers=headers,
                        json={"kind": "episode", "text": text, **extra}))
    return str(made["memory"]["id"])


def entities(http: httpx.Client, user: str, headers: dict[str, str] = ADMIN,
             **params: Any) -> list[dict[str, Any]]:
    return ok(http.get(f"/v1/users/{user}/entities", headers=headers,  # type: ignore[no-any-return]
                       params=params))["entities"]


def named(http: httpx.Client, user: str, name: str,
          headers: dict[str, str] = ADMIN) -> dict[str, Any]:
    found = [e for e in entities(http, user, headers) if e["name"] == name]
    assert found, f"{name!r} not among {[e['name'] for e in entities(http, user, headers)]}"
    return found[0]


def recalled(http: httpx.Client, user: str, query: str) -> str:
    return str(ok(http.post("/v1/recall", headers=ADMIN,
                            json={"user_id": user, "query": query}))["context"])


def test_a_users_entities_come_from_their_memories_and_sessions(
        app: tuple[httpx.Client, RedisStore]) -> None:
    http, redis = app
    first = episode(http, "nate", TAMPA, session_id="s1")
    second = episode(http, "nate", PARK, session_id="s2")
    for text in ("I started learning the violin this spring.", "My violin teacher is great."):
        ok(http.post("/v1/sessions/talk-1/turns", headers=ADMIN,
                     json={"user_id": "nate", "role": "user", "content": text}))
    ok(http.post("/v1/sessions/talk-1/close", headers=ADMIN, json={"user_id": "nate"}))
    listed = ok(http.get("/v1/users/nate/entities", headers=ADMIN))
    assert listed["memories_read"] >= 2 and listed["total"] == len(listed["entities"])
    max_ = named(http, "nate", "Max")
    assert (max_["type"], max_["mentions"], max_["sessions"]) == ("pet", 2, 2)
    assert {(lk["kind"], lk["name"]) for lk in max_["links"]} >= {("relation", "dog")}
    tampa = named(http, "nate", "Tampa")
    assert tampa["within"][:2] == ["Florida", "United States"]
    detail = ok(http.get(f"/v1/users/nate/entities/{max_['id']}", headers=ADMIN))
    assert [m["memory_id"] for m in detail["mention_list"]] == [second, first]  # newest first
    assert [m["session_id"] for m in detail["mention_list"]] == ["s2", "s1"]
    florida = ok(http.get(f"/v1/users/nate/entities/{named(http, 'nate', 'Florida')['id']}",
                          headers=ADMIN))
    assert [c["name"] for c in florida["contains"]] == ["Tampa"]
    assert [m["via"] for m in florida["mention_list"]] == [tampa["id"]]
    only_places = entities(http, "nate", type="place")
    assert only_places and {e["type"] for e in only_places} == {"place"}
    assert [e["name"] for e in entities(http, "nate", q="tamp")] == ["Tampa"]

    def drained() -> bool:
        return redis.queues.depth(QUEUE_LOW, "extractors").backlog == 0

    deadline = time.monotonic() + 120
    while not (drained() and any(e["name"] == "violin" for e in entities(http, "nate"))):
        assert time.monotonic() < deadline, "the session's memories never named the violin"
        time.sleep(0.5)
    violin = named(http, "nate", "violin")
    assert {lk["name"] for lk in violin["links"]} >= {"instrument"}


def test_bad_ids_bodies_and_params_are_4xx_with_error_and_detail(http: httpx.Client) -> None:
    episode(http, "bad", TAMPA)
    max_id = named(http, "bad", "Max")["id"]
    refused(http.get("/v1/users/bad/entities/not-an-id", headers=ADMIN), 422, "invalid_input")
    refused(http.get("/v1/users/bad/entities/0123456789abcdef", headers=ADMIN), 404,
            "not_found")
    refused(http.get("/v1/users/bad/entities", headers=ADMIN, params={"limit": 0}), 422,
            "invalid_input")
    refused(http.get("/v1/users/bad/entities", headers=ADMIN, params={"type": "spaceship"}),
            422, "invalid_input")
    for body in ({}, {"name": ""}, {"name": "   "}, {"type": "spaceship"},
                 {"merge_into": "nope"}, {"name": "x", "colour": "red"}):
        refused(http.patch(f"/v1/users/bad/entities/{max_id}", headers=ADMIN, json=body),
                422, "invalid_input")
    refused(http.patch(f"/v1/users/bad/entities/{max_id}", headers=ADMIN,
                       json={"merge_into": max_id}), 422, "invalid_input")
    refused(http.patch(f"/v1/users/bad/entities/{max_id}", headers=ADMIN,
                       json={"merge_into": "0123456789abcdef"}), 404, "not_found")
    refused(http.delete("/v1/users/bad/entities/0123456789abcdef", headers=ADMIN), 404,
            "not_found")
    refused(http.post("/v1/users/bad/entities/0123456789abcdef/forget", headers=ADMIN), 404,
            "not_found")
    refused(http.get("/v1/users/bad/entities", headers={"Authorization": "Bearer nope"}), 401,
            "unauthorized")


def test_rename_merge_and_delete_change_the_view_not_the_memories(http: httpx.Client) -> None:
    episode(http, "rita", TAMPA)
    episode(http, "rita", MIAMI)
    max_id = named(http, "rita", "Max")["id"]
    renamed = ok(http.patch(f"/v1/users/rita/entities/{max_id}", headers=ADMIN,
                            json={"name": "Maxie", "type": "person"}))
    assert (renamed["name"], renamed["type"], renamed["id"]) == ("Maxie", "person", max_id)
    assert "Max" in renamed["aliases"] and named(http, "rita", "Maxie")["id"] == max_id
    miami = named(http, "rita", "Miami")
    joined = ok(http.patch(f"/v1/users/rita/entities/{named(http, 'rita', 'Tampa')['id']}",
                           headers=ADMIN, json={"merge_into": miami["id"]}))
    assert joined["id"] == miami["id"] and joined["mentions"] == 2
    assert "Tampa" not in {e["name"] for e in entities(http, "rita")}
    gone = ok(http.delete(f"/v1/users/rita/entities/{miami['id']}", headers=ADMIN))
    assert gone == {"deleted_entity": miami["id"], "memories_kept": 2}
    assert "Miami" not in {e["name"] for e in entities(http, "rita")}
    refused(http.get(f"/v1/users/rita/entities/{miami['id']}", headers=ADMIN), 404,
            "not_found")
    texts = {m["text"] for m in ok(http.get("/v1/users/rita/memories", headers=ADMIN))[
        "memories"]}
    assert {TAMPA, MIAMI} <= texts  # deleting an entity keeps its memories


def test_forgetting_an_entity_stops_its_memories_being_recalled_until_undone(
        http: httpx.Client) -> None:
    episode(http, "fay", TAMPA)
    episode(http, "fay", PARK)
    episode(http, "fay", "Fay's favourite tea is a smoky lapsang souchong.")
    assert "Tampa" in recalled(http, "fay", "where did Max go to the beach?")
    view = ok(http.post(f"/v1/users/fay/entities/{named(http, 'fay', 'Max')['id']}/forget",
                        headers=ADMIN))
    assert (view["hidden"], view["state"], view["target"]) == (2, "undoable", "Max")
    context = recalled(http, "fay", "where did Max go to the beach?")
    assert "Tampa" not in context and "park" not in context
    assert "lapsang" in recalled(http, "fay", "what tea does Fay like?")
    assert "Max" not in {e["name"] for e in entities(http, "fay")}
    forgets = ok(http.get("/v1/users/fay/forgets", headers=ADMIN))["forgets"]
    assert [f["forget_id"] for f in forgets] == [view["forget_id"]]
    undone = ok(http.post(f"/v1/users/fay/forgets/{view['forget_id']}/undo", headers=ADMIN))
    assert undone["restored"] == 2
    assert "Tampa" in recalled(http, "fay", "where did Max go to the beach?")


def test_the_edits_go_out_with_the_export_come_back_with_the_import_and_go_with_the_user(
        http: httpx.Client) -> None:
    episode(http, "ivo", TAMPA)
    episode(http, "ivo", MIAMI)
    ok(http.patch(f"/v1/users/ivo/entities/{named(http, 'ivo', 'Max')['id']}", headers=ADMIN,
                  json={"name": "Maximilian"}))
    ok(http.delete(f"/v1/users/ivo/entities/{named(http, 'ivo', 'Miami')['id']}",
                   headers=ADMIN))
    exported = http.get("/v1/users/ivo/export", headers=ADMIN)
    assert exported.status_code == 200, exported.text
    assert '"entity_edits"' in exported.text and "Maximilian" in exported.text
    ok(http.delete("/v1/users/ivo", headers=ADMIN))
    assert entities(http, "ivo") == []
    episode(http, "ivo", TAMPA)  # the memories alone: no edits left behind
    assert "Max" in {e["name"] for e in entities(http, "ivo")}
    ok(http.delete("/v1/users/ivo", headers=ADMIN))
    summary = ok(http.post("/v1/users/ivo/import", headers=ADMIN,
                           content=exported.text.encode()))
    assert summary["entity_edit_lanes"] == 1 and summary["created"] == 2
    names = {e["name"] for e in entities(http, "ivo")}
    assert "Maximilian" in names and "Miami" not in names and "Max" not in names


def test_another_tenant_sees_nothing_and_an_agent_only_its_lane(http: httpx.Client) -> None:
    episode(http, "lane", TAMPA)
    episode(http, "lane", "Nate practises the violin every evening.", headers=PLANNER,
            visibility="private")
    max_ = named(http, "lane", "Max")
    # another tenant: the same user id is another user, with nothing
    assert ok(http.get("/v1/users/lane/entities", headers=OTHER))["entities"] == []
    refused(http.get(f"/v1/users/lane/entities/{max_['id']}", headers=OTHER), 404, "not_found")
    refused(http.patch(f"/v1/users/lane/entities/{max_['id']}", headers=OTHER,
                       json={"name": "stolen"}), 404, "not_found")
    refused(http.post(f"/v1/users/lane/entities/{max_['id']}/forget", headers=OTHER), 404,
            "not_found")
    # the planner's private memory names the violin for the planner (and the admin) only
    assert "violin" in {e["name"] for e in entities(http, "lane", PLANNER)}
    assert "violin" not in {e["name"] for e in entities(http, "lane", COACH)}
    violin_id = named(http, "lane", "violin", PLANNER)["id"]
    refused(http.get(f"/v1/users/lane/entities/{violin_id}", headers=COACH), 404, "not_found")
    refused(http.post(f"/v1/users/lane/entities/{violin_id}/forget", headers=COACH), 404,
            "not_found")
    # an agent's edits are its own view's
    ok(http.patch(f"/v1/users/lane/entities/{max_['id']}", headers=COACH,
                  json={"name": "Coach's Max"}))
    assert "Coach's Max" in {e["name"] for e in entities(http, "lane", COACH)}
    assert "Max" in {e["name"] for e in entities(http, "lane", PLANNER)}
    assert "Max" in {e["name"] for e in entities(http, "lane", ADMIN)}
    ok(http.delete(f"/v1/users/lane/entities/{max_['id']}", headers=PLANNER))
    assert "Max" not in {e["name"] for e in entities(http, "lane", PLANNER)}
    assert "Coach's Max" in {e["name"] for e in entities(http, "lane", COACH)}
    # an admin's edit reaches every lane
    ok(http.patch(f"/v1/users/lane/entities/{named(http, 'lane', 'Tampa')['id']}",
                  headers=ADMIN, json={"name": "Tampa Bay"}))
    assert "Tampa Bay" in {e["name"] for e in entities(http, "lane", COACH)}
    # an agent's export carries its own lane only
    coach_export = http.get("/v1/users/lane/export", headers=COACH).text
    assert "Coach's Max" in coach_export and "Tampa Bay" not in coach_export
    # an agent's forget reaches what it sees: the violin stays for the planner
    view = ok(http.post(f"/v1/users/lane/entities/{named(http, 'lane', 'Tampa Bay', COACH)['id']}"
                        "/forget", headers=COACH))
    assert view["hidden"] == 1 and view["agent"] == "coach"
    assert "violin" in {e["name"] for e in entities(http, "lane", PLANNER)}
