"""What a user says, over HTTP, in English and Chinese: a "forget …" hides what it names at
once, comes back after an undo, and once the grace period has passed (a few seconds here) is
deleted, its text gone from the server's files; a hedged statement confirmed in the next
turn is an active fact after the session's extraction."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from live import live_app

from strata.client import Client
from strata.errors import Conflict
from strata.layers.forgetting import wait_forgotten

KEY = "dev"
GRACE_S = 8.0
# (what the user tells, the forget, a phrase only the told memory holds, the recall query)
CASES = {
    "en": ("My gym locker is number 4471 at the Quokka Club.", "Please forget my gym locker.",
           "Quokka Club", "where is my gym locker?"),
    "zh": ("我的健身房储物柜是4471号，在袋熊俱乐部。", "请忘掉我健身房储物柜的事。",
           "袋熊俱乐部", "我的健身房储物柜在哪里？"),
}


@pytest.fixture(scope="module")
def served(ray_session: None, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[str, Path]]:
    with live_app(tmp_path_factory.mktemp("undo"), embedder="hash", hash_dim=64,
                  session_shards=1, extractors=1, forget_grace_s=GRACE_S,
                  api_keys={KEY: {"tenant": "acme", "role": "admin"}}) as (url, settings):
        yield url, settings.data_dir


def _recalled(sdk: Client, user: str, query: str) -> str:
    return str(sdk.recall(user, query, layers=["facts", "episodes"])["context"])


def _forget(sdk: Client, user: str, session: str, text: str) -> str:
    ack = sdk.add_turn(session, user, "user", text)
    assert ack["intents"]["forgotten"] and len(ack["intents"]["forgets"]) == 1, ack
    return str(ack["intents"]["forgets"][0])


@pytest.mark.parametrize("lang", sorted(CASES))
def test_a_conversational_forget_is_undone_then_final_and_gone_from_disk(
        served: tuple[str, Path], lang: str) -> None:
    url, data_dir = served
    told, forget, phrase, query = CASES[lang]
    user = f"undo-{lang}"
    with Client(url, api_key=KEY) as sdk:
        sdk.add_turn(f"{lang}-1", user, "user", told)
        assert sdk.close_session(f"{lang}-1", user, wait=True, timeout_s=60)["job"][
            "status"] == "done"
        assert phrase in _recalled(sdk, user, query)

        forget_id = _forget(sdk, user, f"{lang}-2", forget)
        assert phrase not in _recalled(sdk, user, query)  # hidden at once
        [listed] = sdk.forgets(user)["forgets"]
        assert (listed["forget_id"], listed["state"]) == (forget_id, "undoable"), listed
        undone = sdk.undo_forget(user, forget_id)
        assert undone["restored"] >= 1, undone
        assert phrase in _recalled(sdk, user, query)  # back
        assert sdk.forgets(user)["forgets"] == []

        again = _forget(sdk, user, f"{lang}-3", forget)
        assert phrase not in _recalled(sdk, user, query)
        deadline = time.monotonic() + GRACE_S + 30
        while sdk.forgets(user)["forgets"][0]["state"] != "final":
            assert time.monotonic() < deadline, sdk.forgets(user)
            time.sleep(0.5)
        with pytest.raises(Conflict):
            sdk.undo_forget(user, again)
        assert phrase not in _recalled(sdk, user, query)
        listed_texts = " ".join(m["text"] for m in sdk.memories(user)["memories"])
        assert phrase not in listed_texts  # deleted, not hidden
    check = wait_forgotten(data_dir, phrase, bound_s=60)
    assert check.forgotten and check.files_scanned > 0, check


def test_bad_forget_ids_are_refused_and_unknown_ones_are_not_found(
        served: tuple[str, Path]) -> None:
    url, _ = served
    http = httpx.Client(base_url=url, timeout=30, headers={"Authorization": f"Bearer {KEY}"})
    bad = http.post("/v1/users/nobody/forgets/not-an-id/undo")
    assert bad.status_code == 422 and bad.json()["error"], bad.text
    missing = http.post(f"/v1/users/nobody/forgets/{'0' * 20}/undo")
    assert missing.status_code == 404 and missing.json()["error"], missing.text
    assert http.get("/v1/users/nobody/forgets").json() == {"forgets": []}


CONFIRMED = {
    "en": ("I might move to Berlin next year.", "Yes, it's settled, we're going.",
           "location.home", "Berlin"),
    "zh": ("我好像对花生过敏。", "是的，医生确认了。", "constraint.allergy:花生", "allergic"),
}


@pytest.mark.parametrize("lang", sorted(CONFIRMED))
def test_a_confirmed_hedge_is_an_active_fact(served: tuple[str, Path], lang: str) -> None:
    url, _ = served
    hedged, confirmation, key, value = CONFIRMED[lang]
    user = f"confirm-{lang}"
    with Client(url, api_key=KEY) as sdk:
        for role, text in (("user", hedged), ("assistant", "OK."), ("user", confirmation)):
            sdk.add_turn(f"c-{lang}", user, role, text)
        assert sdk.close_session(f"c-{lang}", user, wait=True, timeout_s=60)["job"][
            "status"] == "done"
        facts = [f for f in sdk.memories(user, kind="fact")["memories"] if f["key"] == key]
        assert [f["value"] for f in facts if f["status"] == "active"] == [value], facts
