"""One set of assertions, run against the in-memory double and real milvus-lite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from strata.errors import Conflict, InvalidInput, VectorStoreError
from strata.models import Collection, RecordFilter, Scope, StoredRecord, is_visible
from strata.stores.embedders import HashEmbedder
from strata.stores.hot import HotIndexStore
from strata.stores.milvus import FlushPolicy, MilvusVectorStore
from strata.stores.ports import IdScorer, VectorStore, cosine, score_ids
from strata.testing.fake_vectors import FakeVectorStore

EMB = HashEmbedder(64)
FACTS = Collection.FACTS


def rec(rid: str, text: str, status: str = "active", created: float = 1.0, **payload: object
        ) -> StoredRecord:
    return StoredRecord(id=rid, text=text, vector=EMB.encode([text])[0].tolist(), status=status,
                        created_at=created, updated_at=created, confidence=0.9,
                        embed_model=EMB.model_id, payload=dict(payload))


@pytest.fixture(scope="module", params=["memory", "milvus-lite", "hot/memory",
                                        "hot/milvus-lite"])
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[VectorStore]:
    """The double, real milvus-lite, and the shard's hot index over each of them."""
    if request.param.endswith("/memory") or request.param == "memory":
        impl: VectorStore = FakeVectorStore()
    else:
        path = tmp_path_factory.mktemp("milvus") / "m.db"
        impl = MilvusVectorStore(str(path), prefix="c_",
                                 flush_policy=FlushPolicy(max_unflushed_rows=10_000))
    if request.param.startswith("hot/"):
        impl = HotIndexStore(impl, EMB.dim, tokens=lambda: EMB)
    impl.ensure_collections(EMB.dim)
    yield impl
    impl.close()


@pytest.fixture
def store(backend: VectorStore, request: pytest.FixtureRequest) -> VectorStore:
    """The module's backend; each test gets tenants of its own (set as globals below)."""
    global A, B, OTHER_TENANT_A
    tag = request.node.name.split("[")[0].replace("_", "-")[-40:]
    A = Scope(tenant=f"acme-{tag}", user="alice")
    B = Scope(tenant=f"acme-{tag}", user="bob")
    OTHER_TENANT_A = Scope(tenant=f"globex-{tag}", user="alice")
    return backend


A = B = OTHER_TENANT_A = Scope(tenant="unset", user="unset")


def seed(store: VectorStore) -> None:
    store.insert(FACTS, A, [
        rec("1", "I am allergic to peanuts", key="allergy"),
        rec("2", "I live in Beijing 我住在北京", created=5.0, key="city"),
        rec("3", "favourite colour is green", status="superseded", created=3.0),
    ])
    store.insert(FACTS, B, [rec("1", "bob secret: allergic to shellfish peanuts", key="allergy")])
    store.insert(FACTS, OTHER_TENANT_A, [rec("9", "globex alice likes peanuts")])


def test_get_and_query_stay_in_scope(store: VectorStore) -> None:
    seed(store)
    got = store.get(FACTS, A, ["1", "9"])
    assert [r.id for r in got] == ["1"]
    assert got[0].text == "I am allergic to peanuts"
    assert got[0].payload == {"key": "allergy"}
    expected = EMB.encode(["I am allergic to peanuts"])[0]
    assert got[0].vector is not None and abs(sum(
        a * b for a, b in zip(got[0].vector, expected, strict=True)) - 1.0) < 1e-4
    assert {r.id for r in store.query(FACTS, A)} == {"1", "2", "3"}
    assert {r.text for r in store.query(FACTS, B)} == {"bob secret: allergic to shellfish peanuts"}
    assert store.count(FACTS, A) == 3 and store.count(FACTS, B) == 1


def test_same_id_in_two_scopes_never_collides(store: VectorStore) -> None:
    seed(store)
    store.upsert(FACTS, B, [rec("1", "bob overwrites id 1")])
    assert store.get(FACTS, A, ["1"])[0].text == "I am allergic to peanuts"
    assert store.get(FACTS, B, ["1"])[0].text == "bob overwrites id 1"


