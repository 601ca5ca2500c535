"""The memory rules through the HTTP API of the real Serve app with the default rule
extractor and the packaged MiniLM, as a new user would meet them: forgets, moves that
supersede, values, explicit remembers, summaries, secrets, hedged and inferred facts,
recency, reactivation and aggregation.

Each test names the rule it checks. Phrasings differ from the unit tests' and from the
labelled corpus, so a rule that only fits those sentences fails here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import ray
from live import ACME, KEYS, Api, live_app

from actors.directory import shard_name
from serve_app import main
from strata.models import utcnow
from strata.stores.redis import RedisStore


@pytest.fixture(scope="module")
def api(ray_session: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    with live_app(tmp_path_factory.mktemp("memory-rules"), embedder="minilm",
                  api_keys=KEYS) as (url, settings):
        client = Api(url, RedisStore(settings.redis_url, settings.redis_prefix))
        yield client
        client.redis.close()


def facts(api: Api, user: str, status: str = "active") -> dict[str, str]:
    return {f["key"]: f["value"] for f in api.memories(user, kind="fact", status=status)}


def texts(items: list[dict[str, Any]]) -> str:
    return json.dumps(items, ensure_ascii=False)


def create(api: Api, user: str, body: dict[str, Any],
           headers: dict[str, str] = ACME) -> dict[str, Any]:
    resp = api.http.post(f"/v1/users/{user}/memories", headers=headers, json=body)
    assert resp.status_code in (200, 201), resp.text
    return resp.json()  # type: ignore[no-any-return]


def test_a_started_shard_loads_its_model_before_the_first_turn(api: Api) -> None:
    # the first test of the module: no call has reached a shard yet; the shards' warm-up
    # builds the long-term memory (the embedding model) in the background, so the first
    # turn with an explicit "remember" does not wait ~15 s for it
    shards = []
    while True:
        try:
            shards.append(ray.get_actor(shard_name(len(shards)), namespace=main.NAMESPACE))
        except ValueError:
            break
    assert shards
    api.wait_for(lambda: all(ray.get([s.has_longterm.remote() for s in shards])), 120)
    assert all(ray.get([s.holds_model.remote() for s in shards]))


# -- forgetting is never read as remembering --------------------------------------------------
def test_a_forget_in_the_next_session_forgets_at_once_and_never_reinforces(api: Api) -> None:
    ack = api.say("fk", "fk1", "Remember this: my project codename is Falcon.")
    assert ack["intents"]["remembered"]
    assert facts(api, "fk").get("project.codename") == "Falcon"
    api.close("fk", "fk1")
    ack = api.say("fk", "fk2", "Forget my project codename, it is no longer relevant.")
    assert ack["intents"]["forgotten"] and not ack["intents"]["remembered"]
    # the closed session's extraction lands before or after the forget: either way the
    # forgotten words stay out (after it, the user's forget log leaves them out)
    api.wait_for(api.drained)
    answer = api.recall("fk", "What is my project codename?", session_id="fk3")
    assert "Falcon" not in answer["context"]


def test_a_bare_no_longer_relevant_forgets_what_was_just_said(api: Api) -> None:
    ack = api.say("nl", "nl1", "Remember that my gym is FitLife downtown.")
    assert ack["intents"]["remembered"]
    ack = api.say("nl", "nl1", "Actually, that's no longer relevant.")
    assert ack["intents"]["forgotten"] and not ack["intents"]["remembered"]
    answer = api.recall("nl", "Which gym do I go to?", session_id="nl2")
    assert "FitLife" not in answer["context"]


def test_forgetting_one_topic_leaves_an_unrelated_memory_alone(api: Api) -> None:
    api.say("fz", "fz1", "记住，我每天早上都喝乌龙茶。")
    api.say("fz", "fz1", "我在考虑明年去新西兰读研究生。")
    api.close("fz", "fz1")
    api.wait_for(api.drained)
    ack = api.say("fz", "fz2", "把我想出国读研那件事忘掉吧")
    assert ack["intents"]["forgotten"]
    tea = api.recall("fz", "我早上喝什么茶？", session_id="fz3")
    assert "乌龙茶" in tea["context"]
    study = api.recall("fz", "我打算去哪里读研究生？", session_id="fz3")
    assert "新西兰" not in study["context"]


# -- changes supersede, values are the thing itself ------------------------------------------
def test_a_move_announced_in_passing_supersedes_the_old_city(api: Api) -> None:
    api.say("mv", "mv1", "我住在北京，在一家做跨境电商的公司上班。")
    api.close("mv", "mv1")
    api.wait_for(api.drained)
    api.say("mv", "mv2", "告诉你个消息，我上个月搬到上海了。")
    assert facts(api, "mv").get("location.home") == "上海"
    assert facts(api, "mv", status="superseded").get("location.home") == "北京"
    answer = api.recall("mv", "我现在住在哪个城市？", session_id="mv3")
    lines = [i["text"] for i in answer["items"]]
    now = next(n for n, text in enumerate(lines) if "上海" in text)
    # the current city ranks above every memory that still names the old one
    assert all("北京" not in text for text in lines[:now]), lines


@pytest.mark.parametrize(("text", "key", "value"), [
    ("I moved to Lisbon last year.", "location.home", "Lisbon"),
    ("Also I like jazz music.", None, "jazz music"),
])
def test_the_value_is_the_thing_not_the_time_or_a_verb(api: Api, text: str, key: str | None,
                                                       value: str) -> None:
    user = f"val{abs(hash(text)) % 10_000}"
    api.say(user, "v1", text)
    api.close(user, "v1")
    api.wait_for(lambda: bool(api.memories(user, kind="fact")))
    stored = api.memories(user, kind="fact")
    match = [f for f in stored if f["value"] == value and (key is None or f["key"] == key)]
    assert match, stored
    if "last year" in text:
        assert match[0]["event_time"] < (utcnow() - timedelta(days=200)).isoformat()


# -- explicit remember in every phrasing is applied at once -----------------------------------
@pytest.mark.parametrize("text", [
    "Make a note that my dentist is Dr. Okafor.",
    "For future reference, my preferred airline is KLM.",
    "帮我记一下，我女儿的生日是五月八号。",
    "我的项目代号是青鸟。",
])
def test_an_explicit_remember_is_learned_at_once(api: Api, text: str) -> None:
    user = f"rm{abs(hash(text)) % 10_000}"
    ack = api.say(user, "r1", text)
    assert ack["intents"]["remembered"], ack
    assert api.memories(user, kind="fact", status="active"), "learned only at session close"


# -- the rolling summary keeps what it exists to keep -----------------------------------------
def test_the_summary_keeps_the_budget_and_the_deadline_after_many_turns(api: Api) -> None:
    api.say("sm", "sm1", "The budget for this project is 50000 yuan, and the deadline is "
                         "March 3rd.")
    for n in range(24):
        api.say("sm", "sm1", f"Okay, let's keep going with item number {n} on the list.",
                role="user" if n % 2 else "assistant")
    view = api.http.get("/v1/sessions/sm1/working-memory", headers=ACME,
                        params={"user_id": "sm"}).json()
    assert "50000" in view["summary"] and "March 3" in view["summary"], view["summary"]
    answer = api.recall("sm", "What was the budget and when is the deadline?",
                        session_id="sm1", budget_tokens=500)
    assert "50000" in answer["context"] and "March 3" in answer["context"]


# -- secrets never get through ----------------------------------------------------------------
def test_a_password_in_passing_is_never_stored(api: Api) -> None:
    secret = "Tr0ub4dor&3"
    api.say("pw", "pw1", f"The password for my bank is {secret} and I always forget it.")
    api.say("pw", "pw1", "Also, my wifi pwd: Gr33nT3a!42 if you need it.")
    api.close("pw", "pw1")
    api.wait_for(api.drained)
    stored = texts(api.memories("pw"))
    assert secret not in stored and "Gr33nT3a!42" not in stored


@pytest.mark.parametrize("body", [
    {"kind": "fact", "key": "sk_live_51HxQ2eLkdf93jDkq0aPz", "value": "billing"},
    {"kind": "fact", "key": "vendor.key", "value": "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"},
    {"kind": "episode", "text": "Ann set up the backup job.",
     "scope_tags": ["AKIAIOSFODNN7EXAMPLE"]},
    {"kind": "fact", "key": "home.address", "value": "A座1203室"},
])
def test_secrets_in_any_field_are_refused(api: Api, body: dict[str, Any]) -> None:
    resp = api.http.post("/v1/users/sec/memories", headers=ACME, json=body)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"] and resp.json()["detail"]
    assert api.memories("sec") == []


def test_a_procedure_with_a_secret_is_refused(api: Api) -> None:
    resp = api.http.post("/v1/users/sec2/memories", headers=ACME, json={
        "kind": "procedure", "key": "deploy",
        "metadata": {"when": "deploying", "steps": [
            "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "run the deploy script"]}})
    assert resp.status_code == 422, resp.text
    assert "wJalrXUtnFEMI" not in texts(api.memories("sec2", kind="procedure"))


# -- the observation area and inferred facts --------------------------------------------------
def test_a_hedged_statement_waits_and_a_plain_confirmation_promotes_it(api: Api) -> None:
    api.say("ob", "ob1", "I might move to Berlin next year.")
    api.close("ob", "ob1")
    api.wait_for(api.drained)
    assert "Berlin" not in texts(api.memories("ob", kind="fact", status="active"))
    assert "Berlin" in texts(api.memories("ob", kind="fact", status="observation"))
    api.say("ob", "ob2", "I moved to Berlin.")
    api.close("ob", "ob2")
    api.wait_for(api.drained)
    active = api.memories("ob", kind="fact", status="active")
    assert [f["value"] for f in active if f["key"] == "location.home"] == ["Berlin"]
    assert "Berlin" not in texts(api.memories("ob", kind="fact", status="observation"))


def test_an_inferred_fact_never_overrides_a_stated_one_nor_is_injected(api: Api) -> None:
    stated = create(api, "inf", {"kind": "fact", "key": "diet", "value": "vegetarian",
                                 "confidence": 0.95})
    weak = create(api, "inf", {"kind": "fact", "key": "diet", "value": "pescatarian",
                               "confidence": 0.4, "source": "inferred"})
    assert weak["action"] != "supersede", weak
    assert facts(api, "inf") == {"diet": "vegetarian"}
    guess = create(api, "inf", {"kind": "fact", "key": "hobby", "value": "rock climbing",
                                "confidence": 0.3, "source": "inferred"})
    assert guess["memory"]["status"] != "active", guess
    answer = api.recall("inf", "What does the user eat and what are their hobbies?")
    assert "vegetarian" in answer["context"] and "rock climbing" not in answer["context"]
    assert stated["memory"]["status"] == "active"


# -- time decay, reactivation, aggregation ----------------------------------------------------
def test_yesterday_s_event_outranks_a_similar_one_from_200_days_ago(api: Api) -> None:
    now = utcnow()
    # the old one is worded closer to the question: only recency can put the new one first
    for session, days, text in (
            ("tdold", 200, "My flight to Porto was delayed by three hours."),
            ("tdnew", 1, "The flight to Seville got delayed for about three hours, again.")):
        resp = api.http.post(f"/v1/sessions/{session}/turns", headers=ACME, json={
            "user_id": "td", "role": "user", "content": text,
            "created_at": (now - timedelta(days=days)).isoformat()})
        assert resp.status_code == 200, resp.text
        api.close("td", session)
    api.wait_for(lambda: len(api.memories("td", kind="episode")) >= 2)
    api.wait_for(api.drained)
    answer = api.recall("td", "My flight was delayed by three hours.", layers=["episodes"])
    order = [i["text"] for i in answer["items"] if "delayed" in i["text"]]
    assert order and "Seville" in order[0], order


def test_a_cold_memory_mentioned_again_is_active_again(api: Api) -> None:
    api.say("cd", "cd1", "I'm allergic to penicillin.")
    api.close("cd", "cd1")
    api.wait_for(lambda: bool(api.memories("cd", kind="fact")))
    fact = api.memories("cd", kind="fact")[0]
    resp = api.http.patch(f"/v1/users/cd/memories/{fact['id']}", headers=ACME,
                          json={"status": "cold"})
    assert resp.status_code == 200, resp.text
    api.say("cd", "cd2", "As I said, I'm allergic to penicillin.")
    api.close("cd", "cd2")
    api.wait_for(api.drained)
    current = [f for f in api.memories("cd", kind="fact") if f["key"] == fact["key"]]
    assert [f["status"] for f in current] == ["active"], current


def test_near_identical_complaints_aggregate_into_one_event(api: Api) -> None:
    for n in range(3):
        api.say("ag", f"ag{n}", ["页面又卡顿了，点什么都没反应。", "页面卡顿，点了半天没反应。",
                                 "页面还是卡顿，点什么都没有反应。"][n])
        api.close("ag", f"ag{n}")
        api.wait_for(api.drained)
    episodes = [e for e in api.memories("ag", kind="episode")
                if e["metadata"].get("type") != "exchange" and "卡顿" in e["text"]]
    assert len(episodes) == 1, texts(episodes)
    assert episodes[0]["metadata"]["count"] == 3


@pytest.mark.parametrize("text", ["Sure thing, sounds good to me, thanks a lot!",
                                  "哈哈哈哈，好的好的，收到，谢谢啦～",
                                  "Okay cool, got it, thank you so much!",
                                  "行吧，没问题，就这样吧。"])
def test_acknowledgements_leave_no_episode(api: Api, text: str) -> None:
    user = f"ack{abs(hash(text)) % 10_000}"
    api.say(user, "k1", text)
    api.close(user, "k1")
    api.wait_for(api.drained)
    assert api.memories(user, kind="episode") == []
