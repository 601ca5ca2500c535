"""Habits and changes over HTTP, in English and Chinese, on the real Serve app with the
packaged MiniLM (#36): a stable habit said in a session is an active ``habit.`` fact once
the session closes (a one-off event of the same activity is not); a change of home
supersedes the old value with history, and the present-tense question gets the current
value before anything that still states the old one (the old turn's episode is marked stale:
half its weight) and stays an active memory."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from live import live_app

from strata.client import Client

KEY = "dev"


@pytest.fixture(scope="module")
def sdk(ray_session: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    with (live_app(tmp_path_factory.mktemp("habits"), embedder="minilm",
                   api_keys={KEY: {"tenant": "acme", "role": "admin"}}) as (url, _),
          Client(url, api_key=KEY) as client):
        yield client


def _close(sdk: Client, session: str, user: str) -> None:
    assert sdk.close_session(session, user, wait=True, timeout_s=90)["job"][
        "status"] == "done"


def _facts(sdk: Client, user: str) -> list[dict[str, Any]]:
    return list(sdk.memories(user, kind="fact")["memories"])


HABITS = {
    "en": ("I run every morning before work, usually around the lake.",
           "I went for a swim yesterday after lunch, the pool was packed.", "habit.run",
           "habit.swim"),
    "zh": ("我每天早上跑步，一般绕着西湖跑一圈。", "我昨天下午去游泳了，泳池里人特别多。",
           "habit.跑步", "habit.游泳"),
}


@pytest.mark.parametrize("lang", sorted(HABITS))
def test_a_stable_habit_becomes_an_active_fact_and_a_one_off_does_not(
        sdk: Client, lang: str) -> None:
    habit, one_off, key, not_key = HABITS[lang]
    user = f"habit-{lang}"
    sdk.add_turn(f"h-{lang}", user, "user", habit)
    sdk.add_turn(f"h-{lang}", user, "assistant", "Nice.")
    sdk.add_turn(f"h-{lang}", user, "user", one_off)
    _close(sdk, f"h-{lang}", user)
    facts = _facts(sdk, user)
    active = {f["key"]: f for f in facts if f["status"] == "active"}
    assert key in active, facts
    assert not any(f["key"].startswith(not_key) for f in facts), facts
    episodes = " ".join(e["text"] for e in sdk.memories(user, kind="episode")["memories"])
    assert one_off.split("，")[0].split(",")[0] in episodes  # the one-off stays an episode


CHANGES = {
    "en": ("I live in Denver, in a small flat near Cheesman Park.",
           "Big news: I moved from Denver to Austin last month.", "Where do I live now?",
           "Denver", "Austin"),
    "zh": ("我住在成都，租了一套离公司很近的小房子。", "跟你说一下，我搬到杭州了。",
           "我现在住在哪里？", "成都", "杭州"),
}


@pytest.mark.parametrize("lang", sorted(CHANGES))
def test_a_change_supersedes_with_history_and_the_current_value_ranks_first(
        sdk: Client, lang: str) -> None:
    before, change, question, old, new = CHANGES[lang]
    user = f"change-{lang}"
    sdk.add_turn(f"c1-{lang}", user, "user", before)
    _close(sdk, f"c1-{lang}", user)
    sdk.add_turn(f"c2-{lang}", user, "user", change)
    _close(sdk, f"c2-{lang}", user)
    homes = [f for f in _facts(sdk, user) if f["key"] == "location.home"]
    [current] = [f for f in homes if f["status"] == "active"]
    assert current["value"] == new, homes
    history = sdk.history(user, current["id"])
    versions = history["versions"] if isinstance(history, dict) else history
    assert [(v["value"], v["status"]) for v in versions] == [
        (old, "superseded"), (new, "active")], versions
    items = sdk.recall(user, question, session_id=f"c3-{lang}")["items"]
    shown = [(i.get("layer"), i["text"], i.get("score")) for i in items]
    naming = [i["text"] for i in items if old in i["text"] or new in i["text"]]
    # the current value comes first; the turn that stated the old one, below it if at all
    assert naming and new in naming[0], shown
    episodes = sdk.memories(user, kind="episode")["memories"]
    # the old turn is kept (for "where did I live before?"), only its weight is lower
    assert [e["status"] for e in episodes if e["text"] == before] == ["active"], episodes
