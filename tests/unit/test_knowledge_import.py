"""The one knowledge-import use case (``KnowledgeImport``) the API route and the batch job
both run: under the tenant's cluster-wide lock, plan → embed the new chunks → commit."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from strata.errors import Conflict
from strata.layers.knowledge import (
    DocumentIn,
    ImportPlan,
    KnowledgeBase,
    PlannedChunk,
    ValidationQuestion,
    import_lock_name,
)
from strata.layers.knowledge_import import KnowledgeImport
from strata.stores.coordination import ClusterLock
from strata.stores.embedders import HashEmbedder
from strata.stores.redis_server import EmbeddedRedis
from strata.testing.fake_vectors import FakeVectorStore

EMB = HashEmbedder(64)
POLICY = ("Refunds are issued within 14 days of purchase. " * 4).strip()
SHIPPING = ("Shipping to Europe takes five to seven working days. " * 4).strip()


def embed(texts: list[str]) -> list[list[float]]:
    return [v.tolist() for v in EMB.encode(texts)]


@pytest.fixture
def lock(redis_server: EmbeddedRedis, request: pytest.FixtureRequest) -> ClusterLock:
    held = ClusterLock(redis_server.url, f"t:{request.node.name}:")
    request.addfinalizer(held.close)
    return held


@pytest.fixture
def kb() -> KnowledgeBase:
    store = FakeVectorStore()
    store.ensure_collections(64)
    return KnowledgeBase(store, EMB.model_id)


def test_an_import_embeds_only_new_chunks_while_holding_the_tenant_lock(
        kb: KnowledgeBase, lock: ClusterLock, redis_server: EmbeddedRedis,
        request: pytest.FixtureRequest) -> None:
    other = ClusterLock(redis_server.url, f"t:{request.node.name}:")  # another replica
    embedded: list[list[str]] = []
    plans: list[ImportPlan] = []

    def embed_chunks(chunks: Sequence[PlannedChunk]) -> list[list[float]]:
        with pytest.raises(Conflict):  # the tenant's lock is held meanwhile …
            other.acquire(import_lock_name("acme"), wait_s=0)
        other.acquire(import_lock_name("globex"), wait_s=0).release()  # … only that tenant's
        embedded.append([c.text for c in chunks])
        return embed([c.text for c in chunks])

    use_case = KnowledgeImport(kb, lock)
    docs = [DocumentIn(doc_id="policy", text=POLICY)]
    first = use_case.run("acme", docs, embed_chunks, embed, planned=plans.append)
    assert first.ok and first.added == 1 and len(embedded) == 1 and len(plans[0].add) == 1
    again = use_case.run("acme", docs, embed_chunks, embed)
    assert again.ok and again.added == 0 and again.unchanged == 1
    assert len(embedded) == 1  # nothing new: the embedder is not called
    other.acquire(import_lock_name("acme"), wait_s=0).release()  # released after the import
    other.close()


def test_a_failed_validation_is_reported_and_releases_the_lock(
        kb: KnowledgeBase, lock: ClusterLock) -> None:
    use_case = KnowledgeImport(kb, lock)
    report = use_case.run(
        "acme", [DocumentIn(doc_id="shipping", text=SHIPPING)],
        lambda chunks: embed([c.text for c in chunks]), embed,
        [ValidationQuestion(question="How long do refunds take?", expect_doc_id="policy")])
    assert not report.ok and report.added == 0 and "policy" in (report.reason or "")
    lock.acquire(import_lock_name("acme"), wait_s=0).release()
