"""Issue #15 leftovers through the live HTTP API (rule extractor, hash embedder: these tests
are about ids and cascades, not meaning): a retried turn id of any age is a duplicate, and
deleting a fact takes the memories that repeat its words with it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from live import live_app

from strata.layers.working import WorkingMemory
from strata.stores.keys import SessionRef
from strata.stores.redis import QUEUE_LOW, RedisStore

AUTH = {"Authorization": "Bearer key-acme"}
KEYS = {"key-acme": {"tenant": "acme", "role": "admin"}}


class Api:
    def __init__(self, base: str, redis: RedisStore) -> None:
        self.redis = redis
        self.http = httpx.Client(base_url=base, timeout=60, headers=AUTH)

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = self.http.post(path, json=body)
        assert resp.status_code == 200, resp.text
        return resp.json()  # type: ignore[no-any-return]

    def memories(self, user: str) -> list[dict[str, Any]]:
        resp = self.http.get(f"/v1/users/{user}/memories", params={"limit": 1000})
        assert resp.status_code == 200, resp.text
        return resp.json()["memories"]  # type: ignore[no-any-return]

    def wait_drained(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while self.redis.queues.depth(QUEUE_LOW, "extractors").backlog:
            assert time.monotonic() < deadline, "extraction did not finish in time"
            time.sleep(0.3)


@pytest.fixture(scope="module")
def api(ray_session: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    with live_app(tmp_path_factory.mktemp("hardening"), embedder="hash", extractor="rules",
                  api_keys=KEYS) as (url, settings):
        client = Api(url, RedisStore(settings.redis_url, settings.redis_prefix))
        yield client
        client.redis.close()


def test_an_old_turn_id_retried_is_a_duplicate_single_and_batch(api: Api) -> None:
    api.post("/v1/sessions/long/turns", {"user_id": "rita", "role": "user",
                                          "content": "the very first turn", "turn_id": "t-0"})
    older = WorkingMemory.RECENT_IDS + 20
    api.post("/v1/sessions/long/turns/batch", {"user_id": "rita", "turns": [
        {"role": "user", "content": f"turn {i}", "turn_id": f"t-{i}"}
        for i in range(1, older + 1)]})
    single = api.post("/v1/sessions/long/turns", {"user_id": "rita", "role": "user",
                                                   "content": "the very first turn",
                                                   "turn_id": "t-0"})
    batch = api.post("/v1/sessions/long/turns/batch", {"user_id": "rita", "turns": [
        {"role": "user", "content": "turn 1", "turn_id": "t-1"},
        {"role": "user", "content": "a new one", "turn_id": "t-new"}]})
    assert single["duplicate"] and single["turn_id"] == "t-0"
    assert [a["duplicate"] for a in batch["acks"]] == [True, False]
    view = api.http.get("/v1/sessions/long/working-memory", params={"user_id": "rita"}).json()
    assert view["turn_count"] == older + 2
    wal = api.redis.sessions.read(SessionRef.parse("acme:rita:long"))
    ids = [r["turn"]["turn_id"] for _, r in wal if r["op"] == "turn"]
    assert (ids.count("t-0"), ids.count("t-1"), len(ids)) == (1, 1, older + 2)


def test_deleting_a_fact_leaves_no_memory_or_recall_with_its_text(api: Api) -> None:
    text = "allergic to peanuts"
    api.post("/v1/sessions/d1/turns", {"user_id": "dan", "role": "user",
                                        "content": f"Hi! Just so you know, I'm {text}."})
    api.post("/v1/sessions/d1/turns", {"user_id": "dan", "role": "user",
                                        "content": "My sister Jane works as a nurse in Lisbon."})
    api.post("/v1/sessions/d1/close", {"user_id": "dan"})
    api.wait_drained()
    holding = [m for m in api.memories("dan") if text in m["text"]]
    assert len(holding) >= 3, holding  # the fact, the turn's episode, the exchange
    fact = next(m for m in holding if m["kind"] == "fact")
    resp = api.http.delete(f"/v1/users/dan/memories/{fact['id']}")
    assert resp.status_code == 200, resp.text
    assert sorted(resp.json()["deleted_ids"]) == sorted(m["id"] for m in holding)
    left = api.memories("dan")
    assert not any(text in m["text"] for m in left)
    assert any("nurse" in m["text"] for m in left)  # the other turn's episode stays
    answer = api.post("/v1/recall", {"user_id": "dan", "query": "what am I allergic to?",
                                     "debug": True})
    assert text not in str(answer)
