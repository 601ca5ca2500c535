"""Project / business-line context and per-agent visibility, in-process (the HTTP scenarios
are in tests/ray/test_memory_scenarios.py)."""

from __future__ import annotations

import pytest

from strata.auth import Principal
from strata.errors import Forbidden, InvalidInput, NotFound
from strata.extract.base import Candidate, attribute
from strata.layers.memories import LongTermMemory
from strata.layers.memory_models import MemoryCreate, MemoryPatch
from strata.layers.summarize import RuleSummarizer
from strata.models import MemoryKind, Provenance, Role, Scope, Source, Turn, is_visible
from strata.recall.assembly import in_context
from strata.recall.scoring import ScoredItem
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.redis import RedisStore
from strata.testing.fake_vectors import FakeVectorStore

U = Scope(tenant="t", user="u")
EMB = HashEmbedder(64)


@pytest.fixture
def longterm() -> LongTermMemory:
    store = FakeVectorStore()
    store.ensure_collections(64)
    return LongTermMemory(store, EMB)


@pytest.fixture
def shard(redis_store: RedisStore, longterm: LongTermMemory) -> SessionShardService:
    return SessionShardService(0, Settings(), redis_store, RuleSummarizer(),
                               longterm=lambda: longterm)


def test_a_context_switch_sets_the_window_aside_and_coming_back_restores_it(
        shard: SessionShardService, redis_store: RedisStore) -> None:
    shard.append_turn(U, "s", "user", "Shop: parcels leave from Shenzhen.", context="Shop")
    shard.append_turn(U, "s", "user", "Shop: returns are five percent.")  # stays in "shop"
    shard.patch_task_state(U, "s", {"goal": "fewer returns"})
    ack = shard.append_turn(U, "s", "user", "Trucks: they leave from Ningbo.", context="trucks")
    assert ack.context == "trucks"
    view = shard.view(U, "s")
    assert [t.content for t in view.window] == ["Trucks: they leave from Ningbo."]
    assert view.task_state["goal"] is None and view.set_aside == ["shop"]
    shard.append_turn(U, "s", "user", "Shop again: what were the returns?", context="shop")
    view = shard.view(U, "s")
    assert [t.content for t in view.window] == [
        "Shop: parcels leave from Shenzhen.", "Shop: returns are five percent.",
        "Shop again: what were the returns?"]
    assert view.task_state["goal"] == "fewer returns" and view.set_aside == ["trucks"]
    # a restarted shard replays the WAL to the same state
    fresh = SessionShardService(0, Settings(), redis_store, RuleSummarizer())
    again = fresh.view(U, "s")
    assert (again.window, again.context, again.set_aside) == (view.window, "shop", ["trucks"])


def test_attribution_defaults() -> None:
    turns = [Turn(turn_id="1", session_id="s", user_id="u", role=Role.USER, content="x",
                  agent="planner", context="project-x")]
    prov = Provenance(session_id="s", turn_ids=["1"])
    stated, city, inferred, named = attribute([
        Candidate(kind=MemoryKind.FACT, text="I use Java", key="tool.language", value="Java",
                  provenance=prov),
        Candidate(kind=MemoryKind.FACT, text="I live in Lisbon", key="location.home",
                  value="Lisbon", provenance=prov),
        Candidate(kind=MemoryKind.EPISODE, text="probably tired", source=Source.INFERRED,
                  provenance=prov),
        Candidate(kind=MemoryKind.FACT, text="in project Y I use Go", key="tool.language",
                  value="Go", scope_tags=["project:y"], provenance=prov)], turns)
    assert (stated.agent, stated.visibility, stated.context) == ("planner", "shared",
                                                                 "project-x")
    assert stated.scope_tags == ["project:project-x"]  # conflicts only within project X
    assert city.context is None and city.scope_tags == []  # about the person: no context
    assert inferred.visibility == "private"
    assert named.context is None and named.scope_tags == ["project:y"]  # its own project
    untouched = Candidate(kind=MemoryKind.EPISODE, text="hi", provenance=prov)
    plain = turns[0].model_copy(update={"agent": None, "context": None})
    assert attribute([untouched], [plain]) == [  # only when it was said
        untouched.model_copy(update={"said_at": plain.created_at})]


