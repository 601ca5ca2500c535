"""A batch's user turns are read by the learned intent detector in one call
(``ShardMemories.read_ahead``), and what the batch then does is what the same turns do said
one at a time: the same acknowledgements, the same facts superseded, the same memories
forgotten. The sentences are this file's own, in no corpus."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from strata.extract.intent_model import (
    CombinedIntents,
    IntentReading,
    Utterance,
    packaged_detector,
)
from strata.layers.memories import LongTermMemory
from strata.layers.memory_models import MemoryCreate
from strata.layers.summarize import RuleSummarizer
from strata.models import MemoryKind, MemoryStatus, Scope
from strata.settings import Settings
from strata.shard.models import IntentResult
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.redis import RedisStore
from strata.testing.fake_vectors import FakeVectorStore

pytest.importorskip("sklearn")

TURNS = [
    "Morning! Busy week ahead.",
    "These days I work at Initech instead of Globex.",  # a change no rule reads
    "I live in Lisbon.",
    "Yes, that's right.",
    "Please forget what I told you about my knee surgery.",
    "我现在住在杭州了，不在上海了。",
    "don't forget to remind me about the dentist on Friday",
]
SEEDED = [("work.employer", "Globex"), ("location.home", "上海")]


def _seed(shard: SessionShardService, scope: Scope) -> None:
    for key, value in SEEDED:
        shard.create_memory(scope, MemoryCreate(kind=MemoryKind.FACT, key=key, value=value))
    shard.create_memory(scope, MemoryCreate(kind=MemoryKind.EPISODE,
                                            text="I had knee surgery in March."))


def _state(shard: SessionShardService, scope: Scope) -> list[tuple[str, str, MemoryStatus]]:
    items = shard.longterm.list_items(scope, None, None, None, 100)
    return sorted((m.kind.value, m.value or m.text, m.status) for m in items)


def _said(result: IntentResult) -> tuple[list[str], int, list[str], bool]:
    """An acknowledgement's intents without the memory ids (each user has their own)."""
    return result.remembered, len(result.forgotten), result.forgets, result.deferred


@pytest.fixture()
def calls(monkeypatch: pytest.MonkeyPatch) -> list[Sequence[Utterance]]:
    """Each call of the packaged detector's ``read``, with what it read."""
    detector = packaged_detector()
    assert isinstance(detector, CombinedIntents)
    read = detector.read
    seen: list[Sequence[Utterance]] = []

    def counted(utterances: Sequence[Utterance]) -> list[IntentReading]:
        seen.append(list(utterances))
        return read(utterances)

    monkeypatch.setattr(detector, "read", counted)
    return seen


def test_a_batch_does_what_its_turns_do_one_by_one(
        shard: SessionShardService, redis_store: RedisStore,
        calls: list[Sequence[Utterance]]) -> None:
    """``shard`` takes the batch; another shard (its own readings) the turns one by one."""
    lt = LongTermMemory(FakeVectorStore(), HashEmbedder(64))
    other = SessionShardService(1, Settings(), redis_store, RuleSummarizer(), longterm=lambda: lt)
    batch, single = Scope(tenant="t", user="batch"), Scope(tenant="t", user="single")
    _seed(shard, batch)
    _seed(other, single)
    acks = shard.append_turns(batch, "s1", [{"role": "user", "content": t} for t in TURNS])
    batch_calls = len(calls)
    one_by_one = [other.append_turn(single, "s1", "user", t) for t in TURNS]

    assert batch_calls == 1  # the whole batch read in one call of the model
    assert len(calls) - batch_calls > 2  # one at a time: a call per turn the model reads
    assert [_said(a.intents) for a in acks] == [_said(a.intents) for a in one_by_one]
    assert _state(shard, batch) == _state(other, single)
    statuses = {value: status for kind, value, status in _state(shard, batch)}
    assert statuses["Globex"] is MemoryStatus.SUPERSEDED and statuses["上海"] is (
        MemoryStatus.SUPERSEDED)
    assert any(a.intents.forgotten for a in acks)  # the knee surgery, hidden


def test_each_turn_is_read_with_the_users_turn_before_it(
        shard: SessionShardService, calls: list[Sequence[Utterance]]) -> None:
    scope = Scope(tenant="t", user="u")
    shard.append_turn(scope, "s1", "user", "I moved to Porto last year.")
    shard.append_turns(scope, "s1", [
        {"role": "assistant", "content": "Noted, Porto it is."},
        {"role": "user", "content": "forget that"},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "I work at Initech."},
    ])
    read = {u.text: u.previous for u in calls[-1]}
    assert read.get("forget that", "absent") == "I moved to Porto last year."
    assert read.get("I work at Initech.", "absent") == "forget that"
