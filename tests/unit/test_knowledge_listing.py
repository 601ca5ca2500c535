"""KnowledgeBase.documents: the inspector's list of a tenant's documents (in-memory store)."""

from __future__ import annotations

from strata.layers.knowledge import DocumentIn, KnowledgeBase
from strata.stores.embedders import HashEmbedder
from strata.testing.fake_vectors import FakeVectorStore

EMB = HashEmbedder(64)
P1 = ("Refunds are issued within 14 days of purchase. " * 4).strip()
P2 = ("Shipping to Europe takes five to seven working days. " * 4).strip()


def embed(texts: list[str]) -> list[list[float]]:
    return [v.tolist() for v in EMB.encode(texts)]


def load(kb: KnowledgeBase, tenant: str, doc_id: str, text: str) -> None:
    plan = kb.plan(tenant, [DocumentIn(doc_id=doc_id, title=doc_id.upper(), text=text)])
    assert kb.commit(plan, embed([c.text for c in plan.add]), embed).ok


def test_documents_lists_versions_and_statuses_of_one_tenant_only() -> None:
    store = FakeVectorStore()
    store.ensure_collections(64)
    kb = KnowledgeBase(store, EMB.model_id)
    assert kb.documents("acme") == []
    load(kb, "acme", "policy", "\n\n".join([P1, P2]))
    load(kb, "acme", "policy", "\n\n".join([P1.replace("14 days", "30 days"), P2]))
    load(kb, "acme", "faq", P2)
    load(kb, "other", "secret", P1)
    docs = kb.documents("acme")
    assert [d.doc_id for d in docs] == ["faq", "policy"]
    policy = docs[1]
    assert policy.versions == [1, 2] and policy.latest_version == 2
    assert policy.chunks == {"active": 1, "deprecated": 1}  # one chunk, two versions
    assert policy.title == "POLICY" and policy.embed_models == [EMB.model_id]
    assert [d.doc_id for d in kb.documents("other")] == ["secret"]
