"""Deleting a memory deletes the memories made from the same words of the same turns
(issue #15): a fact's turn episode and the exchanges quoting it, not the turn's neighbours."""

from __future__ import annotations

import pytest

from strata.extract.rules import RuleExtractor
from strata.extract.worker import ExtractionWorker
from strata.layers.memories import LongTermMemory
from strata.layers.summarize import RuleSummarizer
from strata.models import MemoryKind, RecallRequest, Scope
from strata.recall.service import RecallService
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.keys import SessionRef
from strata.stores.redis import RedisStore
from strata.testing.fake_vectors import FakeVectorStore

EMB = HashEmbedder(64)
U = Scope(tenant="t", user="u")
ALLERGY = "allergic to peanuts"
SISTER = "My sister Jane lives in Lisbon and works as a nurse."


@pytest.fixture
def extracted(redis_store: RedisStore) -> tuple[SessionShardService, FakeVectorStore]:
    """A closed session extracted the production way (rule extractor, exchanges)."""
    vectors = FakeVectorStore()
    vectors.ensure_collections(64)
    lt = LongTermMemory(vectors, EMB)
    shard = SessionShardService(0, Settings(), redis_store, RuleSummarizer(),
                                longterm=lambda: lt)
    for role, text in [("user", f"Hi! Just so you know, I'm {ALLERGY}."),
                       ("assistant", "Noted."), ("user", SISTER), ("assistant", "Nice.")]:
        shard.append_turn(U, "s1", role, text)
    shard.close(U, "s1")
    ExtractionWorker(redis_store.queues, redis_store.sessions, RuleExtractor(),
                     lt.writer.write, "w").run_once()
    return shard, vectors


def texts(shard: SessionShardService) -> list[str]:
    return [m.text for m in shard.longterm.list_items(U, limit=1000)]


def recalled(vectors: FakeVectorStore, query: str) -> str:
    req = RecallRequest(user_id=U.user, query=query)
    resp = RecallService(vectors).recall(U, req, EMB.encode([query])[0].tolist())
    return " ".join(i.text for i in resp.items)


def test_deleting_a_fact_deletes_its_turn_episode_and_exchange(
        extracted: tuple[SessionShardService, FakeVectorStore],
        redis_store: RedisStore) -> None:
    shard, vectors = extracted
    holding = [m for m in shard.longterm.list_items(U, limit=1000) if ALLERGY in m.text]
    assert len(holding) >= 3  # the fact, the turn's episode, the exchange
    fact = next(m for m in holding if m.kind is MemoryKind.FACT)
    result = shard.delete_memory(U, fact.id)
    assert sorted(result["deleted_ids"]) == sorted(m.id for m in holding)
    assert not any(ALLERGY in t for t in texts(shard))
    assert ALLERGY not in recalled(vectors, "what am I allergic to? peanuts")
    assert SISTER in texts(shard)  # the neighbouring turn's own episode stays
    wal = redis_store.sessions.read(SessionRef.parse("t:u:s1"))
    assert not any(ALLERGY in r["turn"]["content"] for _, r in wal
                   if r["op"] == "turn")  # and the archived transcript loses the turn
    assert ALLERGY not in str(shard.view(U, "s1").model_dump())


def test_deleting_a_turn_episode_deletes_the_fact_read_from_it(
        extracted: tuple[SessionShardService, FakeVectorStore]) -> None:
    shard, _ = extracted
    episode = next(m for m in shard.longterm.list_items(U, MemoryKind.EPISODE)
                   if ALLERGY in m.text and m.metadata.get("type") != "exchange")
    shard.delete_memory(U, episode.id)
    assert not any(ALLERGY in t for t in texts(shard))
    assert SISTER in texts(shard)


def test_a_memory_from_another_turn_with_the_same_words_stays(
        extracted: tuple[SessionShardService, FakeVectorStore]) -> None:
    shard, _ = extracted
    shard.append_turn(U, "s2", "user", f"I'm {ALLERGY}, really.")
    shard.close(U, "s2")
    ExtractionWorker(shard._redis.queues, shard._redis.sessions, RuleExtractor(),
                     shard.longterm.writer.write, "w").run_once()
    first = next(m for m in shard.longterm.list_items(U, MemoryKind.EPISODE)
                 if m.provenance.session_id == "s1" and ALLERGY in m.text
                 and m.metadata.get("type") != "exchange")
    shard.delete_memory(U, first.id)
    assert any(m.provenance.session_id == "s2" and ALLERGY in m.text
               for m in shard.longterm.list_items(U, limit=1000))
