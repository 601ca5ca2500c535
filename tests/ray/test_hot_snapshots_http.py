"""Hot snapshots in the live app: an idle user's index is written to an encrypted file by the
shard's sweep, a restarted app loads that user from it (not from milvus-lite) with the same
recall, and a delete makes it go (``strata.stores.hot_snapshot``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
from live import live_app

ADMIN = {"Authorization": "Bearer admin-key"}
KEYS = {"admin-key": {"tenant": "acme", "role": "admin"}}
TEXTS = ["We adopted a beagle called Toby in March.", "My sister Ana moved to Lisbon.",
         "I signed up for a pottery class on Saturdays.", "Toby hates the vacuum cleaner."]
# the sweep runs every 30 s; a user idle 1 s is written at the next one
SETTINGS: dict[str, Any] = {"embedder": "hash", "hash_dim": 64, "session_shards": 1,
                            "extractors": 0, "api_keys": KEYS, "hot_snapshot_idle_s": 1.0,
                            "hot_persist_every_s": 0.5}


def _recall(http: httpx.Client, query: str) -> list[str]:
    resp = http.post("/v1/recall", headers=ADMIN, json={
        "user_id": "ivy", "query": query, "layers": ["episodes"], "top_k": 5})
    assert resp.status_code == 200, resp.text
    return [item["text"] for item in resp.json()["items"]]


def _hot(http: httpx.Client) -> dict[str, Any]:
    resp = http.get("/v1/admin/hot-index", headers=ADMIN)
    assert resp.status_code == 200, resp.text
    [shard] = resp.json()["shards"]
    return shard  # type: ignore[no-any-return]


def test_a_restarted_app_loads_an_idle_user_from_the_snapshot_until_a_delete(
        ray_session: None, tmp_path: Path) -> None:
    files = tmp_path / "hot-snapshots"
    with (live_app(tmp_path, **SETTINGS) as (url, _),
          httpx.Client(base_url=url, timeout=120) as http):
        made = []
        for text in TEXTS:
            resp = http.post("/v1/users/ivy/memories", headers=ADMIN,
                             json={"kind": "episode", "text": text})
            assert resp.status_code == 200, resp.text
            made.append(resp.json()["memory"])
        before = _recall(http, "what is the dog called?")
        assert any("Toby" in t for t in before), before
        deadline = time.monotonic() + 75
        while not (_hot(http)["snapshots"] >= 1 and _hot(http)["pending_access"] == 0
                   and list(files.glob("*.snap"))):
            assert time.monotonic() < deadline, _hot(http)
            time.sleep(1)
        assert b"Toby" not in next(files.glob("*.snap")).read_bytes()  # encrypted at rest

    with (live_app(tmp_path, **SETTINGS) as (url, _),
          httpx.Client(base_url=url, timeout=120) as http):
        assert _recall(http, "what is the dog called?") == before
        stats = _hot(http)
        assert stats["loads"] == 1 and stats["restored"] == 1, stats
        toby = next(m for m in made if "vacuum" in m["text"])
        assert http.delete(f"/v1/users/ivy/memories/{toby['id']}",
                           headers=ADMIN).status_code == 200
        assert not list(files.glob("*.snap"))  # stale: gone with the write
        assert not any("vacuum" in t for t in _recall(http, "what does Toby hate?"))
