"""The shard's hot index stays coherent through every write path, asserted through recall.

The durable store is the in-memory double here (its contract with milvus-lite is shared in
``test_vector_store_contract.py``, which also runs the hot index over both); the shard is
the real ``SessionShardService`` over the real Redis the tests start.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from strata.errors import VectorStoreError
from strata.extract.exchanges import exchange_candidates
from strata.extract.rules import RuleExtractor
from strata.layers.decay import DecayPolicy
from strata.layers.memories import LongTermMemory
from strata.layers.memory_models import MemoryCreate, MemoryPatch
from strata.layers.records import memory_id, to_record
from strata.layers.summarize import RuleSummarizer
from strata.models import (
    Collection,
    MemoryItem,
    MemoryKind,
    RecallRequest,
    Role,
    Scope,
    StoredRecord,
    Turn,
    utcnow,
)
from strata.recall.assembly import assemble
from strata.recall.late import embed_queries, pack_tokens, stored_maxima, unpack_tokens
from strata.recall.recipes import DEFAULT
from strata.recall.speakers import without_speakers
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.hot import HotIndexStore
from strata.stores.redis import RedisStore
from strata.testing.fake_vectors import FakeVectorStore

U = Scope(tenant="t", user="u")
EMB = HashEmbedder(64)


class CountingEmbedder(HashEmbedder):
    """Counts the texts whose token vectors are computed."""

    def __init__(self) -> None:
        super().__init__(64)
        self.token_texts = 0

    def token_vectors(self, texts: Sequence[str]) -> list[npt.NDArray[np.float32]]:
        self.token_texts += len(texts)
        return super().token_vectors(texts)


class CountingStore(FakeVectorStore):
    """The durable double, counting the calls that reach it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[str, int] = {}

    def __getattribute__(self, name: str) -> Any:
        if name in {"get", "query", "upsert", "insert", "search_dense", "search_lexical",
                    "search_hybrid", "scan_scope", "set_payloads", "delete"}:
            calls = object.__getattribute__(self, "calls")
            calls[name] = calls.get(name, 0) + 1
        return object.__getattribute__(self, name)


@pytest.fixture
def durable() -> CountingStore:
    store = CountingStore()
    store.ensure_collections(64)
    return store


def make_shard(redis_store: RedisStore, durable: FakeVectorStore,
               max_bytes: int = 64 * 2**20, embedder: HashEmbedder = EMB
               ) -> SessionShardService:
    hot = HotIndexStore(durable, 64, tokens=lambda: embedder, max_bytes=max_bytes)
    lt = LongTermMemory(hot, embedder)
    return SessionShardService(0, Settings(), redis_store, RuleSummarizer(), longterm=lambda: lt)


@pytest.fixture
def shard(redis_store: RedisStore, durable: CountingStore) -> SessionShardService:
    return make_shard(redis_store, durable)


def hot(shard: SessionShardService) -> HotIndexStore:
    vectors = shard.longterm.vectors
    assert isinstance(vectors, HotIndexStore)
    return vectors


def recall(shard: SessionShardService, query: str, scope: Scope = U, **kw: Any) -> list[str]:
    """A recall the way the ingress makes it: the shard's answer, then ``assemble``."""
    request = RecallRequest(user_id=scope.user, query=query, layers=["facts", "episodes"], **kw)
    embedded = embed_queries(EMB, [query])[0]
    answer = shard.recall_memory(scope, request, lambda: embedded)
    response = assemble(request, answer.decision, answer.working, answer.found, DEFAULT,
                        lambda: answer.most_used)
    return [i.text for i in response.items]


def episode(text: str, scope: Scope = U, days_ago: float = 0.0) -> MemoryItem:
    when = utcnow() - timedelta(days=days_ago)
    return MemoryItem(id=memory_id(scope, "s", "episode", text), kind=MemoryKind.EPISODE,
                      text=text, created_at=when, updated_at=when, event_time=when)


