"""Server mode against a real Milvus server: PyPI's ``milvus`` 2.3.5 standalone (no Docker).

A 2.3 server has no BM25 function, sparse vectors, nullable fields or partial upserts, and an
upsert into a partition-key collection loses the row (``strata.stores.milvus_features``):
the store learns this from the server's version before it sends a schema. The store is
checked against milvus-lite on the same rows (BM25 scored here must rank as milvus-lite's
server-side BM25 does), then the live app in server mode runs a turn → extraction → recall
→ delete → re-embed cycle with shards, extractors and the re-embed job each on a client of
their own, and no StoreOwner, then restarts on the same Redis files and server.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import ray
from live import live_app

from actors.store_owner import OWNER_NAME
from jobs import reembed
from strata.models import Collection, MemoryStatus, RecordFilter, Scope, StoredRecord
from strata.stores.embedders import HashEmbedder
from strata.stores.lexical import bm25_term_scores, normalize
from strata.stores.milvus import FlushPolicy, MilvusVectorStore
from strata.stores.redis_server import free_port

EMB = HashEmbedder(64)
ACME = {"Authorization": "Bearer key-acme"}
KEYS = {"key-acme": {"tenant": "acme", "role": "admin"}}
TEXTS = ["I am allergic to peanuts and peanut butter", "I live in Beijing 我住在北京",
         "my sister researches peanut allergies", "we adopted a dog named Biscuit",
         "the dog hates the vacuum", "I research allergy medicine at the lab",
         "Biscuit the dog is allergic to chicken", "我喜欢北京的秋天"]
QUERIES = ["peanut allergy", "dog", "北京", "research lab", "nothing matches zzz"]


@pytest.fixture(scope="session")
def milvus_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Milvus standalone server on a free port, its files under the session's tmp dir;
    its process is gone when the session ends."""
    try:
        from milvus import MilvusServer, MilvusServerConfig
    except ImportError:  # the dev extra installs it (pyproject.toml)
        pytest.skip("PyPI's `milvus` package (the standalone server) is not installed")
    server = MilvusServer(MilvusServerConfig())
    server.set_base_dir(str(tmp_path_factory.mktemp("milvus-server")))
    server.listen_port = free_port()
    try:
        server.start()
        assert server.server_proc is not None
        pid = server.server_proc.pid
        yield f"http://127.0.0.1:{server.listen_port}"
    finally:
        server.stop()
    with pytest.raises(ProcessLookupError):  # stop() waited for it: no process outlives us
        os.kill(pid, 0)


def _rec(rid: str, text: str, **payload: Any) -> StoredRecord:
    return StoredRecord(id=rid, text=text, vector=EMB.encode([text])[0].tolist(),
                        created_at=1.0, updated_at=1.0, confidence=0.9,
                        embed_model=EMB.model_id, payload=dict(payload))


@pytest.fixture(scope="module")
def stores(milvus_server: str, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[MilvusVectorStore, MilvusVectorStore]]:
    """The 2.3 server and milvus-lite holding the same rows of one scope; the server also
    holds another scope's row that shares every query term."""
    lite = MilvusVectorStore(str(tmp_path_factory.mktemp("lite") / "m.db"), prefix="cmp_",
                             flush_policy=FlushPolicy(max_unflushed_rows=10_000))
    server = MilvusVectorStore(milvus_server, prefix="cmp_")
    for store in (lite, server):
        store.ensure_collections(EMB.dim)
        store.insert(Collection.FACTS, SCOPE, [_rec(str(i), t, n=i) for i, t in
                                               enumerate(TEXTS)])
    server.insert(Collection.FACTS, OTHER, [_rec("0", "peanut dog 北京 research lab")])
    yield server, lite
    lite.close()
    server.close()


SCOPE = Scope(tenant="acme", user="ann")
OTHER = Scope(tenant="acme", user="bob")


def test_the_server_s_version_decides_the_schema(stores: tuple[MilvusVectorStore, ...]
                                                 ) -> None:
    server, lite = stores
    assert server.features.version.startswith("v2.3.")
    assert not server.supports_bm25 and lite.supports_bm25
    fields = {f["name"] for f in server.client.describe_collection("cmp_facts")["fields"]}
    assert "sparse" not in fields and {"lexical", "tokens", "scope"} <= fields


