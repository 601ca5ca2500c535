"""Queue → extraction → stores: at-least-once delivery without duplicates, crash takeover."""

from __future__ import annotations

import pytest

from strata.extract.rules import RuleExtractor
from strata.extract.worker import ExtractionWorker, LongTermWriter
from strata.layers.episodic import EpisodeStore
from strata.layers.semantic import FactStore
from strata.layers.summarize import RuleSummarizer
from strata.models import Collection, Scope
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.redis import QUEUE_LOW, RedisStore
from strata.testing.fake_vectors import FakeVectorStore

U = Scope(tenant="t", user="u")


@pytest.fixture
def setup(redis_store: RedisStore) -> tuple[SessionShardService, LongTermWriter,
                                            FakeVectorStore]:
    vectors = FakeVectorStore()
    vectors.ensure_collections(64)
    emb = HashEmbedder(64)
    writer = LongTermWriter(FactStore(vectors, emb), EpisodeStore(vectors, emb))
    shard = SessionShardService(0, Settings(), redis_store, RuleSummarizer())
    return shard, writer, vectors


def worker(redis_store: RedisStore, writer: LongTermWriter, name: str,
           claim_idle_ms: int = 60_000) -> ExtractionWorker:
    return ExtractionWorker(redis_store.queues, redis_store.sessions, RuleExtractor(),
                            writer.write, name, claim_idle_ms)


def test_close_to_facts_and_episodes(redis_store: RedisStore, setup) -> None:  # type: ignore[no-untyped-def]
    shard, writer, vectors = setup
    shard.append_turn(U, "s1", "user", "I'm allergic to peanuts, please keep that in mind.")
    shard.append_turn(U, "s1", "assistant", "You might be from the south, I guess.")
    shard.append_turn(U, "s1", "user", "My card is 4111 1111 1111 1111 and my password is x9!")
    shard.close(U, "s1")
    assert worker(redis_store, writer, "w1").run_once() == 1
    fact = writer.facts.current(U, "constraint.allergy:peanuts")
    assert fact is not None and fact.provenance.turn_ids == ["s1:1"]
    stored = " ".join(r.text for c in Collection for r in vectors.query(c, U, limit=1000))
    assert "south" not in stored and "4111" not in stored and "x9!" not in stored
    assert redis_store.queues.depth(QUEUE_LOW, "extractors").backlog == 0


def test_redelivered_job_adds_nothing(redis_store: RedisStore, setup) -> None:  # type: ignore[no-untyped-def]
    shard, writer, vectors = setup
    shard.append_turn(U, "s1", "user", "我住在北京，我喜欢吃火锅。")
    shard.close(U, "s1")
    job = redis_store.queues.entries(QUEUE_LOW)[0][1]
    worker(redis_store, writer, "w1").run_once()
    before = {c: vectors.count(c, U) for c in Collection}
    redis_store.queues.enqueue(QUEUE_LOW, job)  # the same job delivered again
    worker(redis_store, writer, "w1").run_once()
    assert {c: vectors.count(c, U) for c in Collection} == before
    assert writer.facts.current(U, "location.home").metadata["mentions"] == 1  # type: ignore[union-attr]


def test_dead_workers_job_is_finished_by_another(redis_store: RedisStore, setup) -> None:  # type: ignore[no-untyped-def]
    shard, writer, vectors = setup
    shard.append_turn(U, "s1", "user", "My name is Ann Lee.")
    shard.close(U, "s1")

    def crash(*_: object) -> None:
        raise RuntimeError("killed mid-job")

    dying = ExtractionWorker(redis_store.queues, redis_store.sessions, RuleExtractor(),
                             crash, "dying", claim_idle_ms=0)  # type: ignore[arg-type]
    dying.run_once()
    assert vectors.count(Collection.FACTS, U) == 0
    assert redis_store.queues.depth(QUEUE_LOW, "extractors").pending == 1
    assert worker(redis_store, writer, "w2", claim_idle_ms=0).run_once() == 1
    assert writer.facts.current(U, "identity.name").value == "Ann Lee"  # type: ignore[union-attr]
    assert redis_store.queues.depth(QUEUE_LOW, "extractors").backlog == 0


def test_similar_episodes_merge_with_count(setup) -> None:  # type: ignore[no-untyped-def]
    _, writer, vectors = setup
    from strata.extract.base import Candidate
    from strata.models import MemoryKind, Provenance

    for i in range(3):
        writer.episodes.apply(U, Candidate(
            kind=MemoryKind.EPISODE, text="The game lags badly in the evening",
            episode_type="issue", sentiment=-0.5 * i,
            provenance=Provenance(session_id=f"s{i}", turn_ids=[f"s{i}:1"])))
    rows = vectors.query(Collection.EPISODES, U)
    assert len(rows) == 1
    assert rows[0].payload["metadata"]["count"] == 3
    assert rows[0].payload["metadata"]["trend"] == "worse"


def test_episode_records_type_object_and_sentiment() -> None:
    from strata.models import Role, Turn

    turn = Turn(turn_id="s:1", session_id="s", user_id="u", role=Role.USER,
                content="Order #48213 arrived broken, this is terrible.")
    episode = next(c for c in RuleExtractor().extract([turn]) if c.kind.value == "episode")
    assert (episode.episode_type, episode.business_object) == ("issue", "48213")
    assert episode.sentiment < 0 and episode.provenance.turn_ids == ["s:1"]


KILL_SCRIPT = """
import os, signal, sys
from strata.extract.rules import RuleExtractor
from strata.extract.worker import ExtractionWorker
from strata.stores.redis import RedisStore

def die(scope, candidates):
    os.kill(os.getpid(), signal.SIGKILL)  # killed mid-job: extracted, nothing written or acked

redis = RedisStore(sys.argv[1], prefix=sys.argv[2])
ExtractionWorker(redis.queues, redis.sessions, RuleExtractor(), die, "doomed").run_once()
"""


def test_a_killed_worker_process_leaves_its_job_to_another(  # type: ignore[no-untyped-def]
        redis_store: RedisStore, redis_server, setup) -> None:
    import subprocess
    import sys

    shard, writer, _ = setup
    shard.append_turn(U, "s1", "user", "I'm allergic to shellfish.")
    shard.close(U, "s1")
    proc = subprocess.run([sys.executable, "-c", KILL_SCRIPT, redis_server.url,
                           redis_store.connection.prefix], capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stderr.decode()[-500:]
    assert redis_store.queues.depth(QUEUE_LOW, "extractors").pending == 1
    assert worker(redis_store, writer, "rescuer", claim_idle_ms=0).run_once() == 1
    assert writer.facts.current(U, "constraint.allergy:shellfish") is not None
    assert redis_store.queues.depth(QUEUE_LOW, "extractors").backlog == 0
