"""Re-embedding the knowledge base: searches keep answering, then use the new model."""

from __future__ import annotations

import threading
from pathlib import Path

from strata.models import Collection, RecordFilter, Scope, StoredRecord
from strata.stores.embedders import HashEmbedder
from strata.stores.milvus import FlushPolicy, MilvusVectorStore
from strata.stores.reembed import reembed_knowledge

OLD, NEW = HashEmbedder(64), HashEmbedder(96)
ACME, GLOBEX = Scope.shared("acme"), Scope.shared("globex")


def test_searches_never_fail_or_go_empty_during_a_reembed(tmp_path: Path) -> None:
    store = MilvusVectorStore(str(tmp_path / "k.db"),
                              flush_policy=FlushPolicy(max_unflushed_rows=100_000))
    store.ensure_collections(OLD.dim)
    texts = [f"Refund rule {i}: items are refunded within {i} days." for i in range(300)]
    for scope in (ACME, GLOBEX):
        store.upsert(Collection.KNOWLEDGE, scope, [
            StoredRecord(id=f"c{i}", text=t, vector=OLD.encode([t])[0].tolist(),
                         status="active", embed_model=OLD.model_id,
                         payload={"doc_id": "refunds"}) for i, t in enumerate(texts)])
    store.flush()
    errors: list[BaseException] = []
    sizes: list[int] = []
    stop = threading.Event()

    def searcher() -> None:
        while not stop.is_set():
            try:
                hits = store.search_lexical(Collection.KNOWLEDGE, ACME, "refunded days", 5,
                                            RecordFilter(statuses=["active"]))
                sizes.append(len(hits))
            except BaseException as exc:
                errors.append(exc)

    thread = threading.Thread(target=searcher)
    thread.start()
    try:
        report = reembed_knowledge(store, lambda ts: [v.tolist() for v in NEW.encode(ts)],
                                   NEW.dim, NEW.model_id, batch=100)
    finally:
        stop.set()
        thread.join()
    assert errors == [] and sizes and min(sizes) == 5, (errors[:1], len(sizes))
    assert report.rows == 600 and report.new.endswith("_v2")
    query = "Refund rule 7: items are refunded within 7 days."
    hits = store.search_dense(Collection.KNOWLEDGE, ACME, NEW.encode([query])[0].tolist(), 1)
    assert hits[0].record.id == "c7" and hits[0].record.embed_model == NEW.model_id
    assert store.count(Collection.KNOWLEDGE, GLOBEX) == 300
    assert not store.has_physical(report.old)
    store.close()