def test_filters(store: VectorStore) -> None:
    seed(store)
    active = store.query(FACTS, A, RecordFilter(statuses=["active"]))
    assert {r.id for r in active} == {"1", "2"}
    recent = store.query(FACTS, A, RecordFilter(created_after=4.0))
    assert [r.id for r in recent] == ["2"]
    keyed = store.query(FACTS, A, RecordFilter(payload_equals={"key": "city"}))
    assert [r.id for r in keyed] == ["2"]


def test_event_time_filter(store: VectorStore) -> None:
    store.upsert(FACTS, A, [
        rec("m1", "cooked on the ninth", event_time="2022-11-09T13:40:00Z"),
        rec("m2", "cooked on the tenth", event_time="2022-11-10T00:00:00+00:00"),
        rec("m3", "cooked in October", event_time="2022-10-31T23:59:00Z"),
        rec("m4", "cooked at no known time")])
    november = RecordFilter(event_from="2022-11-01", event_before="2022-11-10")
    assert {r.id for r in store.query(FACTS, A, november)} == {"m1"}
    assert {r.id for r in store.query(FACTS, A, RecordFilter(event_from="2022-11-01"))} == {
        "m1", "m2"}
    assert {r.id for r in store.query(FACTS, A, RecordFilter(event_before="2022-11-01"))} == {
        "m3"}
    vec = EMB.encode(["cooked"])[0].tolist()
    assert {h.record.id for h in store.search_hybrid(FACTS, A, vec, "cooked", 10,
                                                     november)} == {"m1"}
    with pytest.raises(ValueError):
        RecordFilter(event_from="9 November")  # a day, as ISO: nothing else reaches Milvus


def test_searches_never_cross_scopes(store: VectorStore) -> None:
    seed(store)
    vec = EMB.encode(["peanuts"])[0].tolist()
    for hits in (store.search_dense(FACTS, A, vec, 10),
                 store.search_lexical(FACTS, A, "peanuts", 10),
                 store.search_hybrid(FACTS, A, vec, "peanuts", 10)):
        texts = [h.record.text for h in hits]
        assert texts, "the scope's own peanut fact must be found"
        assert all("bob" not in t and "globex" not in t for t in texts)
    lexical = store.search_lexical(FACTS, A, "peanuts", 10)
    assert lexical[0].record.id == "1"
    assert store.search_lexical(FACTS, A, "shellfish", 10) == []


def test_lexical_matches_chinese_and_case(store: VectorStore) -> None:
    seed(store)
    assert [h.record.id for h in store.search_lexical(FACTS, A, "北京", 5)] == ["2"]
    assert [h.record.id for h in store.search_lexical(FACTS, A, "PEANUTS", 5)] == ["1"]


def test_lexical_stems_english_and_ignores_stop_words(store: VectorStore) -> None:
    store.insert(FACTS, A, [rec("r1", "Researching adoption agencies this week"),
                            rec("r2", "The weather was what it was")])
    assert [h.record.id for h in store.search_lexical(FACTS, A, "What did she research?", 5)
            ] == ["r1"]
    assert [h.record.id for h in store.search_lexical(FACTS, A, "agency", 5)] == ["r1"]
    assert store.search_lexical(FACTS, A, "what was the", 5) == []


def test_nested_payload_filters(store: VectorStore) -> None:
    store.insert(FACTS, A, [rec("e1", "went hiking", metadata={"type": "exchange"}),
                            rec("e2", "went hiking again", metadata={"type": "event"})])
    vec = EMB.encode(["hiking"])[0].tolist()
    only = RecordFilter(payload_equals={"metadata.type": "exchange"})
    not_ = RecordFilter(payload_not_equals={"metadata.type": "exchange"})
    assert [r.id for r in store.query(FACTS, A, only)] == ["e1"]
    assert {h.record.id for h in store.search_hybrid(FACTS, A, vec, "hiking", 5, not_)} == {"e2"}
    with pytest.raises(ValueError):
        RecordFilter(payload_equals={"a.b.c": 1})


