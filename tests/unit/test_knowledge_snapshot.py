"""Recall reads a refreshed copy of the tenant's knowledge base."""

from __future__ import annotations

import time

from strata.models import Collection, RecordFilter, Scope, StoredRecord
from strata.stores.embedders import HashEmbedder
from strata.stores.snapshot import KnowledgeSnapshot
from strata.testing.fake_vectors import FakeVectorStore

EMB = HashEmbedder(64)
KB = Collection.KNOWLEDGE
SHARED = Scope.shared("acme")
ACTIVE = RecordFilter(statuses=["active"])


def chunk(rid: str, text: str, status: str = "active") -> StoredRecord:
    return StoredRecord(id=rid, text=text, vector=EMB.encode([text])[0].tolist(),
                        status=status, payload={"doc_id": rid})


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def search(store: KnowledgeSnapshot | FakeVectorStore, text: str) -> list[str]:
    vector = EMB.encode([text])[0].tolist()
    return [h.record.id for h in store.search_hybrid(KB, SHARED, vector, text, 5, ACTIVE)]


def test_the_copy_answers_what_the_store_answers() -> None:
    inner = FakeVectorStore()
    inner.upsert(KB, SHARED, [chunk("a", "how to reset a password"),
                              chunk("b", "pricing of the team plan"),
                              chunk("c", "old pricing page", status="deprecated")])
    snapshot = KnowledgeSnapshot(inner, 64)
    for query in ("pricing", "reset password", "team plan pricing"):
        assert search(snapshot, query) == search(inner, query)
    assert search(snapshot, "pricing") and "c" not in search(snapshot, "pricing page")


def test_a_job_import_is_seen_after_the_refresh_an_own_import_at_once() -> None:
    inner, clock = FakeVectorStore(), Clock()
    snapshot = KnowledgeSnapshot(inner, 64, refresh_s=5.0, clock=clock)
    assert search(snapshot, "refund policy") == []
    inner.upsert(KB, SHARED, [chunk("r", "the refund policy: 30 days")])  # a job, elsewhere
    assert search(snapshot, "refund policy") == []  # the copy is fresh for 5 s
    clock.now = 6.0
    search(snapshot, "refund policy")  # stale: served, and reloaded in the background
    deadline = time.monotonic() + 5
    while search(snapshot, "refund policy") != ["r"]:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    snapshot.upsert(KB, SHARED, [chunk("s", "the refund policy for shipping")])
    assert set(search(snapshot, "refund policy shipping")) == {"r", "s"}  # own write: at once


def test_a_tenant_too_large_to_copy_is_searched_in_the_store() -> None:
    inner = FakeVectorStore()
    inner.upsert(KB, SHARED, [chunk(f"c{i}", f"chapter {i} of the manual") for i in range(5)])
    snapshot = KnowledgeSnapshot(inner, 64, max_rows=3)
    assert search(snapshot, "chapter manual") == search(inner, "chapter manual")
    assert len(search(snapshot, "chapter manual")) == 5
