"""Knowledge base: chunking, versioned imports, validation rollback (in-memory store)."""

from __future__ import annotations

import pytest

from strata.layers.knowledge import (
    DocumentIn,
    KnowledgeBase,
    ValidationQuestion,
    chunk_text,
)
from strata.models import Collection, RecordFilter, Scope
from strata.stores.embedders import HashEmbedder
from strata.testing.fake_vectors import FakeVectorStore

EMB = HashEmbedder(64)
P1 = ("Refunds are issued within 14 days of purchase. " * 4).strip()
P2 = ("Shipping to Europe takes five to seven working days. " * 4).strip()
P3 = ("Gift cards never expire and can be combined with coupons. " * 4).strip()


def embed(texts: list[str]) -> list[list[float]]:
    return [v.tolist() for v in EMB.encode(texts)]


@pytest.fixture
def kb() -> tuple[KnowledgeBase, FakeVectorStore]:
    store = FakeVectorStore()
    store.ensure_collections(64)
    return KnowledgeBase(store, EMB.model_id), store


def run(kb: KnowledgeBase, text: str, validate: list[ValidationQuestion] | None = None
        ) -> object:
    plan = kb.plan("acme", [DocumentIn(doc_id="policy", text=text)])
    return kb.commit(plan, embed([c.text for c in plan.add]), embed, validate or [])


def active_texts(store: FakeVectorStore) -> str:
    rows = store.query(Collection.KNOWLEDGE, Scope.shared("acme"),
                       RecordFilter(statuses=["active"]), 1000)
    return " ".join(r.text for r in rows)


def test_chunks_respect_sizes_sentences_and_chinese() -> None:
    text = "\n\n".join([P1, P2, P3] * 3)
    chunks = chunk_text(text)
    assert all(len(c) <= 500 for c in chunks)
    assert all(len(c) >= 150 for c in chunks[:-1])
    assert all(c.endswith(".") for c in chunks)  # cut at sentence ends
    zh = chunk_text("退款将在购买后十四天内发放。" * 60)
    assert all(len(c) <= 500 for c in zh) and all(c.endswith("。") for c in zh)


def test_v2_changes_one_paragraph_and_deletes_another(kb) -> None:  # type: ignore[no-untyped-def]
    base, store = kb
    v1 = "\n\n".join([P1, P2, P3])
    assert run(base, v1).ok  # type: ignore[attr-defined]
    new_p1 = P1.replace("14 days", "30 days")
    v2 = "\n\n".join([new_p1, P2])
    report = run(base, v2)
    assert report.ok and report.deprecated >= 2  # type: ignore[attr-defined]
    text = active_texts(store)
    assert "30 days" in text and "14 days" not in text and "Gift cards" not in text
    statuses = {r.text[:30]: r.status for r in base.document("acme", "policy")}
    assert "deprecated" in statuses.values()  # old versions kept for audit
    again = run(base, v2)
    assert again.added == 0 and again.deprecated == 0 and again.unchanged > 0  # type: ignore[attr-defined]


def test_failed_validation_keeps_previous_versions(kb) -> None:  # type: ignore[no-untyped-def]
    base, store = kb
    run(base, "\n\n".join([P1, P2]))
    before = active_texts(store)
    bad = run(base, P3, [ValidationQuestion(question="how long do refunds take",
                                            expect_doc_id="refund-policy")])
    assert not bad.ok and "previous versions stay active" in bad.reason  # type: ignore[attr-defined]
    assert active_texts(store) == before
    assert not store.query(Collection.KNOWLEDGE, Scope.shared("acme"),
                           RecordFilter(statuses=["pending"]))


def test_duplicates_are_skipped(kb) -> None:  # type: ignore[no-untyped-def]
    base, _ = kb
    plan = base.plan("acme", [DocumentIn(doc_id="a", text=P1), DocumentIn(doc_id="b", text=P1)])
    assert len(plan.add) == 1 and plan.duplicates_skipped == 1