def test_visibility_filter_shows_each_agent_what_it_may_see(store: VectorStore) -> None:
    """``RecordFilter.visible_to`` has one meaning on every backend (``is_visible``)."""
    store.insert(FACTS, A, [
        rec("old", "hiking before agents existed"),
        rec("shared", "hiking shared by planner", agent="planner", visibility="shared"),
        rec("mine", "hiking private to planner", agent="planner", visibility="private"),
        rec("named", "hiking planner and coach", agent="planner", visibility="agents",
            shared_with=["coach"]),
        rec("theirs", "hiking private to coach", agent="coach", visibility="private")])
    vec = EMB.encode(["hiking"])[0].tolist()
    expected = {"": {"old", "shared"}, "planner": {"old", "shared", "mine", "named"},
                "coach": {"old", "shared", "named", "theirs"},
                "stranger": {"old", "shared"}}
    for viewer, ids in expected.items():
        flt = RecordFilter(visible_to=viewer)
        assert {r.id for r in store.query(FACTS, A, flt)} == ids, viewer
        hits = store.search_hybrid(FACTS, A, vec, "hiking", 10, flt)
        assert {h.record.id for h in hits} == ids, viewer
        assert {h.record.id for h in store.search_dense(FACTS, A, vec, 10, flt)} == ids
    assert len(store.query(FACTS, A, RecordFilter())) == 5  # no filter: everything


def test_search_filter_by_status(store: VectorStore) -> None:
    seed(store)
    vec = EMB.encode(["favourite colour"])[0].tolist()
    hits = store.search_dense(FACTS, A, vec, 10, RecordFilter(statuses=["active"]))
    assert "3" not in {h.record.id for h in hits}


def test_hybrid_reports_score_parts(store: VectorStore) -> None:
    seed(store)
    vec = EMB.encode(["allergic to peanuts"])[0].tolist()
    top = store.search_hybrid(FACTS, A, vec, "allergic peanuts", 3)[0]
    assert top.record.id == "1"
    assert set(top.parts) == {"dense", "lexical"}


