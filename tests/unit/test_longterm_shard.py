"""The shard as single writer: explicit intents at turn time, forgetting, delete cascades."""

from __future__ import annotations

import pytest

from strata.errors import BackendUnavailable
from strata.extract.base import Candidate, Intent
from strata.extract.rules import RuleExtractor
from strata.extract.worker import ExtractionWorker
from strata.layers.memory_models import MemoryCreate, MemoryPatch
from strata.layers.summarize import RuleSummarizer
from strata.models import (
    Collection,
    MemoryKind,
    MemoryStatus,
    Provenance,
    RecallRequest,
    Scope,
    utcnow,
)
from strata.recall.service import RecallService
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.keys import SessionRef
from strata.stores.redis import QUEUE_HIGH, QUEUE_LOW, RedisStore
from strata.testing.fake_vectors import FakeVectorStore

U = Scope(tenant="t", user="u")
EMB = HashEmbedder(64)




def recall(vectors: FakeVectorStore, query: str, **kw: object) -> list[str]:
    req = RecallRequest(user_id=U.user, query=query, **kw)  # type: ignore[arg-type]
    resp = RecallService(vectors).recall(U, req, EMB.encode([query])[0].tolist())
    return [i.text for i in resp.items]


def test_explicit_remember_is_written_before_the_turn_returns(
        shard: SessionShardService, redis_store: RedisStore) -> None:
    ack = shard.append_turn(U, "s1", "user", "Remember that I'm allergic to peanuts.")
    assert ack.intents.remembered and not ack.intents.deferred
    fact = shard.longterm.facts.current(U, "constraint.allergy:peanuts")
    assert fact is not None and fact.provenance.turn_ids == [ack.turn_id]
    assert redis_store.queues.depth(QUEUE_HIGH, "extractors").backlog == 0


def test_plain_statements_wait_for_the_session_end(shard: SessionShardService) -> None:
    shard.append_turn(U, "s1", "user", "I'm allergic to peanuts.")
    assert shard.longterm.facts.current(U, "constraint.allergy:peanuts") is None


def test_forget_intent_drops_weight_to_zero(shard: SessionShardService,
                                            vectors: FakeVectorStore) -> None:
    shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE,
                                        text="reported that the invoice export is broken"))
    assert any("invoice" in t for t in recall(vectors, "invoice export problem"))
    ack = shard.append_turn(U, "s2", "user", "the invoice export problem doesn't matter anymore")
    assert ack.intents.forgotten
    assert not any("invoice" in t for t in recall(vectors, "invoice export problem"))


def test_delete_memory_cascades_to_turns_and_snapshot(
        shard: SessionShardService, redis_store: RedisStore,
        vectors: FakeVectorStore) -> None:
    ack = shard.append_turn(U, "s1", "user", "Remember that my codename is Bluefin.")
    shard.append_turn(U, "s1", "user", "unrelated small talk")
    fact = shard.longterm.list_items(U, MemoryKind.FACT)[0]
    result = shard.delete_memory(U, fact.id)
    assert result == {"deleted_versions": 1, "deleted_turns": 1, "deleted_ids": [fact.id]}
    shard.flush_snapshots()
    assert not any("Bluefin" in r["turn"]["content"] for _, r in redis_store.sessions.read(
        SessionRef(U, "s1")) if r["op"] == "turn")
    view = shard.view(U, "s1")
    assert [t.turn_id for t in view.window] == ["s1:2"] and ack.turn_id != "s1:2"
    assert not any(b"Bluefin" in raw for _, raw in redis_store.dump_values())
    assert vectors.count(Collection.FACTS, U) == 0
    assert redis_store.audit.read(U)[-1]["action"] == "delete"


def test_delete_user_leaves_no_text_anywhere(shard: SessionShardService,
                                             redis_store: RedisStore,
                                             vectors: FakeVectorStore) -> None:
    shard.append_turn(U, "s1", "user", "Remember: my dog is called Biscuit.")
    shard.append_turn(U, "s2", "user", "I live in Reykjavik.")
    shard.close(U, "s2")
    other = Scope(tenant="t", user="keep")
    shard.append_turn(other, "s9", "user", "Remember: my cat is called Pickle.")
    redis_store.recalls.add(U, ["x"], "personal")
    shard.delete_user(U)
    dump = b" ".join(raw for _, raw in redis_store.dump_values())
    assert b"Biscuit" not in dump and b"Reykjavik" not in dump
    assert b"Pickle" in dump  # another user's memory is untouched
    assert all(vectors.count(c, U) == 0 for c in Collection)
    assert vectors.count(Collection.FACTS, other) == 1
    assert redis_store.audit.read(U)[-1]["action"] == "delete_user"


