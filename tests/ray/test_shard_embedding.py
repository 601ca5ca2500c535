"""``STRATA_SHARD_EMBEDDING=embedder``: the session shard holds no model; its writes, the hot
index's token vectors and its recalls' queries are embedded by the shared Embedder
deployment (``actors/shared_embedder.py``), and recall finds what was written."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import ray
from live import ACME, KEYS, Api, live_app

from actors.directory import shard_name
from serve_app import main
from strata.stores.redis import RedisStore


@pytest.fixture(scope="module")
def api(ray_session: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    with live_app(tmp_path_factory.mktemp("shared"), embedder="minilm", api_keys=KEYS,
                  shard_embedding="embedder", session_shards=1) as (url, settings):
        client = Api(url, RedisStore(settings.redis_url, settings.redis_prefix))
        yield client
        client.redis.close()


def test_what_the_shard_writes_is_recalled_and_the_shard_holds_no_model(api: Api) -> None:
    # extracted at the session's close, written by the shard
    api.say("ann", "a1", "Hi! Just so you know, I'm allergic to peanuts.")
    api.close("ann", "a1")
    api.wait_for(lambda: any("peanut" in m["text"] for m in api.memories("ann", kind="fact")))
    # explicit: written before the turn call returns
    assert api.say("ann", "a2", "Remember that my locker code word is Marmalade.")[
        "intents"]["remembered"]
    # through the memories API
    created = api.http.post("/v1/users/ann/memories", headers=ACME, json={
        "kind": "fact", "key": "diet", "value": "vegetarian", "text": "Ann is vegetarian"})
    assert created.status_code == 200, created.text

    assert "allergic to peanuts" in api.recall("ann", "What food am I allergic to?")["context"]
    assert "vegetarian" in api.recall("ann", "What diet does Ann follow?")["context"]
    assert "Marmalade" in api.recall("ann", "what is my locker code word?")["context"]

    shard = ray.get_actor(shard_name(0), namespace=main.NAMESPACE)
    assert ray.get(shard.holds_model.remote()) is False