def test_stored_token_vectors_round_trip() -> None:
    vectors = EMB.token_vectors(["a pottery class on Saturday"])[0]
    rows, scale = unpack_tokens(pack_tokens(vectors))
    query = EMB.token_vectors(["pottery"])[0]
    exact = (query @ vectors.T).max(axis=1)
    assert np.allclose(stored_maxima(query, rows, scale), exact, atol=0.02)


def test_a_cold_user_is_served_on_first_touch_without_encoding(
        redis_store: RedisStore, durable: CountingStore) -> None:
    writer = make_shard(redis_store, durable)
    writer.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE,
                                         text="signed up for a pottery class on Saturday"))
    counting = CountingEmbedder()
    scans = durable.calls["scan_scope"]
    fresh = make_shard(redis_store, durable, embedder=counting)  # a restarted shard
    assert not hot(fresh).is_hot(U)
    assert any("pottery" in t for t in recall(fresh, "pottery class"))
    assert counting.token_texts == 0  # the stored token vectors were loaded, not re-encoded
    assert hot(fresh).stats().loads == 1 and durable.calls["scan_scope"] == scans + 3


def test_a_superseded_fact_leaves_recall(shard: SessionShardService) -> None:
    made = shard.create_memory(U, MemoryCreate(kind=MemoryKind.FACT, key="location.home",
                                               value="Beijing"))
    assert any("Beijing" in t for t in recall(shard, "where is home location"))
    shard.update_memory(U, made["memory"]["id"], MemoryPatch(value="Shanghai"))
    texts = recall(shard, "where is home location")
    assert any("Shanghai" in t for t in texts) and not any("Beijing" in t for t in texts)


def test_a_deleted_memory_and_a_forgotten_user_leave_recall(
        shard: SessionShardService) -> None:
    a = shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE,
                                            text="reported the invoice export is broken"))
    shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE,
                                        text="asked about invoice colours"))
    assert len(recall(shard, "invoice export broken colours")) == 2
    shard.delete_memory(U, a["memory"]["id"])
    assert recall(shard, "invoice export broken colours") == ["asked about invoice colours"]
    shard.delete_user(U)
    assert recall(shard, "invoice export broken colours") == []
    assert hot(shard).stats().memories == 0


def test_a_forget_intent_applies_to_the_index_at_once(shard: SessionShardService) -> None:
    shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE,
                                        text="the invoice export is broken again"))
    assert recall(shard, "invoice export problem")
    ack = shard.append_turn(U, "s2", "user", "the invoice export problem doesn't matter anymore")
    assert ack.intents.forgotten
    assert not any("invoice export is broken" in t for t in recall(shard, "invoice export"))


def test_the_decay_sweep_cools_the_indexed_rows(shard: SessionShardService,
                                                durable: CountingStore) -> None:
    old, new = episode("went hiking in the alps", days_ago=200), episode("went hiking today")
    durable.upsert(Collection.EPISODES, U, [to_record(m, EMB.encode([m.text])[0].tolist(),
                                                      EMB.model_id) for m in (old, new)])
    recall(shard, "hiking")  # the user is loaded before the sweep
    assert [m.text for m in shard.longterm.list_items(U, status="active")] == [
        "went hiking today", "went hiking in the alps"]
    counts = shard.sweep_decay(U, DecayPolicy())
    assert counts.cold == 1
    assert [m.text for m in shard.longterm.list_items(U, status="cold")] == [
        "went hiking in the alps"]
    assert "went hiking in the alps" not in recall(shard, "hiking in the alps",
                                                   include_cold=False)


def test_reinforcement_is_applied_at_once_and_persisted_in_one_batch(
        shard: SessionShardService, durable: CountingStore) -> None:
    made = shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE,
                                               text="booked a flight to Lisbon"))
    recall(shard, "flight to Lisbon")
    before = dict(durable.calls)
    for _ in range(3):
        assert recall(shard, "flight to Lisbon")
        shard.reinforce(U, [made["memory"]["id"]])
    assert durable.calls == before  # three recalls and reinforcements: no durable call
    item = shard.longterm.list_items(U, MemoryKind.EPISODE)[0]
    assert item.access_count == 3 and item.last_access_at is not None
    assert shard.persist_hot() == 1 and durable.calls["set_payloads"] == 1
    stored = durable.get(Collection.EPISODES, U, [made["memory"]["id"]])[0]
    assert stored.payload["access_count"] == 3 and stored.tokens