def test_bm25_scored_here_is_the_scope_s_bm25_and_finds_what_milvus_lite_finds(
        stores: tuple[MilvusVectorStore, ...]) -> None:
    """The scores are BM25 with the scope's IDF (the other scope's row, which has every query
    term, would change them); milvus-lite's server-side BM25 over the same rows finds the
    same rows with scores within 10% (its document lengths are its analyzer's)."""
    server, lite = stores
    docs = [normalize(t).split() for t in TEXTS]
    for query in QUERIES:
        here = server.search_lexical(Collection.FACTS, SCOPE, query, 5)
        there = {h.record.id: h.score for h in lite.search_lexical(Collection.FACTS, SCOPE,
                                                                    query, 5)}
        expected = bm25_term_scores(normalize(query).split(), docs)
        assert [h.score for h in here] == sorted(h.score for h in here)[::-1], query
        assert {h.record.id: h.score for h in here} == pytest.approx(
            {str(i): s for i, s in enumerate(expected) if s > 0}), query
        assert {h.record.id for h in here} == set(there), query
        for hit in here:
            assert hit.score == pytest.approx(there[hit.record.id], rel=0.1), query
    assert server.search_lexical(Collection.FACTS, SCOPE, "nothing matches zzz", 5) == []
    # a filter is applied to the scored rows, and ``k`` still fills when the best fail it
    only = RecordFilter(payload_equals={"n": 6})
    assert [h.record.id for h in server.search_lexical(Collection.FACTS, SCOPE, "dog", 5,
                                                       only)] == ["6"]
    top = server.search_lexical(Collection.FACTS, SCOPE, "dog allergic", 2)
    assert len(top) == 2 and top[0].score >= top[1].score


def test_status_changes_keep_the_rest_of_the_row(stores: tuple[MilvusVectorStore, ...]
                                                 ) -> None:
    """No partial upsert on 2.3: the row is read and written whole (text, vector, payload)."""
    server, _ = stores
    before = server.get(Collection.FACTS, SCOPE, ["3"])[0]
    assert server.set_statuses(Collection.FACTS, [(SCOPE.key, "3", MemoryStatus.SUPERSEDED),
                                                  (SCOPE.key, "gone", MemoryStatus.ACTIVE)]) == 1
    after = server.get(Collection.FACTS, SCOPE, ["3"])[0]
    assert after.status == MemoryStatus.SUPERSEDED
    assert (after.text, after.payload, after.vector) == (before.text, before.payload,
                                                         before.vector)
    assert server.count(Collection.FACTS, SCOPE) == len(TEXTS)
    assert server.get(Collection.FACTS, SCOPE, ["gone"]) == []


def test_reads_past_the_server_s_query_window_page(stores: tuple[MilvusVectorStore, ...]
                                                   ) -> None:
    """A server refuses a query whose limit passes 16,384 rows (milvus-lite does not): a
    scope larger than that is read in pages, by scans, listings and BM25 alike."""
    server, _ = stores
    big = Scope(tenant="acme", user="big")
    n = 16_384 + 16
    vector = EMB.encode(["row"])[0].tolist()
    for start in range(0, n, 4096):  # upserts: no per-batch check that the ids are new
        server.upsert(Collection.FACTS, big, [
            StoredRecord(id=str(i), text=f"row {i}" + (" zebra" if i == n - 1 else ""),
                         vector=vector) for i in range(start, min(n, start + 4096))])
    assert len(server.scan_scope(Collection.FACTS, big, limit=50_001)) == n
    assert len(server.query(Collection.FACTS, big, limit=20_000)) == n
    assert len(server.query(Collection.FACTS, big, limit=100)) == 100
    assert [h.record.id for h in server.search_lexical(Collection.FACTS, big, "zebra", 3)
            ] == [str(n - 1)]


def _ok(resp: httpx.Response) -> dict[str, Any]:
    assert resp.status_code == 200, resp.text
    return resp.json()  # type: ignore[no-any-return]