def test_memories_api_fact_edit_keeps_history(shard: SessionShardService) -> None:
    created = shard.create_memory(U, MemoryCreate(kind=MemoryKind.FACT, key="diet",
                                                  value="vegetarian"))
    first = created["memory"]["id"]
    edited = shard.update_memory(U, first, MemoryPatch(value="vegan"))
    history = shard.memory_history(U, edited.id)
    assert [(h.value, h.status.value) for h in history] == [("vegetarian", "superseded"),
                                                           ("vegan", "active")]


def test_memories_api_rejects_sensitive_data(shard: SessionShardService) -> None:
    from strata.errors import InvalidInput

    with pytest.raises(InvalidInput):
        shard.create_memory(U, MemoryCreate(kind=MemoryKind.FACT, key="card",
                                            value="4111 1111 1111 1111"))
    assert shard.longterm.list_items(U) == []


def test_procedure_cap_and_same_condition(shard: SessionShardService) -> None:
    from strata.errors import Conflict, LimitExceeded

    shard.longterm.procedures.cap = 2
    spec = {"keywords": ["refund"], "steps": ["check order", "open ticket"]}
    shard.create_memory(U, MemoryCreate(kind=MemoryKind.PROCEDURE, key="refunds", metadata=spec))
    with pytest.raises(Conflict):
        shard.create_memory(U, MemoryCreate(kind=MemoryKind.PROCEDURE, key="refunds2",
                                            metadata=spec))
    shard.create_memory(U, MemoryCreate(kind=MemoryKind.PROCEDURE, key="lag",
                                        metadata={"keywords": ["lag"]}))
    with pytest.raises(LimitExceeded):
        shard.create_memory(U, MemoryCreate(kind=MemoryKind.PROCEDURE, key="x",
                                            metadata={"keywords": ["x"]}))


def test_memories_api_keeps_the_clients_metadata(shard: SessionShardService) -> None:
    """A client's metadata is stored with a fact or an episode; Strata's own keys win."""
    fact = shard.create_memory(U, MemoryCreate(kind=MemoryKind.FACT, key="drink", value="tea",
                                               metadata={"origin": "crm", "mentions": 9}))
    episode = shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text="Bought a kettle",
                                                  metadata={"origin": "crm", "count": 5}))
    assert fact["memory"]["metadata"] == {"origin": "crm", "mentions": 1}
    assert episode["memory"]["metadata"]["origin"] == "crm"
    assert episode["memory"]["metadata"]["count"] == 1
    listed = {m.id: m.metadata for m in shard.list_memories(U, None, None, None, 10)}
    assert listed[fact["memory"]["id"]]["origin"] == "crm"


def extract(shard: SessionShardService, redis_store: RedisStore, queue: str = QUEUE_LOW) -> None:
    """Run the rule extraction of the queued jobs through ``shard`` (the worker's path)."""
    ExtractionWorker(redis_store.queues, redis_store.sessions, RuleExtractor(),
                     shard.write_longterm, "w", queue=queue).run_once()


def test_a_forget_wins_over_an_earlier_sessions_extraction_that_lands_after_it(
        shard: SessionShardService, redis_store: RedisStore,
        vectors: FakeVectorStore) -> None:
    shard.append_turn(U, "s1", "user", "We went hiking at Mount Falcon with the kids today.")
    ack = shard.append_turn(U, "s2", "user", "Forget the hiking at Mount Falcon.")
    assert not ack.intents.forgotten  # nothing stored yet: s1 is still open
    shard.close(U, "s1")
    # a restarted shard writes the late extraction: the forget is kept in Redis
    lt = shard.longterm
    restarted = SessionShardService(0, Settings(), redis_store, RuleSummarizer(),
                                    longterm=lambda: lt)
    extract(restarted, redis_store)
    assert not any("Falcon" in t for t in recall(vectors, "hiking at Mount Falcon"))
    # said after the forget, it is remembered again
    shard.append_turn(U, "s3", "user", "We went hiking at Mount Falcon again, in the rain.")
    shard.close(U, "s3")
    extract(restarted, redis_store)
    found = recall(vectors, "hiking at Mount Falcon")
    assert any("rain" in t for t in found) and not any("kids" in t for t in found)


