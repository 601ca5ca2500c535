"""A forget said in conversation hides at once, can be undone for a grace period, and is
then final: what it hid is deleted, source turns and all (``strata.shard.forgets``)."""

from __future__ import annotations

import time

import pytest

from strata.errors import Conflict, NotFound
from strata.layers.memories import LongTermMemory
from strata.layers.memory_models import MemoryCreate
from strata.layers.summarize import RuleSummarizer
from strata.models import MemoryKind, Scope
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.keys import SessionRef
from strata.stores.redis import RedisStore

U = Scope(tenant="t", user="u")
OTHER = Scope(tenant="t", user="someone-else")
GYM = "I train at the Iron Temple gym on Fifth Street."
CAT = "I adopted a cat named Miso."


@pytest.fixture
def graceful(redis_store: RedisStore, shard: SessionShardService) -> SessionShardService:
    """The conftest's shard with a 60 s grace period (its sweep is the test's to run)."""
    lt: LongTermMemory = shard.longterm
    return SessionShardService(0, Settings(forget_grace_s=60.0), redis_store, RuleSummarizer(),
                               longterm=lambda: lt)


def weights(shard: SessionShardService, scope: Scope = U) -> dict[str, float]:
    return {m.text: m.weight for m in shard.longterm.list_items(scope, MemoryKind.EPISODE)}


def test_a_forget_is_hidden_at_once_then_undone_with_its_weights(
        graceful: SessionShardService) -> None:
    for text in (GYM, CAT):
        graceful.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text=text))
    ack = graceful.append_turn(U, "s1", "user", "Please forget about the Iron Temple gym.")
    assert len(ack.intents.forgotten) == 1 and len(ack.intents.forgets) == 1
    assert weights(graceful) == {GYM: 0.0, CAT: 1.0}
    [listed] = graceful.list_forgets(U)
    assert (listed.forget_id, listed.state, listed.hidden) == (ack.intents.forgets[0],
                                                                "undoable", 1)
    assert listed.undo_until is not None and listed.undo_until.timestamp() > time.time() + 30
    assert graceful.list_forgets(OTHER) == [] and graceful.list_forgets(U, "travel") == []
    with pytest.raises(NotFound):
        graceful.undo_forget(OTHER, listed.forget_id)  # another user's id is no id here
    undone = graceful.undo_forget(U, listed.forget_id)
    assert undone.restored == 1 and weights(graceful) == {GYM: 1.0, CAT: 1.0}
    assert graceful.list_forgets(U) == []  # gone from the log: a late write may bring it back
    with pytest.raises(NotFound):
        graceful.undo_forget(U, listed.forget_id)
    assert graceful.finalise_forgets(now=time.time() + 3600) == 0  # unscheduled by the undo
    assert weights(graceful) == {GYM: 1.0, CAT: 1.0}


def test_after_the_grace_period_what_a_forget_hid_is_deleted_and_final(
        graceful: SessionShardService) -> None:
    graceful.append_turn(U, "s1", "user", GYM)  # said in a session: a source turn to delete
    graceful.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text=GYM))
    graceful.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text=CAT))
    ack = graceful.append_turn(U, "s1", "user", "Forget the Iron Temple gym, please.")
    assert len(ack.intents.forgotten) == 1
    assert graceful.finalise_forgets(now=time.time()) == 0  # not due yet
    assert graceful.finalise_forgets(now=time.time() + 61) >= 1
    assert weights(graceful) == {CAT: 1.0}  # deleted, not only hidden
    [final] = graceful.list_forgets(U)
    assert (final.state, final.hidden, final.undo_until) == ("final", 0, None)
    with pytest.raises(Conflict):
        graceful.undo_forget(U, final.forget_id)
    assert graceful.finalise_forgets(now=time.time() + 3600) == 0  # done once


def test_a_second_forget_of_what_is_hidden_already_leaves_the_first_undoable(
        graceful: SessionShardService) -> None:
    graceful.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text=GYM))
    first = graceful.append_turn(U, "s1", "user", "Forget about the Iron Temple gym.")
    again = graceful.append_turn(U, "s1", "user", "Please forget the Iron Temple gym.")
    assert len(first.intents.forgotten) == 1 and again.intents.forgotten == []
    views = {v.forget_id: v for v in graceful.list_forgets(U)}
    assert views[first.intents.forgets[0]].hidden == 1
    assert graceful.undo_forget(U, first.intents.forgets[0]).restored == 1
    assert weights(graceful) == {GYM: 1.0}


def test_when_final_the_turns_a_forgotten_memory_was_read_from_leave_the_session(
        graceful: SessionShardService, redis_store: RedisStore) -> None:
    from test_longterm_shard import extract  # the queued extraction, run here

    locker = "My gym locker is number 4471 at the Quokka Club."
    graceful.append_turn(U, "s1", "user", locker)
    graceful.close(U, "s1")
    extract(graceful, redis_store)
    assert any("Quokka" in m.text for m in graceful.longterm.list_items(U))
    ack = graceful.append_turn(U, "s2", "user", "Please forget my gym locker.")
    assert ack.intents.forgotten
    graceful.finalise_forgets(now=time.time() + 61)
    assert not any("Quokka" in m.text for m in graceful.longterm.list_items(U))
    wal = redis_store.sessions.read(SessionRef(U, "s1"))
    assert not any("Quokka" in str(rec) for _, rec in wal), wal


def test_forget_everything_reaches_past_one_query_page(
        graceful: SessionShardService, monkeypatch: pytest.MonkeyPatch) -> None:
    from strata.layers import transfer
    from strata.layers.forget_match import EVERYTHING

    monkeypatch.setattr(transfer, "PAGE", 3)  # a page of 3 rows: 10 memories need 4 pages
    for i in range(10):
        graceful.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text=f"Event {i}."))
    hidden = graceful.longterm.forget_matching(U, EVERYTHING)
    assert len(hidden) == 10 and set(weights(graceful).values()) == {0.0}