def far_and_near(store: VectorStore) -> tuple[list[float], dict[str, list[float]]]:
    """500 records with seeded random vectors; the 30 farthest from the query say "alpha"."""
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(500, EMB.dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    query = rng.normal(size=EMB.dim).astype(np.float32)
    far = set(np.argsort(vectors @ query)[:30].tolist())
    store.insert(FACTS, A, [StoredRecord(
        id=f"r{i}", text="alpha report" if i in far else f"beta note {i}",
        vector=vectors[i].tolist(), status="active", created_at=1.0, updated_at=1.0,
        confidence=0.9, embed_model=EMB.model_id) for i in range(500)])
    store.flush(FACTS)
    return query.tolist(), {f"r{i}": vectors[i].tolist() for i in range(500)}


def test_hybrid_parts_are_exact_for_hits_far_from_the_query(store: VectorStore) -> None:
    # lexical hits far from the query vector get their true cosine, not a missing part
    # (an id-restricted ANN search on milvus-lite left a third of them out)
    query, vectors = far_and_near(store)
    hits = store.search_hybrid(FACTS, A, query, "alpha", 40)
    far = [h for h in hits if h.record.text == "alpha report"]
    assert len(far) >= 10
    for hit in hits:
        assert hit.parts["dense"] == pytest.approx(cosine(vectors[hit.record.id], query),
                                                   abs=1e-4)
    assert all(h.parts["dense"] < 0 for h in far)
    assert all(h.parts["lexical"] > 0 for h in far)


def test_score_ids_gives_both_similarities_of_the_named_records(store: VectorStore) -> None:
    query, vectors = far_and_near(store)
    retired = store.get(FACTS, A, ["r1"])[0]
    store.upsert(FACTS, A, [retired.model_copy(update={"status": "superseded"})])
    alpha = [r.id for r in store.query(FACTS, A, RecordFilter(statuses=["active"]), 500)
             if r.text == "alpha report"]
    wanted = ["r0", "r1", "r2", "nope", *alpha[:3]]
    hits = {h.record.id: h for h in score_ids(store, FACTS, A, query, "alpha", wanted,
                                              ["active"])}
    assert "nope" not in hits and "r1" not in hits  # unknown, and not active
    assert set(hits) >= {"r0", "r2"}
    for rid, hit in hits.items():
        assert hit.parts["dense"] == pytest.approx(cosine(vectors[rid], query), abs=1e-4)
        assert (hit.parts["lexical"] > 0) == (hit.record.text == "alpha report")
    assert score_ids(store, FACTS, B, query, "alpha", wanted, ["active"]) == []


def test_a_store_that_scores_its_own_rows_gives_the_generic_answer(store: VectorStore) -> None:
    """The hot index's ``IdScorer`` path: the cosine from the stored vector and the BM25 of
    a lexical search restricted to the ids, as ``score_ids`` computes them from records."""
    if not isinstance(store, IdScorer):
        pytest.skip("only the hot index scores its own rows")
    query, _ = far_and_near(store)
    store.insert(FACTS, A, [rec("v1", "alpha report", visibility="private", agent="planner")])
    ids = [*[r.id for r in store.query(FACTS, A, None, 500)][:40], "v1", "nope"]
    for statuses, viewer in ((None, None), (["active"], "planner"), (["active"], "coder")):
        records = [r for r in store.get(FACTS, A, ids) if statuses is None or r.status in statuses]
        records = [r for r in records if viewer is None or is_visible(r.payload, viewer)]
        lexical = {h.record.id: h.score for h in store.search_lexical(
            FACTS, A, "alpha report", len(ids), RecordFilter(ids=[r.id for r in records]))}
        hits = score_ids(store, FACTS, A, query, "alpha report", ids, statuses, viewer)
        assert [h.record.id for h in hits] == [r.id for r in records]
        for hit, record in zip(hits, records, strict=True):
            assert record.vector is not None
            assert hit.parts["dense"] == pytest.approx(cosine(record.vector, query), abs=1e-5)
            assert hit.parts["lexical"] == pytest.approx(lexical.get(record.id, 0.0), abs=1e-5)
            assert hit.record.text == record.text and hit.record.payload == record.payload
    assert ("v1" in {h.record.id for h in score_ids(store, FACTS, A, query, "alpha", ids, None,
                                                     "coder")}) is False


def test_insert_conflict_and_bad_vectors(store: VectorStore) -> None:
    seed(store)
    with pytest.raises(Conflict):
        store.insert(FACTS, A, [rec("1", "duplicate")])
    with pytest.raises(InvalidInput):
        store.upsert(FACTS, A, [StoredRecord(id="x", text="no vector")])
    with pytest.raises(InvalidInput):
        store.upsert(FACTS, A, [StoredRecord(id="x", text="short", vector=[1.0, 0.0])])
    assert store.get(FACTS, A, ["x"]) == []
    assert store.get(FACTS, A, ["1"])[0].text == "I am allergic to peanuts"


def test_delete_and_delete_scope(store: VectorStore) -> None:
    seed(store)
    assert store.delete(FACTS, A, ["1", "nope"]) == 1
    assert store.get(FACTS, A, ["1"]) == []
    assert store.get(FACTS, B, ["1"]) != []
    store.delete_scope(FACTS, A)
    assert store.count(FACTS, A) == 0
    assert store.count(FACTS, B) == 1
    assert store.count(FACTS, OTHER_TENANT_A) == 1


def test_collections_are_separate(store: VectorStore) -> None:
    seed(store)
    assert store.count(Collection.EPISODES, A) == 0
    assert store.query(Collection.KNOWLEDGE, Scope.shared("acme")) == []


def test_milvus_rejects_reopen_with_other_dimension(tmp_path: Path) -> None:
    first = MilvusVectorStore(str(tmp_path / "d.db"))
    first.ensure_collections(64)
    first.close()
    again = MilvusVectorStore(str(tmp_path / "d.db"))
    with pytest.raises(InvalidInput, match="re-embed"):
        again.ensure_collections(32)
    again.close()


def test_milvus_reopen_keeps_unflushed_rows_and_serves_searches(tmp_path: Path) -> None:
    scope = Scope(tenant="t", user="u")
    first = MilvusVectorStore(str(tmp_path / "r.db"),
                              flush_policy=FlushPolicy(max_unflushed_rows=10_000))
    first.ensure_collections(EMB.dim)
    first.insert(FACTS, scope, [rec("1", "I am allergic to peanuts")])
    first.close()
    again = MilvusVectorStore(str(tmp_path / "r.db"))
    again.ensure_collections(EMB.dim)
    assert [h.record.id for h in again.search_lexical(FACTS, scope, "peanuts", 3)] == ["1"]
    again.close()


def test_flush_policy_threshold_and_age() -> None:
    policy = FlushPolicy(max_unflushed_rows=10, max_age_s=2.0)
    policy.record_write(FACTS, 4, now=100.0)
    assert policy.due(now=101.0) == []
    assert policy.due(now=102.5) == [FACTS]  # the oldest unflushed write is 2.5 s old
    policy.record_write(FACTS, 6, now=101.0)
    assert policy.due(now=100.5) == [FACTS]  # 10 rows: the threshold
    policy.flushed(FACTS)
    assert policy.due(now=200.0) == [] and policy.unflushed(FACTS) == 0


def test_milvus_flushes_when_the_threshold_is_reached(tmp_path: Path) -> None:
    scope = Scope(tenant="t", user="u")
    store = MilvusVectorStore(str(tmp_path / "f.db"),
                              flush_policy=FlushPolicy(max_unflushed_rows=5, max_age_s=3600))
    store.ensure_collections(EMB.dim)
    store.upsert(FACTS, scope, [rec(str(i), f"fact {i}") for i in range(4)])
    assert store.flush_stats["flushes"] == 0 and store.flush_due() == []
    store.upsert(FACTS, scope, [rec("4", "fact 4")])
    assert store.flush_stats["flushes"] == 1
    store.close()


def test_a_milvus_error_does_not_echo_the_filter(tmp_path: Path) -> None:
    """Milvus quotes the expression it could not parse; the error a client sees does not."""
    store = MilvusVectorStore(str(tmp_path / "e.db"))
    store.ensure_collections(EMB.dim)
    with pytest.raises(VectorStoreError) as caught:
        store.query(FACTS, Scope(tenant="t", user="u"),
                    RecordFilter(payload_equals={"key": "seat\x00x"}), 10)
    assert caught.value.detail.startswith("milvus query failed")
    assert "scope" not in caught.value.detail and "seat" not in caught.value.detail
    store.close()


def test_milvus_a_delete_racing_a_flush_holds(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The StoreOwner serves many calls at once while its ticker and the forgetting purge
    flush. milvus-lite swaps its unflushed table outside its own lock, so a delete by filter
    whose read straddled a flush missed the rows being flushed, and a deleted user's memories
    came back. Here the flush is started while the delete is reading, every time."""
    import threading
    import time

    engine = pytest.importorskip("milvus_lite.engine.collection",
                                 reason="milvus-lite without the 3.x engine module")
    Engine = engine.Collection
    if not hasattr(Engine, "_read_snapshot"):
        pytest.skip("this milvus-lite has no Collection._read_snapshot to slow down")

    store = MilvusVectorStore(str(tmp_path / "m.db"), prefix="c_",
                              flush_policy=FlushPolicy(max_unflushed_rows=10_000))
    store.ensure_collections(EMB.dim)
    scope = Scope(tenant="acme", user="racer")
    store.insert(FACTS, scope, [rec(f"r{i}", f"row {i}") for i in range(4)])  # unflushed
    reading = threading.Event()
    taken = Engine._read_snapshot

    def slow_snapshot(self: object) -> object:  # the read has its segments, then is late
        snapshot = taken(self)
        reading.set()
        time.sleep(0.2)
        return snapshot

    def flush_while_reading() -> None:
        reading.wait(10)
        store.flush(FACTS)

    monkeypatch.setattr(Engine, "_read_snapshot", slow_snapshot)
    flusher = threading.Thread(target=flush_while_reading)
    flusher.start()
    deleted = store.delete(FACTS, scope, ["r0", "r1"])
    flusher.join()
    monkeypatch.undo()
    assert deleted == 2
    assert [r.id for r in store.get(FACTS, scope, ["r0", "r1", "r2", "r3"])] == ["r2", "r3"]
    store.close()