def test_a_killed_shard_rebuilds_from_the_durable_store(
        redis_store: RedisStore, durable: CountingStore, shard: SessionShardService) -> None:
    made = shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE,
                                               text="adopted a cat named Miso"))
    recall(shard, "cat")
    shard.reinforce(U, [made["memory"]["id"]])
    shard.persist_hot()  # what the shard does every second
    shard.reinforce(U, [made["memory"]["id"]])  # then killed before the next second
    again = make_shard(redis_store, durable)
    assert recall(again, "cat named Miso") == ["adopted a cat named Miso"]
    assert again.longterm.list_items(U, MemoryKind.EPISODE)[0].access_count == 1


def test_eviction_holds_the_cap_and_evicted_users_reload(
        redis_store: RedisStore, durable: CountingStore) -> None:
    users = [Scope(tenant="t", user=f"u{i}") for i in range(4)]
    for scope in users:
        durable.upsert(Collection.EPISODES, scope, [
            to_record(m, EMB.encode([m.text])[0].tolist(), EMB.model_id)
            for m in (episode(f"{scope.user} note {n} about gardening", scope)
                      for n in range(50))])
    one_user = make_shard(redis_store, durable)
    recall(one_user, "gardening", users[0])
    per_user = hot(one_user).stats().bytes
    cap = int(per_user * 2.5)
    shard = make_shard(redis_store, durable, max_bytes=cap)
    for scope in users:
        assert len(recall(shard, "gardening", scope, top_k=3)) == 3
        stats = hot(shard).stats()
        assert stats.bytes <= cap and stats.users <= 2
    assert hot(shard).stats().evictions == 2
    assert not hot(shard).is_hot(users[0])
    assert all(users[0].user in t for t in recall(shard, "gardening", users[0], top_k=3))


class RecordingUpserts(CountingStore):
    """Records each upsert call that reaches the durable store: (collection, rows)."""

    def __init__(self) -> None:
        super().__init__()
        self.upserts: list[tuple[Collection, int]] = []

    def upsert(self, collection: Collection, scope: Scope,
               records: Sequence[StoredRecord]) -> None:
        self.upserts.append((collection, len(records)))
        super().upsert(collection, scope, records)


class FailingUpserts(CountingStore):
    """A durable store whose upserts fail (a Milvus outage at the end of a job)."""

    def upsert(self, collection: Collection, scope: Scope,
               records: Sequence[StoredRecord]) -> None:
        raise VectorStoreError("milvus is down")


SAID = ["I went hiking in the Alps with my sister", "We adopted a puppy called Biscuit",
        "My daughter started violin lessons", "The kitchen renovation finished on Friday",
        "I ran my first half marathon in Porto", "Our team shipped the billing rewrite"]


def job_turns(n: int) -> list[Turn]:
    return [Turn(user_id=U.user, session_id="s1", turn_id=f"s1:{i}", role=Role.USER,
                 content=SAID[i]) for i in range(n)]


def test_an_extraction_job_is_encoded_in_one_batch_and_written_in_one_call_per_collection(
        redis_store: RedisStore) -> None:
    durable = RecordingUpserts()
    durable.ensure_collections(64)
    counting = CountingEmbedder()
    shard = make_shard(redis_store, durable, embedder=counting)
    turns = job_turns(6)
    candidates = [*RuleExtractor().extract(turns), *exchange_candidates(turns)]
    encoded: list[int] = []
    real_encode = counting.encode
    counting.encode = lambda texts: (encoded.append(len(texts)), real_encode(texts))[1]  # type: ignore[method-assign]
    summary = shard.write_longterm(U, candidates)
    assert summary.episodes.get("insert", 0) >= 6
    assert encoded and encoded[0] == len({c.text for c in candidates}) and len(encoded) == 1
    stored = durable.scan_scope(Collection.EPISODES, U)
    # one call per collection, every row (the turns also state facts: one call for those)
    assert sorted(c for c, _ in durable.upserts) == sorted({c for c, _ in durable.upserts})
    assert (Collection.EPISODES, len(stored)) in durable.upserts
    assert all(n == len(durable.scan_scope(c, U)) for c, n in durable.upserts)
    assert len(stored) == summary.episodes["insert"] and all(r.tokens for r in stored)
    assert any("half marathon" in t for t in recall(shard, "half marathon in Porto"))
    again = shard.write_longterm(U, candidates)  # a redelivered job writes nothing new
    assert again.episodes == {"duplicate": summary.episodes["insert"]}


