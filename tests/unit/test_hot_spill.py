"""The hot index's token vectors kept in a local spill file, and its loads reading the BM25
terms the store wrote (``hot_table.TokenSpill``, ``hot.TermsScanner``): the same bytes, the
same scores, fewer heap bytes, no tokenizer at load."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pytest

from strata.models import Collection, Scope, StoredRecord
from strata.recall.late import embed_queries, pack_tokens
from strata.stores import hot_table
from strata.stores.embedders import HashEmbedder
from strata.stores.hot import HotIndexStore, TermsScanner
from strata.stores.hot_table import HotTable, TokenSpill
from strata.stores.lexical import tokenize
from strata.stores.milvus import MilvusVectorStore
from strata.testing.fake_vectors import FakeVectorStore

EMB = HashEmbedder(64)
U = Scope(tenant="t", user="u")
TEXTS = ["I am allergic to peanuts!", "我住在北京，喜欢爬山", "Caroline's researching adoption "
         "agencies — 3 of them", "ok", "The U.S.-based team's roadmap (v2.0) ships in May",
         "混合 mixed text with 中文 and English words", "   spaced   out   words  "]


def records(n: int) -> list[tuple[StoredRecord, bytes]]:
    texts = [f"{TEXTS[i % len(TEXTS)]} number {i}" for i in range(n)]
    vectors = EMB.encode(texts)
    tokens = EMB.token_vectors(texts)
    out = []
    for i, (text, vector, tok) in enumerate(zip(texts, vectors, tokens, strict=True)):
        out.append((StoredRecord(id=f"r{i}", text=text, vector=vector.tolist()),
                    base64.b64decode(pack_tokens(tok))))
    return out


def test_a_spill_reads_back_every_blob_exactly(tmp_path: Path) -> None:
    spill = TokenSpill(str(tmp_path))
    blobs = [bytes([i]) * (i * 37 + 1) for i in range(50)]
    offsets = [spill.append(b) for b in blobs]
    assert spill.disk_bytes == sum(len(b) for b in blobs)
    assert [spill.read(o, len(b)) for o, b in zip(offsets, blobs, strict=True)] == blobs
    assert list(tmp_path.iterdir()) == []  # unlinked: nothing a restart could read
    spill.close()


def test_a_spilled_table_holds_the_same_rows_and_token_bytes_as_the_heap_one() -> None:
    heap, spilled = HotTable(EMB.dim), HotTable(EMB.dim, spill=TokenSpill())
    rows = records(100)
    for table in (heap, spilled):
        for record, blob in rows[:60]:
            table.put(record, record.vector or [], blob)
        table.trim()  # no spare capacity: the next put grows the arrays again
        for record, blob in rows[60:]:
            table.put(record, record.vector or [], blob)
    token_bytes = sum(len(b) for _, b in rows)
    assert heap.nbytes - spilled.nbytes == token_bytes
    assert spilled.spilled_bytes == token_bytes and heap.spilled_bytes == 0
    for record, blob in rows:
        assert spilled.tokens_of(record.id) == heap.tokens_of(record.id) == blob
        assert spilled.tokens_for_text(record.text) == blob
        assert spilled.record(record.id, with_vector=True) == heap.record(record.id,
                                                                          with_vector=True)
    # deletes past a third compact the table into a fresh spill of the rows then alive
    dead = [r.id for r, _ in rows[:50]]
    heap.delete(dead)
    spilled.delete(dead)
    live = rows[50:]
    assert sum(len(b) for _, b in live) <= spilled.spilled_bytes < token_bytes * 0.7
    for record, blob in live:
        assert spilled.tokens_of(record.id) == heap.tokens_of(record.id) == blob
    assert spilled.tokens_of(dead[0]) is None
    # a replaced row's new bytes are read, not its old ones
    record, _ = live[0]
    spilled.put(record, record.vector or [], b"\x01\x02")
    assert spilled.tokens_of(record.id) == b"\x01\x02"
    spilled.put(record, record.vector or [], None)
    assert spilled.tokens_of(record.id) is None


def test_late_interaction_scores_the_same_from_the_spill_as_from_the_heap() -> None:
    durable = FakeVectorStore()
    durable.ensure_collections(EMB.dim)
    rows = records(30)
    durable.insert(Collection.EPISODES, U, [
        r.model_copy(update={"tokens": base64.b64encode(b).decode()}) for r, b in rows])
    heap = HotIndexStore(durable, EMB.dim, tokens=lambda: EMB, spill_tokens=False)
    spilled = HotIndexStore(durable, EMB.dim, tokens=lambda: EMB)
    query = embed_queries(EMB, ["allergic peanuts in Beijing"])[0].tokens
    texts = [r.text for r, _ in rows] + ["a text the index does not hold"]
    assert spilled.late_scorer(U, query)("q", texts) == heap.late_scorer(U, query)("q", texts)
    assert spilled.stats().bytes < heap.stats().bytes
    assert spilled.stats().spilled_bytes == sum(len(b) for _, b in rows)


def test_the_milvus_scan_returns_the_terms_tokenize_gives(tmp_path: Path) -> None:
    store = MilvusVectorStore(str(tmp_path / "m.db"), prefix="s_")
    store.ensure_collections(EMB.dim)
    rows = [r for r, _ in records(len(TEXTS))]
    store.insert(Collection.EPISODES, U, rows)
    assert isinstance(store, TermsScanner)
    scanned = store.scan_scope_terms(Collection.EPISODES, U)
    assert sorted(r.id for r, _ in scanned) == sorted(r.id for r in rows)
    for record, terms in scanned:
        assert terms == tokenize(record.text), record.text
    store.close()


def test_a_load_over_milvus_tokenizes_nothing_and_scores_bm25_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = MilvusVectorStore(str(tmp_path / "m.db"), prefix="s_")
    store.ensure_collections(EMB.dim)
    store.insert(Collection.EPISODES, U, [r for r, _ in records(20)])
    reference = HotTable(EMB.dim)
    for record in store.scan_scope(Collection.EPISODES, U):
        reference.put(record, record.vector or [], None)
    calls: list[str] = []

    def counting(text: str) -> list[str]:
        calls.append(text)
        return tokenize(text)

    monkeypatch.setattr(hot_table, "tokenize", counting)
    hot = HotIndexStore(store, EMB.dim, tokens=lambda: EMB)
    hot.warm(U)
    assert calls == []  # the terms came with the rows
    table = hot._user(U).tables[Collection.EPISODES]
    for query in ("peanuts allergic", "北京", "roadmap ships"):
        got = {h.record.id: h.score for h in table.search_lexical(query, 20, None)}
        want = {h.record.id: h.score for h in reference.search_lexical(query, 20, None)}
        assert got == pytest.approx(want) and got
    assert np.allclose(table.cosines(EMB.encode(["peanuts"])[0].tolist()),
                       reference.cosines(EMB.encode(["peanuts"])[0].tolist()))
    store.close()


def test_milvus_lite_reads_name_the_bucket_where_it_put_the_scope_s_rows(tmp_path: Path) -> None:
    store = MilvusVectorStore(str(tmp_path / "m.db"), prefix="b_")
    store.ensure_collections(EMB.dim)
    scopes = [Scope(tenant="t", user=f"user{i}") for i in range(40)]  # every bucket, mostly
    for scope in scopes:
        store.insert(Collection.EPISODES, scope, [r for r, _ in records(2)])
    name = store.name(Collection.EPISODES)
    assert store._in_scope(Collection.EPISODES, scopes[0])  # pruning is on for this store
    for scope in scopes:
        where = store._in_scope(Collection.EPISODES, scope)["partition_names"]
        rows = store._client.query(name, filter=f'scope == "{scope.key}"', output_fields=["pk"])
        pruned = store._client.query(name, filter=f'scope == "{scope.key}"',
                                     output_fields=["pk"], partition_names=where)
        assert len(rows) == 2 and sorted(r["pk"] for r in pruned) == sorted(r["pk"] for r in rows)
        assert len(store.scan_scope(Collection.EPISODES, scope)) == 2
        assert store.count(Collection.EPISODES, scope) == 2
        assert len(store.search_dense(Collection.EPISODES, scope,
                                      EMB.encode(["peanuts"])[0].tolist(), 5)) == 2
    store.close()


def test_held_records_share_their_strings_and_field_names_and_read_back_equal() -> None:
    table = HotTable(EMB.dim)
    rows = []
    for i in range(3):
        speaker = "".join(["Caro", "line"])  # a fresh string object each time, as JSON gives
        payload = {"kind": "episode", "metadata": {"speaker": speaker, "tags": ["x" * 3]},
                   "long": "y" * 100, "weight": 1.0}
        rows.append(StoredRecord(id=f"r{i}", text=f"text {i}", vector=[1.0] * EMB.dim,
                                 embed_model="".join(["mo", "del"]), payload=payload))
    for record in rows:
        table.put(record.model_copy(deep=True), record.vector or [], None)
    held = [table.record(r.id) for r in rows]
    for record, got in zip(rows, held, strict=True):
        assert got is not None
        assert got == record.model_copy(update={"vector": None})  # the same values
    a, b = held[0], held[1]
    assert a is not None and b is not None
    assert a.payload["metadata"]["speaker"] is b.payload["metadata"]["speaker"]
    assert a.embed_model is b.embed_model
    assert a.model_fields_set is b.model_fields_set == set(StoredRecord.model_fields)
    copy = a.model_copy(update={"text": "changed"})  # a copy's fields set is its own
    assert copy.model_fields_set is not a.model_fields_set and copy.text == "changed"
    replaced = table.replace_fields("r0", payload={**a.payload, "access_count": 1})
    assert replaced is not None and replaced.payload["access_count"] == 1
    assert replaced.model_fields_set is b.model_fields_set


def test_the_table_s_bm25_is_the_formula_s_through_single_row_terms_and_deletes() -> None:
    from strata.stores.lexical import bm25_scores
    table = HotTable(EMB.dim)
    rows = [r for r, _ in records(90)]
    for record in rows:
        table.put(record, record.vector or [], None)
    table.delete([r.id for r in rows[:35]])  # compacts: single-row terms and dicts rebuilt
    table.delete([rows[40].id])  # and a delete after it
    live = [r for r in rows[35:] if r.id != rows[40].id]
    for query in ("allergic peanuts number 7", "北京 爬山", "roadmap v2.0 ships 88", "ok 3"):
        want = dict(zip([r.id for r in live], bm25_scores(query, [r.text for r in live]),
                        strict=True))
        got = {h.record.id: h.score for h in table.search_lexical(query, 100, None)}
        assert got == pytest.approx({k: v for k, v in want.items() if v > 0}, rel=1e-5)
        assert got


def test_a_deleted_or_replaced_row_s_token_bytes_are_zeroed_in_the_spill_file() -> None:
    """A deleted memory's token vectors leave the file at once, not at the next compaction."""
    spill = TokenSpill()
    table = HotTable(EMB.dim, spill=spill)
    rows = records(8)
    for record, blob in rows:
        table.put(record, record.vector or [], blob)
    at = {r.id: (int(table._tok_at[table._row[r.id]]), len(b)) for r, b in rows}
    table.delete([rows[0][0].id])
    offset, length = at[rows[0][0].id]
    assert spill.read(offset, length) == bytes(length)
    record, blob = rows[1]
    table.put(record, record.vector or [], b"\x07" * 9)  # replaced: the old bytes go too
    offset, length = at[record.id]
    assert spill.read(offset, length) == bytes(length)
    assert table.tokens_of(record.id) == b"\x07" * 9
    for record, blob in rows[2:]:
        assert table.tokens_of(record.id) == blob
    spill.close()