def test_a_forget_that_failed_at_its_turn_is_applied_by_the_queued_job(
        shard: SessionShardService, redis_store: RedisStore, vectors: FakeVectorStore,
        monkeypatch: pytest.MonkeyPatch) -> None:
    shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE,
                                        text="reported that the invoice export is broken"))

    def down(*args: object, **kwargs: object) -> list[str]:
        raise BackendUnavailable("the vector store is down")

    with monkeypatch.context() as patched:
        patched.setattr(shard.longterm, "forget_matching", down)
        ack = shard.append_turn(U, "s2", "user",
                                "the invoice export problem doesn't matter anymore")
    assert ack.intents.deferred and any("invoice" in t for t in recall(vectors, "invoice"))
    extract(shard, redis_store, QUEUE_HIGH)
    assert not any("invoice" in t for t in recall(vectors, "invoice export problem"))
    assert [r.target for r in redis_store.forgets.recent(U)] == ["invoice export problem"]


def test_deletes_take_the_forget_log_with_them(shard: SessionShardService,
                                               redis_store: RedisStore) -> None:
    shard.append_turn(U, "s1", "user", "Remember that my codename is Bluefin.")
    shard.append_turn(U, "s1", "user", "Forget that my codename is Bluefin.")
    assert redis_store.forgets.recent(U)
    fact = shard.longterm.list_items(U, MemoryKind.FACT)[0]
    shard.delete_memory(U, fact.id)
    assert redis_store.forgets.recent(U) == []
    shard.append_turn(U, "s1", "user", "Forget the Tokyo trip.")
    shard.delete_user(U)
    assert redis_store.forgets.recent(U) == []


def test_two_forgets_of_one_turn_are_both_kept(shard: SessionShardService,
                                               redis_store: RedisStore) -> None:
    """An LLM extractor may find two forget requests in one turn ("forget X and Y")."""
    said = Provenance(session_id="s1", turn_ids=["s1:1"])
    forgets = [Candidate(kind=MemoryKind.FACT, text=target, intent=Intent.FORGET,
                         provenance=said, said_at=utcnow()) for target in ("my gym", "my dog")]
    summary = shard.write_longterm(U, forgets)
    assert summary.forgotten == 0 and not summary.facts
    assert sorted(r.target for r in redis_store.forgets.recent(U)) == ["my dog", "my gym"]


def test_a_forget_seen_again_in_other_words_forgets_nothing_said_after_it(
        shard: SessionShardService) -> None:
    """The session-end job's extractor (an LLM's) may word the turn's forget differently."""
    ack = shard.append_turn(U, "s1", "user", "Forget my codename.")
    shard.append_turn(U, "s1", "user", "Remember that my codename is Bluefin.")
    again = Candidate(kind=MemoryKind.FACT, text="the user's codename", intent=Intent.FORGET,
                      provenance=Provenance(session_id="s1", turn_ids=[ack.turn_id]),
                      said_at=utcnow())
    summary = shard.write_longterm(U, [again])
    assert summary.forgotten == 0
    assert shard.longterm.facts.current(U, "project.codename") is not None


def test_turns_stamped_alike_are_ordered_by_the_servers_turn_numbers(
        shard: SessionShardService, redis_store: RedisStore,
        vectors: FakeVectorStore) -> None:
    """A client that stamps every turn of a session with the session's (naive) time."""
    at = "2023-05-08T13:56:00"
    shard.append_turn(U, "s1", "user", "We went hiking at Mount Falcon with the kids today.",
                      created_at=at)  # type: ignore[arg-type]
    shard.append_turn(U, "s1", "user", "Forget the hiking at Mount Falcon.",
                      created_at=at)  # type: ignore[arg-type]
    shard.append_turn(U, "s1", "user", "We went hiking at Mount Falcon again, in the rain.",
                      created_at=at)  # type: ignore[arg-type]
    assert redis_store.forgets.recent(U)[0].at.tzinfo is not None  # naive is taken as UTC
    shard.close(U, "s1")
    extract(shard, redis_store)
    found = recall(vectors, "hiking at Mount Falcon")
    assert any("rain" in t for t in found) and not any("kids" in t for t in found)