def test_a_failed_batch_write_acknowledges_nothing_and_leaves_no_phantom_rows(
        redis_store: RedisStore) -> None:
    failing = FailingUpserts()
    failing.ensure_collections(64)
    shard = make_shard(redis_store, failing)
    turns = job_turns(3)
    with pytest.raises(VectorStoreError):
        shard.write_longterm(U, [*RuleExtractor().extract(turns)])
    assert not hot(shard).is_hot(U)  # dropped: reloaded from the durable store on next use
    assert recall(shard, "hiking in the Alps") == []


class Recording(HashEmbedder):
    """HashEmbedder that records every batch it encodes."""

    def __init__(self) -> None:
        super().__init__(64)
        self.batches: list[list[str]] = []

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.batches.append(list(texts))
        return super().encode(texts)


@pytest.mark.parametrize(("query", "speakers", "topic"), [
    ("What activities does Melanie partake in?", {"Melanie", "Caroline"},
     "What activities does partake in?"),
    ("What is Caroline's identity?", {"Melanie", "Caroline"}, "What is identity?"),
    ("what did caroline say about the trip", {"Caroline"}, "what did say about the trip"),
    ("What did I say about peanuts?", {"Caroline"}, None),  # names nobody
    ("Carolines?", {"Caroline"}, None),  # not the name
    ("Melanie?", {"Melanie"}, None),  # nothing but the name
    ("我和小王上周去了哪里", {"小王"}, "我和 上周去了哪里"),
])
def test_the_dense_query_leaves_out_the_speakers(query: str, speakers: set[str],
                                                 topic: str | None) -> None:
    assert without_speakers(query, speakers) == topic


def test_a_multi_party_user_is_searched_without_the_names_in_one_pass(
        redis_store: RedisStore, durable: CountingStore) -> None:
    embedder = Recording()
    shard = make_shard(redis_store, durable, embedder=embedder)
    for speaker, text in [("Melanie", "Melanie: I went swimming with the kids"),
                          ("Caroline", "Caroline: Hey Melanie! Melanie, how are you?")]:
        shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text=text,
                                            metadata={"speaker": speaker}))
    assert hot(shard).speakers(U) == {"Melanie", "Caroline"}
    query = "What activities does Melanie partake in?"
    request = RecallRequest(user_id="u", query=query, layers=["episodes"], debug=True)
    embedder.batches.clear()
    answer = shard.recall_memory(U, request, None)
    assert [query, "What activities does partake in?"] in embedder.batches  # one pass
    topic = embedder.encode(["What activities does partake in?"])[0]
    assert len(answer.found.candidates) == 2
    dense = {}
    for candidate in answer.found.candidates:  # the dense similarity is the topic's
        [record] = hot(shard).get(Collection.EPISODES, U, [candidate.id])
        expected = float(np.dot(topic, record.vector) / np.linalg.norm(topic)
                         / np.linalg.norm(record.vector))
        assert candidate.parts["dense"] == pytest.approx(expected, abs=1e-4)
        dense[candidate.id] = candidate.parts["dense"]
    embedder.batches.clear()
    shard.recall_memory(U, request.model_copy(update={"query": "what about swimming?"}), None)
    assert ["what about swimming?"] in embedder.batches  # names nobody: the query alone
    embedder.batches.clear()  # the caller embeds the query: the shard the name-free one
    given = embed_queries(EMB, [query])[0]
    answer = shard.recall_memory(U, request, lambda: given)
    assert embedder.batches == [["What activities does partake in?"]]
    assert {c.id: c.parts["dense"] for c in answer.found.candidates} == pytest.approx(
        dense)