def _recall(http: httpx.Client, query: str, layers: list[str]) -> str:
    body = _ok(http.post("/v1/recall", headers=ACME,
                         json={"user_id": "sam", "query": query, "layers": layers}))
    return str(body["context"]).lower()


@pytest.mark.usefixtures("ray_session")
def test_a_turn_to_re_embed_cycle_in_server_mode(milvus_server: str, tmp_path: Path) -> None:
    started = time.monotonic()
    with (live_app(tmp_path, embedder="hash", hash_dim=64, session_shards=1, extractors=1,
                   api_keys=KEYS, milvus_uri=milvus_server) as (url, config),
          httpx.Client(base_url=url, timeout=120) as http):
        assert not config.milvus_is_lite
        with pytest.raises(ValueError):  # each component holds its own client
            ray.get_actor(OWNER_NAME, namespace="strata")
        for text in ("I'm allergic to shellfish.", "My dog Pepper loves the beach."):
            _ok(http.post("/v1/sessions/s1/turns", headers=ACME,
                          json={"user_id": "sam", "role": "user", "content": text}))
        job_id = _ok(http.post("/v1/sessions/s1/close", headers=ACME,
                               json={"user_id": "sam"}))["extraction_job"]
        deadline = time.monotonic() + 60
        while (job := _ok(http.get(f"/v1/jobs/{job_id}", headers=ACME)))["status"] != "done":
            assert job["status"] in ("queued", "running") and time.monotonic() < deadline, job
            time.sleep(0.3)
        facts = _ok(http.get("/v1/users/sam/memories", headers=ACME,
                             params={"kind": "fact"}))["memories"]
        shellfish = [f for f in facts if "shellfish" in f["text"].lower()]
        assert shellfish, facts
        assert "shellfish" in _recall(http, "what am I allergic to?", ["facts"])
        assert "pepper" in _recall(http, "what is my dog called?", ["episodes"])

        # delete: the fact leaves recall
        assert http.delete(f"/v1/users/sam/memories/{shellfish[0]['id']}",
                           headers=ACME).status_code == 200
        assert "shellfish" not in _recall(http, "what am I allergic to?", ["facts"])

        # re-embed the knowledge base (the job's own client, then the alias swap)
        _ok(http.post("/v1/knowledge/documents", headers=ACME, json={"documents": [{
            "doc_id": "ops/runbook", "title": "Runbook",
            "text": "To deploy, run the release script, then watch the dashboard."}]}))
        assert reembed.main(["--embedder", "hash"]) == 0
        store = MilvusVectorStore(milvus_server)
        try:
            assert store.physical(Collection.KNOWLEDGE) == "strata_knowledge_v2"
            assert not store.has_physical("strata_knowledge_v1")
        finally:
            store.close()
        assert "release script" in _recall(http, "how do I deploy?", ["knowledge"])
        assert "pepper" in _recall(http, "what is my dog called?", ["episodes"])

    # restart: the same Redis files and the same server; the user is cold and loads from it
    with (live_app(tmp_path, embedder="hash", hash_dim=64, session_shards=1, extractors=1,
                   api_keys=KEYS, milvus_uri=milvus_server) as (url, _),
          httpx.Client(base_url=url, timeout=120) as http):
        assert "pepper" in _recall(http, "what is my dog called?", ["episodes"])
        assert "shellfish" not in _recall(http, "what am I allergic to?", ["facts"])
        assert "release script" in _recall(http, "how do I deploy?", ["knowledge"])
        listed = _ok(http.get("/v1/users/sam/memories", headers=ACME))["memories"]
        assert any("pepper" in m["text"].lower() for m in listed), listed
        assert not any("shellfish" in m["text"].lower() for m in listed), listed
        # still writable after the restart: a new turn is recalled
        _ok(http.post("/v1/sessions/s2/turns", headers=ACME,
                      json={"user_id": "sam", "role": "user",
                            "content": "My cat Miso sleeps on the piano."}))
        window = _ok(http.get("/v1/sessions/s2/working-memory", headers=ACME,
                              params={"user_id": "sam"}))
        assert "Miso" in str(window)
    assert time.monotonic() - started < 240
