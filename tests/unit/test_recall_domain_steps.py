"""The recall steps the HTTP face calls around the shard: which recipe a recall runs
(``choose_recipe``), and the shard's answer joined with the knowledge base's candidates
and assembled (``needs_knowledge``, ``answer_recall``, ``RecallService.search_knowledge``)."""

from __future__ import annotations

import pytest

from strata.errors import InvalidInput
from strata.models import Layer, RecallRequest, Scope, StoredRecord
from strata.recall.assembly import LayerCandidates
from strata.recall.recipes import DEFAULT, RECIPES, choose_recipe
from strata.recall.routing import Route, RouteDecision
from strata.recall.scoring import ScoreBreakdown, ScoredItem
from strata.recall.service import RecallService
from strata.shard.models import MemoryAnswer
from strata.shard.recall import answer_recall, needs_knowledge
from strata.stores.embedders import HashEmbedder
from strata.testing.fake_vectors import FakeVectorStore


def test_the_request_names_the_recipe_else_the_key_else_the_tenant_else_the_default() -> None:
    assert choose_recipe("qa", "advisor", "support") == ("qa", RECIPES["qa"])
    assert choose_recipe(None, "advisor", "support") == ("advisor", RECIPES["advisor"])
    assert choose_recipe(None, None, "support") == ("support", RECIPES["support"])
    assert choose_recipe(None) == (None, DEFAULT)


def test_a_request_naming_an_unknown_recipe_is_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="unknown recipe 'store'"):
        choose_recipe("store", "qa")


def _item(rid: str, layer: Layer, text: str, score: float) -> ScoredItem:
    return ScoredItem(id=rid, layer=layer, kind="fact" if layer is Layer.FACTS else "kb:d",
                      text=text, score=score, breakdown=ScoreBreakdown(relevance=0.9))


def test_the_shards_answer_and_the_knowledge_bases_candidates_meet_in_one_context() -> None:
    decision = RouteDecision(route=Route.MIXED, layers=[Layer.FACTS, Layer.KNOWLEDGE],
                             reason="t")
    answer = MemoryAnswer(decision=decision, found=LayerCandidates(
        candidates=[_item("f1", Layer.FACTS, "I drink green tea", 0.8)],
        timings_ms={"facts": 1.0}, statements=["the model's"]))
    knowledge = LayerCandidates(
        candidates=[_item("k1", Layer.KNOWLEDGE, "Green tea is brewed at 80 degrees", 0.7)],
        timings_ms={"knowledge": 2.0}, degraded=True)
    assert needs_knowledge(answer)
    request = RecallRequest(user_id="u", query="green tea", debug=True)
    response = answer_recall(request, answer, DEFAULT, knowledge)
    assert [i.id for i in response.items] == ["f1", "k1"]
    assert response.degraded and set(response.timings_ms) >= {"facts", "knowledge"}
    assert response.debug is not None and response.debug["statements"] == ["the model's"]
    alone = answer_recall(request, answer, DEFAULT)  # not routed to the base: the shard's
    assert [i.id for i in alone.items] == ["f1"] and not alone.degraded
    personal = answer.model_copy(update={"decision": decision.model_copy(
        update={"layers": [Layer.FACTS]})})
    assert not needs_knowledge(personal)


def test_the_knowledge_search_is_the_knowledge_layer_in_the_tenants_shared_scope() -> None:
    embedder = HashEmbedder(dim=64)
    store = FakeVectorStore()
    store.ensure_collections(embedder.dim)
    text = "Exports are configured under Settings, Data, Export"
    store.upsert(Layer.KNOWLEDGE.collection, Scope.shared("acme"), [StoredRecord(
        id="c1", text=text, vector=embedder.encode([text])[0].tolist(), created_at=1.0,
        updated_at=1.0, payload={"doc_id": "ops/exports"})])
    query = "how are exports configured"
    found = RecallService(store, parallelism=1).search_knowledge(
        Scope(tenant="acme", user="u"), RecallRequest(user_id="u", query=query),
        embedder.encode([query])[0].tolist())
    assert [(c.id, c.layer, c.kind) for c in found.candidates] == [
        ("c1", Layer.KNOWLEDGE, "kb:ops/exports")]
    assert set(found.timings_ms) == {Layer.KNOWLEDGE}