def test_a_delete_takes_only_the_forgets_that_hold_its_words(
        shard: SessionShardService, redis_store: RedisStore) -> None:
    shard.append_turn(U, "s1", "user", "Forget my company.")
    shard.append_turn(U, "s1", "user", "Remember that I live in NY.")
    fact = next(m for m in shard.longterm.list_items(U, MemoryKind.FACT) if m.value == "NY")
    shard.delete_memory(U, fact.id)
    assert [r.target for r in redis_store.forgets.recent(U)] == ["company"]  # not "NY"


def test_a_delete_wins_over_an_extraction_that_read_the_turn_before_it(
        shard: SessionShardService, redis_store: RedisStore,
        vectors: FakeVectorStore) -> None:
    shard.append_turn(U, "s1", "user", "Remember that my codename is Bluefin.")
    shard.append_turn(U, "s1", "user", "We planned the Lisbon trip with Ana.")
    shard.close(U, "s1")
    fact = shard.longterm.list_items(U, MemoryKind.FACT)[0]
    summaries = []

    class DeleteWhileExtracting(RuleExtractor):
        """The user deletes the fact while the job, having read its turns, extracts."""

        def extract(self, turns):  # type: ignore[no-untyped-def]
            found = super().extract(turns)
            shard.delete_memory(U, fact.id)
            return found

    def write(scope: Scope, candidates: list[Candidate]):  # type: ignore[no-untyped-def]
        summaries.append(summary := shard.write_longterm(scope, candidates))
        return summary

    ExtractionWorker(redis_store.queues, redis_store.sessions, DeleteWhileExtracting(),
                     write, "w").run_once()
    assert summaries and summaries[0].deleted >= 1  # the turn's episode and its exchange
    texts = [m.text for kind in (MemoryKind.FACT, MemoryKind.EPISODE)
             for m in shard.longterm.list_items(U, kind)]
    assert not any("Bluefin" in t for t in texts)
    assert any("Lisbon" in t and "Bluefin" not in t for t in texts)  # the other turn stays
    assert redis_store.forgets.deleted_turns(U) == {"s1:s1:1"}
    shard.delete_user(U)
    assert redis_store.forgets.deleted_turns(U) == set()


def test_a_forget_retried_later_spares_what_was_said_after_it(
        shard: SessionShardService, redis_store: RedisStore,
        monkeypatch: pytest.MonkeyPatch) -> None:
    shard.append_turn(U, "s1", "user", "Remember that my codename is Falcon.")
    shard.close(U, "s1")
    extract(shard, redis_store)  # its episode
    assert any("Falcon" in e.text for e in shard.longterm.list_items(U, MemoryKind.EPISODE))

    def down(*args: object, **kwargs: object) -> list[str]:
        raise BackendUnavailable("the vector store is down")

    with monkeypatch.context() as patched:
        patched.setattr(shard.longterm, "forget_matching", down)
        assert shard.append_turn(U, "s2", "user", "Forget my codename.").intents.deferred
    # said after the forget, before its queued job runs
    assert shard.append_turn(U, "s3", "user", "Remember that my codename is Bluefin."
                             ).intents.remembered
    extract(shard, redis_store, QUEUE_HIGH)
    facts = {m.value: m for m in shard.longterm.list_items(U, MemoryKind.FACT)}
    assert facts["Bluefin"].weight == 1.0 and facts["Bluefin"].status is MemoryStatus.ACTIVE
    episodes = shard.longterm.list_items(U, MemoryKind.EPISODE)
    assert [e.weight for e in episodes if "Falcon" in e.text] == [0.0]  # said before it
    said = [m.metadata.get("said_at") for m in shard.longterm.list_items(U, MemoryKind.FACT)]
    assert all(said)  # what a later forget compares with