def test_visibility_rule() -> None:
    private = {"agent": "a", "visibility": "private"}
    named = {"agent": "a", "visibility": "agents", "shared_with": ["b"]}
    assert is_visible({}, "") and is_visible({}, "z")
    assert is_visible(private, "a") and not is_visible(private, "b")
    assert not is_visible(private, "")
    assert is_visible(named, "b") and not is_visible(named, "c") and not is_visible(named, "")


def test_in_context_never_lets_another_context_outrank_the_current_one() -> None:
    def item(i: str, score: float, context: str | None) -> ScoredItem:
        return ScoredItem(id=i, layer="facts", kind="fact", text=i, score=score,
                          context=context)

    ranked = [item("other", 0.9, "y"), item("general", 0.5, None), item("mine", 0.45, "x")]
    assert [i.id for i in in_context(ranked, "x")] == ["mine", "general", "other"]
    assert [i.id for i in in_context(ranked, "x", only=True)] == ["mine", "general"]
    assert in_context(ranked, None) == ranked


def test_memories_api_keeps_agents_apart(longterm: LongTermMemory) -> None:
    mine, _ = longterm.create(U, MemoryCreate(kind=MemoryKind.EPISODE, text="knee hurts",
                                              agent="planner", visibility="private"))
    shared, _ = longterm.create(U, MemoryCreate(kind=MemoryKind.EPISODE, text="runs daily",
                                                agent="planner"))
    assert shared.visibility == "shared"
    assert {m.id for m in longterm.list_items(U, viewer="coach")} == {shared.id}
    assert {m.id for m in longterm.list_items(U, viewer="planner")} == {mine.id, shared.id}
    assert {m.id for m in longterm.list_items(U)} == {mine.id, shared.id}  # admin
    with pytest.raises(NotFound):
        longterm.find(U, mine.id, viewer="coach")
    with pytest.raises(NotFound):
        longterm.delete(U, mine.id, viewer="coach")
    with pytest.raises(Forbidden):  # sees it, but did not learn it
        longterm.update(U, shared.id, MemoryPatch(visibility="private"), viewer="coach")
    moved = longterm.update(U, shared.id, MemoryPatch(context="Project X"), viewer="coach")
    assert moved.context == "project-x"
    narrowed = longterm.update(U, shared.id, MemoryPatch(visibility="agents",
                                                         shared_with=["coach"]),
                               viewer="planner")
    assert {m.id for m in longterm.list_items(U, viewer="coach")} == {narrowed.id}
    assert longterm.list_items(U, viewer="diet") == []
    with pytest.raises(InvalidInput):  # private needs an agent to keep it
        longterm.create(U, MemoryCreate(kind=MemoryKind.EPISODE, text="x", visibility="private"))


def test_a_key_bound_to_an_agent_cannot_act_as_another() -> None:
    bound = Principal(tenant="t", role="agent", agent="coach")
    assert bound.agent_for(None) == "coach" and bound.viewer() == "coach"
    with pytest.raises(Forbidden):
        bound.agent_for("planner")
    assert Principal(tenant="t", role="agent").viewer() == ""  # no agent: what is shared
    assert Principal(tenant="t", role="admin").viewer() is None  # everything
    assert Principal(tenant="t", role="admin").viewer("planner") == "planner"


def test_another_agents_session_is_closed_to_it(shard: SessionShardService) -> None:
    shard.append_turn(U, "p", "user", "hello", agent="planner")
    with pytest.raises(Forbidden):
        shard.view(U, "p", viewer="coach")
    with pytest.raises(Forbidden):
        shard.append_turn(U, "p", "user", "hi", agent="coach")
    with pytest.raises(Forbidden):  # a key of no agent (not an admin) names none
        shard.append_turn(U, "p", "user", "hi", caller="")
    with pytest.raises(Forbidden):
        shard.append_turns(U, "p", [{"role": "user", "content": "hi"}], caller="coach")
    shard.append_turn(U, "p", "user", "an admin's note")  # caller None: an admin
    assert shard.view(U, "p", viewer="planner").agent == "planner"
    assert shard.view(U, "p").turn_count == 2  # an admin
