"""The Milvus adapter of ``VectorStore`` (milvus-lite file or Milvus server).

Schema, one collection per layer::

    pk          VARCHAR primary key = "<scope key>|<record id>" (ids never clash across scopes)
    scope       VARCHAR partition key = "tenant:user" (a plain field on a 2.3 server)
    text        VARCHAR, the record's text as written
    lexical     VARCHAR, ``strata.stores.lexical.normalize(text)`` (stemmed, no stop words),
                analysed by jieba + lowercase
    dense       FLOAT_VECTOR (COSINE)
    sparse      SPARSE_FLOAT_VECTOR, filled by Milvus's BM25 function from ``lexical``
    status, created_at, updated_at, confidence, embed_model, payload (JSON)

Collections made before the ``lexical`` field existed keep working: their BM25 reads
``text`` (unstemmed) until they are rebuilt, and a warning says so at start-up.

A Milvus server is asked its version before any schema is sent (``milvus_features``): a
server without the BM25 function (2.3, 2.4) gets collections without ``sparse`` and the
function, and lexical search scores BM25 here over the scope's ``lexical`` column
(``lexical.bm25_term_scores``, IDF from the scope's rows); a server without partial upserts
gets status and payload changes as whole rows read and written back.

Every method builds its filter expression starting with the scope, so no call can
reach another scope's rows. Milvus searches unflushed ("growing") rows slowly, so
writes count unflushed rows and the ``FlushPolicy`` decides when to flush.

Why this module is long: it is one engine's whole ``VectorStore`` port (schema and its
migrations, writes, three searches, decay scans, purge) plus the physical-collection
operations re-embedding needs, and the few paths an older server needs instead (BM25 scored
here, whole-row status writes, paged reads); each method is a short translation to pymilvus.
What stands alone is elsewhere: filter expressions in ``milvus_expr``, when to flush in
``milvus_flush``, what a server can do in ``milvus_features``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from pymilvus import DataType, Function, FunctionType, MilvusClient
from pymilvus.exceptions import MilvusException

from strata.errors import Conflict, InvalidInput, VectorStoreError
from strata.models import Collection, MemoryStatus, RecordFilter, Scope, SearchHit, StoredRecord
from strata.stores.lexical import bm25_term_scores, normalize, tokenize
from strata.stores.lite_compaction import LiteCompactionUnavailable, compact_deleted
from strata.stores.milvus_expr import filter_expr, lit
from strata.stores.milvus_features import MilvusFeatures
from strata.stores.milvus_flush import FlushGate, FlushPolicy
from strata.stores.ports import DecayFields, PurgeReport, complete_parts, fuse_rrf, score_ids

__all__ = ["FlushPolicy", "MilvusVectorStore"]

logger = logging.getLogger(__name__)

MAX_TEXT = 65535
_DECAY_OUTPUT = ["pk", "status", "updated_at", "confidence", "payload"]
_COPIED = ["pk", "scope", "text", "status", "created_at", "updated_at", "confidence",
           "embed_model", "payload"]
_OUTPUT = ["pk", "text", "status", "created_at", "updated_at", "confidence", "embed_model",
           "payload"]
ANALYZER = {"tokenizer": "jieba", "filter": ["lowercase"]}
_SERVER_SCHEMES = ("http://", "https://", "tcp://")  # anything else is a milvus-lite file


# milvus-lite 3.x routes a row by its partition key: md5(str(key)) % 16, into "_pk_<n>"
# (``milvus_lite.engine.collection._insert_with_partition_key``); a read names the bucket.
# ``tests/unit/test_hot_spill.py`` holds this to where milvus-lite put the rows.
LITE_BUCKETS = 16


def _bucket_name(i: int) -> str:
    return f"_pk_{i}"


def _scope_bucket(scope_key: str) -> str:
    return _bucket_name(int(hashlib.md5(scope_key.encode()).hexdigest(), 16) % LITE_BUCKETS)


def _terms(lexical: str | None) -> list[str]:
    """``lexical.normalize``'s terms back from its space-joined text (no term holds a
    space: ``tokenize`` strips its words)."""
    return lexical.split(" ") if lexical else []


@contextmanager
def _milvus_errors(action: str) -> Iterator[None]:
    """Translate pymilvus failures into ``VectorStoreError`` at the boundary.

    Milvus's message can quote the filter expression (scope, ids, keys): the first line is
    logged, the error only names the action and Milvus's code.
    """
    try:
        yield
    except MilvusException as exc:
        logger.warning("milvus %s failed (code %s): %.200s", action, exc.code,
                       str(exc.message).partition("\n")[0])
        raise VectorStoreError(f"milvus {action} failed (code {exc.code})") from exc
    except (ConnectionError, OSError) as exc:
        raise VectorStoreError(f"milvus {action} failed: {type(exc).__name__}: {exc}") from exc


class MilvusVectorStore:
    """``VectorStore`` on Milvus. With a lite URI, exactly one process may hold this."""

    def __init__(
        self,
        uri: str,
        token: str = "",
        prefix: str = "strata_",
        flush_policy: FlushPolicy | None = None,
        prune_scopes: bool = True,
    ) -> None:
        self._uri = uri
        # milvus-lite: a scope's reads name its partition-key bucket (``_in_scope``)
        self.prune_scopes = prune_scopes
        self._prefix = prefix
        self._policy = flush_policy or FlushPolicy()
        self._lock = threading.Lock()
        # milvus-lite's engine is not safe for concurrent writes: two can share a sequence
        # number, a partial upsert reads then writes, and a flush swaps the unflushed table
        # outside the engine's lock (a delete racing it missed rows: a deleted user came
        # back). Writes and flushes take ``_writes`` one at a time; reads share ``_gate``,
        # which a flush holds alone.
        self._writes = threading.RLock()
        self._gate = FlushGate()
        self._dim: int | None = None
        self._legacy: set[str] = set()  # collections whose BM25 reads raw ``text``
        self._no_tokens: set[str] = set()  # collections made before the ``tokens`` field
        self._no_sparse: set[str] = set()  # made on a server without BM25: scored here
        self._bucketed: set[str] = set()  # milvus-lite, scope-keyed: reads name the bucket
        self.flush_stats: dict[str, float] = {"flushes": 0.0, "last_flush_s": 0.0}
        self._deleted: set[Collection] = set()  # collections deleted from since the last purge
        with _milvus_errors("connect"):
            self._client = MilvusClient(uri=uri, token=token) if token else MilvusClient(uri=uri)
            # before any schema is sent: a 2.3 server aborts when asked for a BM25 index
            self._features = (MilvusFeatures.of_server(self._client.get_server_version())
                              if uri.startswith(_SERVER_SCHEMES) else MilvusFeatures.lite())
        if not self._features.bm25_function:
            logger.warning("Milvus %s has no BM25 function: lexical search is scored by "
                           "Strata over each scope's rows", self._features.version)

    @property
    def features(self) -> MilvusFeatures:
        """What the Milvus behind this store can do (``milvus_features``)."""
        return self._features

    @property
    def supports_bm25(self) -> bool:
        """Whether the server scores BM25 itself (else this store does, client-side)."""
        return self._features.bm25_function

    # -- collections -----------------------------------------------------------------
    def name(self, collection: Collection) -> str:
        """The Milvus name (an alias for knowledge, so it can be re-embedded)."""
        return f"{self._prefix}{collection.value}"

    @property
    def client(self) -> MilvusClient:
        """The raw client, for tools that build collections of their own schema (the recall
        benchmark's single-collection baseline)."""
        return self._client

    def create_physical(self, name: str, dim: int) -> None:
        """Create a collection with Strata's schema under a physical name."""
        with _milvus_errors("create collection"):
            self._create(name, dim)

    # -- physical collections: re-embedding builds one, then swaps the alias -------------
    def physical(self, collection: Collection) -> str:
        """The physical collection ``collection``'s alias points at (knowledge: ``…_v<n>``)."""
        with _milvus_errors("describe alias"):
            described: dict[str, Any] = self._client.describe_alias(self.name(collection))
        return str(described["collection_name"])

    def has_physical(self, name: str) -> bool:
        with _milvus_errors("has collection"):
            return bool(self._client.has_collection(name))

    def drop_physical(self, name: str) -> None:
        """Drop a physical collection, if it exists."""
        if self.has_physical(name):
            with _milvus_errors("drop collection"):
                self._client.drop_collection(name)

    def copy_physical(self, source: str, target: str,
                      embed: Callable[[list[str]], list[list[float]]], model_id: str,
                      batch: int = 256, on_batch: Callable[[int], None] | None = None,
                      ) -> dict[str, int]:
        """Copy every row of ``source`` into ``target`` with vectors from ``embed`` (token
        vectors stay behind: they belong to the old model), then flush ``target``; returns
        the rows copied per scope key. ``on_batch`` hears the rows copied so far."""
        copied: dict[str, int] = {}
        with _milvus_errors("copy collection"):
            pages = self._client.query_iterator(source, batch_size=batch, filter='pk != ""',
                                                output_fields=_COPIED)
            try:
                while rows := pages.next():
                    vectors = embed([r["text"] for r in rows])
                    extra = {} if self._features.nullable_fields else {"tokens": ""}
                    self._client.insert(target, [
                        {**{k: r[k] for k in _COPIED}, "dense": v,
                         "lexical": normalize(r["text"]), "embed_model": model_id, **extra}
                        for r, v in zip(rows, vectors, strict=True)])
                    for row in rows:
                        copied[row["scope"]] = copied.get(row["scope"], 0) + 1
                    if on_batch is not None:
                        on_batch(sum(copied.values()))
            finally:
                pages.close()
            self._client.flush(target)
        return copied

    def count_physical(self, name: str, scope_key: str | None = None) -> int:
        """Rows in a physical collection (of one scope, if given)."""
        expr = 'pk != ""' if scope_key is None else f"scope == {lit(scope_key)}"
        with _milvus_errors("count"):
            rows = self._client.query(name, filter=expr, output_fields=["count(*)"])
        return int(rows[0]["count(*)"]) if rows else 0

    def swap_alias(self, collection: Collection, physical: str) -> None:
        """Point ``collection``'s alias at ``physical`` in one step: searches before it read
        the old collection, searches after it the new one."""
        with _milvus_errors("alter alias"):
            self._client.alter_alias(physical, self.name(collection))

    def _create(self, name: str, dim: int) -> None:
        bm25 = self._features.bm25_function
        schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("pk", DataType.VARCHAR, max_length=1024, is_primary=True)
        schema.add_field("scope", DataType.VARCHAR, max_length=512,
                         is_partition_key=self._features.partition_key)
        schema.add_field("text", DataType.VARCHAR, max_length=MAX_TEXT)
        analysed: dict[str, Any] = (
            {"enable_analyzer": True, "analyzer_params": ANALYZER} if bm25 else {})
        schema.add_field("lexical", DataType.VARCHAR, max_length=MAX_TEXT, **analysed)
        schema.add_field("dense", DataType.FLOAT_VECTOR, dim=dim)
        if bm25:
            schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
        schema.add_field("status", DataType.VARCHAR, max_length=32)
        schema.add_field("created_at", DataType.DOUBLE)
        schema.add_field("updated_at", DataType.DOUBLE)
        schema.add_field("confidence", DataType.FLOAT)
        schema.add_field("embed_model", DataType.VARCHAR, max_length=256)
        schema.add_field("payload", DataType.JSON)
        nullable: dict[str, Any] = {"nullable": True} if self._features.nullable_fields else {}
        schema.add_field("tokens", DataType.VARCHAR, max_length=MAX_TEXT, **nullable)
        if bm25:
            schema.add_function(Function(name="bm25", function_type=FunctionType.BM25,
                                         input_field_names=["lexical"],
                                         output_field_names=["sparse"]))
        index = self._client.prepare_index_params()
        index.add_index("dense", index_type="AUTOINDEX", metric_type="COSINE")
        if bm25:
            index.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
        level = self._features.consistency_level
        consistency: dict[str, Any] = {"consistency_level": level} if level else {}
        self._client.create_collection(name, schema=schema, index_params=index, **consistency)

    def ensure_collections(self, dim: int) -> None:
        """Create missing collections; refuse to reuse one built for another dimension."""
        with _milvus_errors("ensure_collections"):
            for collection in Collection:
                alias = self.name(collection)
                if self._client.has_collection(alias):
                    existing = self._collection_dim(alias)
                    if existing != dim:
                        raise InvalidInput(
                            f"collection {alias} holds {existing}-d vectors but the embedder "
                            f"makes {dim}-d ones; re-embed (jobs.reembed) or use another "
                            "data dir"
                        )
                    if not self._has_field(alias, "tokens"):
                        self._no_tokens.add(alias)
                        logger.warning("collection %s predates stored token vectors: the "
                                       "hot index encodes them when it loads a user", alias)
                    if not self._has_field(alias, "lexical"):
                        self._legacy.add(alias)
                        logger.warning("collection %s predates stemmed BM25 (no `lexical` "
                                       "field): lexical search reads raw text until it is "
                                       "rebuilt", alias)
                    if not self._has_field(alias, "sparse"):
                        self._no_sparse.add(alias)  # made by a 2.3/2.4 server, kept on upgrade
                    # a reopened collection starts released; searches need it loaded
                    self._client.load_collection(alias)
                    continue
                physical = f"{alias}_v1" if collection is Collection.KNOWLEDGE else alias
                self._create(physical, dim)
                if physical != alias:
                    self._client.create_alias(physical, alias)
            self._bucketed = {self.name(c) for c in Collection
                              if self._has_scope_buckets(self.name(c))}
        self._dim = dim

    def _has_scope_buckets(self, name: str) -> bool:
        """Whether milvus-lite keeps ``name``'s rows in its partition-key buckets (a
        collection made with ``scope`` as the partition key)."""
        if self._uri.startswith(_SERVER_SCHEMES):
            return False  # a server prunes by the partition key itself
        fields = self._client.describe_collection(name)["fields"]
        keyed = any(f["name"] == "scope" and f.get("is_partition_key") for f in fields)
        partitions = set(self._client.list_partitions(name))
        return keyed and {_bucket_name(i) for i in range(LITE_BUCKETS)} <= partitions

    def _in_scope(self, collection: Collection, scope: Scope) -> dict[str, Any]:
        """The partition a scope's rows are in, for a read on milvus-lite: its query
        otherwise assembles every row of every segment of the collection (the cost grew
        with the store: ~0.6 s at 113k rows), not only the scope's bucket's."""
        if not self.prune_scopes or self.name(collection) not in self._bucketed:
            return {}
        return {"partition_names": [_scope_bucket(scope.key)]}

    def _has_field(self, name: str, field: str) -> bool:
        return any(f["name"] == field for f in self._client.describe_collection(name)["fields"])

    def _collection_dim(self, name: str) -> int:
        desc = self._client.describe_collection(name)
        for field in desc["fields"]:
            if field["name"] == "dense":
                return int(field["params"]["dim"])
        raise VectorStoreError(f"collection {name} has no dense field")

    # -- writes ----------------------------------------------------------------------
    def _row(self, scope: Scope, record: StoredRecord,
             collection: Collection | None = None) -> dict[str, Any]:
        if record.vector is None:
            raise InvalidInput(f"record {record.id!r} has no vector")
        if self._dim is not None and len(record.vector) != self._dim:
            raise InvalidInput(f"record {record.id!r} has a {len(record.vector)}-d vector; "
                               f"the store holds {self._dim}-d vectors")
        if len(record.text.encode("utf-8")) > MAX_TEXT:
            raise InvalidInput(f"record {record.id!r} text is over {MAX_TEXT} bytes")
        row: dict[str, Any] = {
            "pk": f"{scope.key}|{record.id}",
            "scope": scope.key,
            "text": record.text,
            "dense": [float(x) for x in record.vector],
            "status": record.status,
            "created_at": float(record.created_at),
            "updated_at": float(record.updated_at),
            "confidence": float(record.confidence),
            "embed_model": record.embed_model,
            "payload": record.payload,
        }
        if collection is None or self.name(collection) not in self._legacy:
            row["lexical"] = normalize(record.indexed_text)
        if collection is None or self.name(collection) not in self._no_tokens:
            row["tokens"] = record.tokens or ""
        return row

    def insert(self, collection: Collection, scope: Scope, records: Sequence[StoredRecord]) -> None:
        rows = [self._row(scope, r, collection) for r in records]
        with self._writes:
            existing = self.get(collection, scope, [r.id for r in records])
            if existing:
                raise Conflict(f"ids already exist in {collection.value}: "
                               f"{[r.id for r in existing][:5]}")
            with self._gate.reading(), _milvus_errors("insert"):
                self._client.insert(self.name(collection), rows)
            self._after_write(collection, len(rows))

    def upsert(self, collection: Collection, scope: Scope, records: Sequence[StoredRecord]) -> None:
        rows = [self._row(scope, r, collection) for r in records]
        if not rows:
            return
        with self._writes:
            with self._gate.reading(), _milvus_errors("upsert"):
                self._client.upsert(self.name(collection), rows)
            self._after_write(collection, len(rows))

    def load_new(self, collection: Collection,
                 items: Sequence[tuple[Scope, StoredRecord]]) -> None:
        """Many scopes' new records in one insert, unchecked: a bulk load of ids known to be
        new (the bench's stores of 100k+ memories). ``insert`` checks each id first and
        ``upsert`` deletes it first; milvus-lite does both by reading every segment."""
        rows = [self._row(scope, r, collection) for scope, r in items]
        if not rows:
            return
        with self._writes:
            with self._gate.reading(), _milvus_errors("insert"):
                self._client.insert(self.name(collection), rows)
            self._after_write(collection, len(rows))

    def delete(self, collection: Collection, scope: Scope, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        pks = [f"{scope.key}|{i}" for i in ids]
        expr = f"scope == {lit(scope.key)} and pk in {json.dumps(pks, ensure_ascii=False)}"
        return self._delete(collection, expr)

    def delete_scope(self, collection: Collection, scope: Scope) -> int:
        return self._delete(collection, f"scope == {lit(scope.key)}")

    def _delete(self, collection: Collection, expr: str) -> int:
        with self._writes:
            with self._gate.reading(), _milvus_errors("delete"):  # it reads, then deletes
                result = self._client.delete(self.name(collection), filter=expr)
            with self._lock:
                self._deleted.add(collection)
            self._after_write(collection, 1)
        if isinstance(result, dict):
            return int(result.get("delete_count", 0))
        return len(result)

    def _after_write(self, collection: Collection, rows: int) -> None:
        self._policy.record_write(collection, rows, time.monotonic())
        if self._policy.unflushed(collection) >= self._policy.max_unflushed_rows:
            self.flush(collection)

    # -- reads -----------------------------------------------------------------------
    def _record(self, scope: Scope, entity: dict[str, Any]) -> StoredRecord:
        return StoredRecord(
            id=str(entity["pk"])[len(scope.key) + 1:],
            text=entity["text"],
            status=entity["status"],
            created_at=entity["created_at"],
            updated_at=entity["updated_at"],
            confidence=entity["confidence"],
            embed_model=entity["embed_model"],
            payload=entity.get("payload") or {},
        )

    def get(self, collection: Collection, scope: Scope, ids: Sequence[str]) -> list[StoredRecord]:
        """Records by id, with their vectors (so an update need not re-embed)."""
        if not ids:
            return []
        return self._full(collection, scope, filter_expr(scope, RecordFilter(ids=list(ids))),
                          len(ids))

    def scan_scope(self, collection: Collection, scope: Scope,
                   limit: int = 16_384) -> list[StoredRecord]:
        """Every record of the scope, with vectors and token vectors (a hot-index load)."""
        return self._full(collection, scope, filter_expr(scope, None), limit)

    def scan_scope_terms(self, collection: Collection, scope: Scope, limit: int = 16_384
                         ) -> list[tuple[StoredRecord, list[str] | None]]:
        """``scan_scope`` with each record's BM25 terms as the row stores them (its
        ``lexical`` column: ``lexical.tokenize`` of the text at write time; None in a
        collection without it), so a hot-index load need not tokenize the texts again."""
        with_terms = self.name(collection) not in self._legacy
        rows = self._full_rows(collection, scope, filter_expr(scope, None), limit,
                               ["lexical"] if with_terms else [])
        return [(record, _terms(row["lexical"]) if with_terms else None)
                for record, row in rows]

    def _full(self, collection: Collection, scope: Scope, expr: str,
              limit: int) -> list[StoredRecord]:
        return [record for record, _ in self._full_rows(collection, scope, expr, limit, [])]

    def _full_rows(self, collection: Collection, scope: Scope, expr: str, limit: int,
                   extra: list[str]) -> list[tuple[StoredRecord, dict[str, Any]]]:
        fields = [*_OUTPUT, "dense", *extra]
        if self.name(collection) not in self._no_tokens:
            fields.append("tokens")
        rows = self._rows(collection, expr, fields, limit, "get", scope)
        out = []
        for row in rows:
            record = self._record(scope, row)
            record.vector = [float(x) for x in row["dense"]]
            record.tokens = row.get("tokens") or None
            out.append((record, row))
        return out

    def query(
        self,
        collection: Collection,
        scope: Scope,
        flt: RecordFilter | None = None,
        limit: int = 100,
    ) -> list[StoredRecord]:
        rows = self._rows(collection, filter_expr(scope, flt), _OUTPUT, limit, "query", scope)
        return [self._record(scope, row) for row in rows]

    def count(self, collection: Collection, scope: Scope) -> int:
        with self._gate.reading(), _milvus_errors("count"):
            rows = self._client.query(self.name(collection), filter=filter_expr(scope, None),
                                      output_fields=["count(*)"],
                                      **self._in_scope(collection, scope))
        return int(rows[0]["count(*)"]) if rows else 0

    def _search(self, collection: Collection, scope: Scope, data: list[Any], field: str,
                k: int, flt: RecordFilter | None) -> list[SearchHit]:
        params = {"metric_type": "BM25"} if field == "sparse" else {"metric_type": "COSINE"}
        with self._gate.reading(), _milvus_errors("search"):
            result = self._client.search(
                self.name(collection), data=data, anns_field=field, limit=k,
                filter=filter_expr(scope, flt), output_fields=_OUTPUT, search_params=params,
                **self._in_scope(collection, scope))
        hits = []
        for hit in result[0]:
            entity = dict(hit["entity"])
            entity["pk"] = hit.get("pk", hit.get("id"))
            # milvus-lite reports BM25 as a negated distance; the magnitude is the score.
            score = abs(float(hit["distance"])) if field == "sparse" else float(hit["distance"])
            hits.append(SearchHit(record=self._record(scope, entity), score=score))
        return hits

    def search_dense(
        self,
        collection: Collection,
        scope: Scope,
        vector: Sequence[float],
        k: int,
        flt: RecordFilter | None = None,
    ) -> list[SearchHit]:
        return self._search(collection, scope, [[float(x) for x in vector]], "dense", k, flt)

    def search_lexical(
        self,
        collection: Collection,
        scope: Scope,
        text: str,
        k: int,
        flt: RecordFilter | None = None,
    ) -> list[SearchHit]:
        query = text if self.name(collection) in self._legacy else normalize(text)
        if not query.strip():
            return []
        if not self._features.bm25_function or self.name(collection) in self._no_sparse:
            return self._scored_here(collection, scope, query, k, flt)
        return self._search(collection, scope, [query], "sparse", k, flt)

    def _scored_here(self, collection: Collection, scope: Scope, query: str, k: int,
                     flt: RecordFilter | None) -> list[SearchHit]:
        """BM25 for a server without the function: IDF and lengths from the scope's rows
        (its ``lexical`` column), then the best-scored rows that pass ``flt``, fetched in
        pages until ``k`` pass or none is left."""
        legacy = self.name(collection) in self._legacy
        field = "text" if legacy else "lexical"
        rows = self._rows(collection, filter_expr(scope, None), ["pk", field], None, "scan",
                          scope)
        terms = tokenize(query) if legacy else query.split()
        docs = [tokenize(r[field]) if legacy else str(r[field]).split() for r in rows]
        scored = sorted(((-s, str(r["pk"])) for s, r in zip(bm25_term_scores(terms, docs), rows,
                                                              strict=True) if s > 0))
        hits: list[SearchHit] = []
        page = max(4 * k, 64)
        for start in range(0, len(scored), page):
            chunk = {pk: -s for s, pk in scored[start:start + page]}
            pks = json.dumps(list(chunk), ensure_ascii=False)
            expr = f"{filter_expr(scope, flt)} and pk in {pks}"
            with self._gate.reading(), _milvus_errors("lexical"):
                found = self._client.query(self.name(collection), filter=expr,
                                           output_fields=_OUTPUT, limit=len(chunk))
            hits.extend(SearchHit(record=self._record(scope, row), score=chunk[row["pk"]])
                        for row in found)
            if len(hits) >= k:
                break
        hits.sort(key=lambda h: (-h.score, h.record.id))  # ties: by id, as in each page
        return hits[:k]

    def _rows(self, collection: Collection, expr: str, fields: list[str], limit: int | None,
              action: str, scope: Scope | None = None) -> list[dict[str, Any]]:
        """Up to ``limit`` rows ``expr`` selects (every one: None), in pages past a server's
        query window (``MilvusFeatures.query_window``; milvus-lite has none). ``scope``: the
        expression selects that scope's rows only (milvus-lite reads its bucket)."""
        name, window = self.name(collection), self._features.query_window
        where = self._in_scope(collection, scope) if scope is not None else {}
        with self._gate.reading(), _milvus_errors(action):
            if window is None or (limit is not None and limit <= window):
                return list(self._client.query(name, filter=expr, output_fields=fields,
                                               limit=limit, **where))
            rows = list(self._client.query(name, filter=expr, output_fields=fields,
                                           limit=window))
            if len(rows) < window:
                return rows
            pages = self._client.query_iterator(name, batch_size=window, filter=expr,
                                                output_fields=fields,
                                                **({} if limit is None else {"limit": limit}))
            try:
                rows = []
                while page := pages.next():
                    rows.extend(page)
            finally:
                pages.close()
        return rows

    def search_hybrid(
        self,
        collection: Collection,
        scope: Scope,
        vector: Sequence[float],
        text: str,
        k: int,
        flt: RecordFilter | None = None,
    ) -> list[SearchHit]:
        dense = self.search_dense(collection, scope, vector, k, flt)
        lexical = self.search_lexical(collection, scope, text, k, flt)
        # the hits' missing sides exactly (``score_ids``): an id-restricted ANN search misses
        # ids far from the query (measured: 11% of them on a LoCoMo user's episodes)
        return complete_parts(
            fuse_rrf(dense, lexical, k),
            lambda ids: {h.record.id: h.parts
                         for h in score_ids(self, collection, scope, vector, text, ids)})

    # -- the decay sweep's ports (DecayScan, StatusWriter) ------------------------------------
    @staticmethod
    def _decay_fields(row: dict[str, Any]) -> DecayFields:
        scope, _, rid = str(row["pk"]).partition("|")
        return DecayFields.of(scope, rid, row["status"], row["updated_at"], row["confidence"],
                              row.get("payload"))

    def scan_decay_fields(self, collection: Collection, statuses: Sequence[MemoryStatus],
                          batch_size: int = 10_000) -> Iterator[list[DecayFields]]:
        """One paged pass over the collection (by primary key), decay columns only."""
        expr = f"status in {json.dumps(list(statuses), ensure_ascii=False)}"
        with _milvus_errors("scan"):
            with self._gate.reading():
                pages = self._client.query_iterator(self.name(collection), batch_size=batch_size,
                                                    filter=expr, output_fields=_DECAY_OUTPUT)
            try:
                while True:
                    with self._gate.reading():  # per page: a flush may run between pages
                        page = pages.next()
                    if not page:
                        return
                    yield [self._decay_fields(row) for row in page]
            finally:
                pages.close()

    def decay_fields(self, collection: Collection,
                     keys: Sequence[tuple[str, str]]) -> list[DecayFields]:
        if not keys:
            return []
        pks = [f"{scope}|{rid}" for scope, rid in keys]
        with self._gate.reading(), _milvus_errors("decay fields"):
            rows = self._client.query(self.name(collection), ids=pks,
                                      output_fields=_DECAY_OUTPUT)
        return [self._decay_fields(row) for row in rows]

    def set_statuses(self, collection: Collection,
                     changes: Sequence[tuple[str, str, MemoryStatus]]) -> int:
        """A partial upsert of ``status`` alone: text, vectors and payload stay as stored."""
        return self._set_column(collection, "status", changes)

    def set_payloads(self, collection: Collection,
                     changes: Sequence[tuple[str, str, dict[str, Any]]]) -> int:
        """A partial upsert of ``payload`` alone (reinforcement: access counts and times)."""
        return self._set_column(collection, "payload", changes)

    def _set_column(self, collection: Collection, column: str,
                    changes: Sequence[tuple[str, str, Any]]) -> int:
        rows = [{"pk": f"{scope}|{rid}", "scope": scope, column: value}
                for scope, rid, value in changes]
        if not rows:
            return 0
        with self._writes:  # a partial upsert reads the row, then writes it whole
            with self._gate.reading(), _milvus_errors(f"set {column}"):
                if self._features.partial_update:
                    self._client.upsert(self.name(collection), rows, partial_update=True)
                else:
                    rows = self._merged(collection, rows)
                    if rows:
                        self._client.upsert(self.name(collection), rows)
            self._after_write(collection, len(rows))
        return len(rows)

    def _merged(self, collection: Collection, changes: list[dict[str, Any]]
                ) -> list[dict[str, Any]]:
        """Whole rows with ``changes`` applied, for a server that replaces on upsert (rows
        deleted meanwhile are left out, as a partial upsert would not revive them)."""
        name = self.name(collection)
        fields = [*_COPIED, "dense"]
        fields += [] if name in self._legacy else ["lexical"]
        fields += [] if name in self._no_tokens else ["tokens"]
        stored = {row["pk"]: row for row in self._client.query(
            name, ids=[c["pk"] for c in changes], output_fields=fields)}
        return [{**{f: stored[c["pk"]][f] for f in fields},
                 "dense": [float(x) for x in stored[c["pk"]]["dense"]], **c}
                for c in changes if c["pk"] in stored]

    # -- maintenance -----------------------------------------------------------------
    def flush(self, collection: Collection | None = None) -> None:
        targets = [collection] if collection is not None else list(Collection)
        for target in targets:
            started = time.perf_counter()
            with self._writes, self._gate.flushing(), _milvus_errors("flush"):
                self._client.flush(self.name(target))
                self._policy.flushed(target)
            elapsed = time.perf_counter() - started
            self.flush_stats["flushes"] += 1
            self.flush_stats["last_flush_s"] = elapsed
            logger.debug("flushed %s in %.3fs", target.value, elapsed)

    def flush_due(self) -> list[Collection]:
        """Flush whatever the policy says is due (call periodically); returns what it flushed."""
        due = self._policy.due(time.monotonic())
        for collection in due:
            self.flush(collection)
        return due

    def purge_deleted(self) -> PurgeReport:
        """Make deleted rows leave the files: flush the tombstones, then compact the
        collections deleted from. On a Milvus server ``compact`` starts a compaction (its
        old segment files go at the next garbage collection); on milvus-lite the files
        holding deleted rows are rewritten here, before this returns."""
        with self._lock:
            doomed, self._deleted = sorted(self._deleted, key=lambda c: c.value), set()
        report = PurgeReport(collections=[c.value for c in doomed])
        try:
            for collection in doomed:
                self.flush(collection)
                if self._uri.endswith(".db"):
                    report.files_rewritten += compact_deleted(self._uri, self.name(collection))
                else:
                    with _milvus_errors("compact"):
                        self._client.compact(self.name(collection))
        except LiteCompactionUnavailable as exc:
            logger.warning("deleted rows stay in milvus-lite files: %s", exc)
            report.complete = False
        except Exception:
            with self._lock:  # the next purge retries these
                self._deleted.update(doomed)
            raise
        return report

    def ping(self) -> None:
        with _milvus_errors("ping"):
            self._client.list_collections()

    def close(self) -> None:
        with _milvus_errors("close"):
            self._client.close()
