"""Recall: routing, fusion, order and labels, the budget, debug, fallbacks, isolation."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest

from strata.layers.knowledge import DocumentIn, KnowledgeBase
from strata.layers.memories import LongTermMemory
from strata.layers.memory_models import MemoryCreate
from strata.layers.summarize import RuleSummarizer
from strata.models import Collection, MemoryKind, RecallRequest, Scope
from strata.recall.recipes import RECIPES
from strata.recall.routing import Route, route_query
from strata.recall.scoring import decay_weight
from strata.recall.service import RecallService
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.redis import RedisStore
from strata.testing.fake_vectors import FakeVectorStore
from strata.tokens import count_tokens

EMB = HashEmbedder(64)
U = Scope(tenant="acme", user="u")


@pytest.mark.parametrize(("query", "route", "has_session"), [
    ("刚才那个再展开说说", Route.CONTINUATION, True),
    ("can you elaborate on that last point", Route.CONTINUATION, True),
    ("what did I say about my allergies?", Route.PERSONAL, False),
    ("我之前说过我住在哪里吗", Route.PERSONAL, False),
    ("how do I configure the export?", Route.KNOWLEDGE, False),
    ("如何配置导出功能", Route.KNOWLEDGE, False),
    ("how do I set up my account for my trip?", Route.MIXED, False),
    ("peanuts", Route.MIXED, False),
    ("What is Caroline's identity?", Route.MIXED, False),
    ("When did Melanie paint a sunrise?", Route.PERSONAL, False),
    ("what did she say about the trip", Route.PERSONAL, False),
    ("他上次说什么时候到", Route.PERSONAL, False),
    ("how does Strata chunk documents?", Route.MIXED, False),
    ("What are the new shoes that Melanie got used for?", Route.MIXED, False),
])
def test_routing_rules(query: str, route: Route, has_session: bool) -> None:
    decision = route_query(query, has_session=has_session)
    assert decision.route is route
    if route is Route.KNOWLEDGE:
        assert "knowledge" in decision.layers and "episodes" not in decision.layers
    if route is Route.PERSONAL:
        assert "facts" in decision.layers and "knowledge" not in decision.layers
    assert ("working" in decision.layers) == has_session


def test_decay_halves_at_the_half_life() -> None:
    assert decay_weight(0, 7) == 1.0
    assert abs(decay_weight(7, 7) - 0.5) < 1e-9
    assert decay_weight(100, None) == 1.0


@pytest.fixture
def world(redis_store: RedisStore) -> tuple[SessionShardService, FakeVectorStore]:
    vectors = FakeVectorStore()
    vectors.ensure_collections(64)
    lt = LongTermMemory(vectors, EMB)
    shard = SessionShardService(0, Settings(), redis_store, RuleSummarizer(), longterm=lambda: lt)
    shard.create_memory(U, MemoryCreate(kind=MemoryKind.FACT, key="constraint.allergy:peanuts",
                                        value="allergic", text="I'm allergic to peanuts"))
    shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE,
                                        text="Asked for dinner recommendations in Lisbon"))
    kb = KnowledgeBase(vectors, "hash")  # imported as the service imports a document
    plan = kb.plan("acme", [DocumentIn(doc_id="menu", text=(
        "Peanut-free dishes are marked with a green leaf on the dinner menu."))])
    assert kb.commit(plan, embed([c.text for c in plan.add]), embed).ok
    return shard, vectors


def embed(texts: list[str]) -> list[list[float]]:
    return [v.tolist() for v in EMB.encode(texts)]


def ask(vectors: FakeVectorStore, query: str, working: object = None,
        **kw: object) -> object:
    req = RecallRequest(user_id="u", query=query, **kw)  # type: ignore[arg-type]
    return RecallService(vectors).recall(U, req, EMB.encode([query])[0].tolist(), working)


def test_context_order_labels_and_items(world) -> None:  # type: ignore[no-untyped-def]
    shard, vectors = world
    shard.append_turn(U, "s", "user", "We are planning dinner tonight with peanuts dishes?")
    resp = ask(vectors, "dinner with peanuts", shard.view(U, "s"))
    ctx = resp.context  # type: ignore[attr-defined]
    assert ctx.index("## Working memory") < ctx.index("## Long-term memory") < ctx.index(
        "## Knowledge base")
    assert "[fact " in ctx and "I'm allergic to peanuts" in ctx
    assert re.search(r"\[kb:menu \d{1,2} [A-Z][a-z]{2} \d{4}\]", ctx)  # the document, its date
    layers = [i.layer for i in resp.items]  # type: ignore[attr-defined]
    assert layers[0] == "working" and "facts" in layers and "knowledge" in layers


@pytest.mark.parametrize("budget", [50, 80, 120, 500])
def test_budget_is_never_exceeded(world, budget: int) -> None:  # type: ignore[no-untyped-def]
    shard, vectors = world
    for i in range(8):
        shard.append_turn(U, "s", "user", f"peanut dinner idea {i}: " + "detail " * 30)
    resp = ask(vectors, "dinner with peanuts", shard.view(U, "s"), budget_tokens=budget)
    assert count_tokens(resp.context) <= budget  # type: ignore[attr-defined]


def test_debug_returns_score_parts(world) -> None:  # type: ignore[no-untyped-def]
    _, vectors = world
    resp = ask(vectors, "peanuts allergy", debug=True)
    cands = resp.debug["candidates"]  # type: ignore[attr-defined]
    assert cands and set(cands[0]["parts"]) >= {"similarity", "time_decay", "confidence",
                                                 "type_priority", "layer_weight"}


def test_layers_filter_and_other_scope(world) -> None:  # type: ignore[no-untyped-def]
    _, vectors = world
    resp = ask(vectors, "peanuts", layers=["knowledge"])
    assert {i.layer for i in resp.items} == {"knowledge"}  # type: ignore[attr-defined]
    stranger = RecallService(vectors).recall(
        Scope(tenant="other", user="u"), RecallRequest(user_id="u", query="peanuts"),
        EMB.encode(["peanuts"])[0].tolist())
    assert stranger.items == []


def test_relax_then_most_used_fallback(world) -> None:  # type: ignore[no-untyped-def]
    shard, vectors = world
    strict = RECIPES["hybrid"].model_copy(update={"threshold": 5.0})
    req = RecallRequest(user_id="u", query="peanuts", debug=True)
    svc = RecallService(vectors)
    vec = EMB.encode(["peanuts"])[0].tolist()
    assert svc.recall(U, req, vec, recipe=strict).items == []  # nothing used yet
    fact = shard.longterm.list_items(U, MemoryKind.FACT)[0]
    shard.reinforce(U, [fact.id])
    resp = svc.recall(U, req, vec, recipe=strict)
    assert [i.id for i in resp.items] == [fact.id] and resp.debug["fallback"]  # type: ignore[index]
    relaxed = RECIPES["hybrid"].model_copy(update={"threshold": 0.9})
    assert svc.recall(U, req, vec, recipe=relaxed).debug["relaxed"]  # type: ignore[index]


def test_old_episodes_rank_below_fresh_ones(world) -> None:  # type: ignore[no-untyped-def]
    shard, vectors = world
    old = shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE,
                                              text="Complained about slow checkout page"))
    new = shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE,
                                              text="Complained about slow checkout screen"))
    [rec] = vectors.get(Collection.EPISODES, U, [old["memory"]["id"]])
    rec.created_at = rec.updated_at = (
        datetime.now(timezone.utc) - timedelta(days=30)).timestamp()  # untouched for 30 days
    rec.payload["event_time"] = None
    vectors.upsert(Collection.EPISODES, U, [rec])
    resp = ask(vectors, "slow checkout", layers=["episodes"], debug=True)
    ids = [c["id"] for c in resp.debug["candidates"]]  # type: ignore[attr-defined]
    assert ids.index(new["memory"]["id"]) < ids.index(old["memory"]["id"])


def test_a_scenario_profile_limits_the_routed_layers_unless_the_request_names_them() -> None:
    from strata.recall.service import decide_route

    qa, advisor = RECIPES["qa"], RECIPES["advisor"]
    personal = RecallRequest(user_id="u", query="what did I say about my allergies?")
    assert set(decide_route(personal, True).layers) >= {"facts", "episodes"}
    limited = decide_route(personal, True, recipe=qa)  # what the route wanted, minus the past
    assert limited.layers == ["working", "procedures"]
    assert "profile qa" in limited.reason
    assert decide_route(personal, False, recipe=qa).layers == ["procedures"]
    mixed = RecallRequest(user_id="u", query="peanuts")
    assert "facts" not in decide_route(mixed, False, recipe=qa).layers
    assert decide_route(mixed, False, recipe=advisor) == decide_route(mixed, False)
    named = RecallRequest(user_id="u", query="peanuts", layers=["facts"])
    assert decide_route(named, False, recipe=qa).layers == ["facts"]  # asked for: served


def test_settings_refuse_an_unknown_recipe_for_a_key_or_a_tenant() -> None:
    from pydantic import ValidationError

    ok = Settings(api_keys={"k": {"tenant": "t", "recipe": "support"}},  # type: ignore[dict-item]
                  tenant_recipes={"t": "qa"})
    assert ok.api_keys["k"].recipe == "support"
    for bad in ({"api_keys": {"k": {"tenant": "t", "recipe": "nope"}}},
                {"tenant_recipes": {"t": "nope"}}):
        with pytest.raises(ValidationError, match="unknown recall recipe"):
            Settings(**bad)  # type: ignore[arg-type]
