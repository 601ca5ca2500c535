"""The hot index: the long-term memory of each recently served user, in its shard's memory.

``HotIndexStore`` is a write-through ``VectorStore`` over the durable one (Milvus, directly
or through the StoreOwner). A session shard is the single writer of its users' long-term
memory, so every write of a user passes through the shard's ``HotIndexStore``: it goes to
the durable store first and, once that succeeded, to the user's ``HotTable``s. Reads of the
personal collections (facts, episodes, procedures) are served from the tables; the first
touch of a user loads all three from the durable store once (``scan_scope``), vectors and
token vectors included, so a cold load encodes nothing; from a store that keeps each row's
BM25 terms (``TermsScanner``: the Milvus adapter) it tokenizes nothing either. The knowledge
base passes through.

What a hot memory costs (``bench/hot_index_bytes.py``, a LoCoMo user's episodes): the token
vectors are ~12.5 KB of the ~19 KB a memory took in the heap (32 tokens x 384 int8 + a scale),
so by default they live in an unlinked local file per user (``hot_table.TokenSpill``) and a
recall reads back those of its late-interaction candidates; the heap keeps the vector, the
record (by column, its payload as bytes: ``hot_records``) and the BM25 postings (~3.1 KB).

What is computed at write time: the vector (by the writer, as before), the BM25 terms, and
an episode's token vectors for late interaction (``strata.recall.late``), which are also
persisted with the row, so a shard restarted elsewhere rebuilds users lazily by reading.

Reinforcement (``record_access``) changes access counts in the table at once and marks the
rows; ``persist_access`` writes the marked rows' payloads as partial updates in one call
per collection (the shard runs it every second and before a user leaves the index).

A write call that stores many memories of one user (an extraction job) runs them in
``write_batch(scope)``: each write reaches the tables at once, so the block's own reads see
it, and the durable writes go out as one upsert per collection when the block ends. If that
fails, the user leaves the index (to be reloaded from the durable store) and the error
propagates, so nothing the block wrote was acknowledged.

Each user's episode turns are also held in an entity index (``hot_entities.UserEntities``,
#38): built on the first recall whose recipe runs the ``entities`` stage (none of the
default recipes does), then kept current by every write, delete and status or payload
change that reaches the tables (a forgotten or deleted turn leaves it at once), and asked
by recall's ``entities`` stage for the turns a question's entities lead to
(``entity_reach``).

Users leave the index least recently used first when the estimated bytes pass
``max_bytes``, and when idle for ``ttl_s``. Milvus remains the source of truth: an evicted
or restarted index loses nothing but time. Idle users' tables are also written to encrypted local
files (``hot_snapshot``), read back on the user's next load instead of the store while no
write has happened since: every durable write of a user first marks their snapshot stale.

Why this module is long: it implements the whole ``VectorStore`` port (a write-through layer
must answer every method), and its write paths, eviction and access batching share one lock
and one per-user table; the tables themselves (search, BM25, late interaction) are in
``hot_table``.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from collections.abc import Collection as Collection_
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from strata.entities import Reach, default_gazetteer, default_lexicon
from strata.models import LONG_TERM, Collection, MemoryStatus, Scope, StoredRecord
from strata.recall.late import TokenEmbedder, pack_tokens, stored_maxima, unpack_tokens
from strata.stores.hot_entities import EntityReach, UserEntities
from strata.stores.hot_snapshot import HotSnapshots
from strata.stores.hot_table import HotTable, TokenSpill
from strata.stores.lexical import tokenize
from strata.stores.ports import DecayFields, StatusWriter, VectorStore
from strata.stores.served import TableServed

__all__ = ["HOT_COLLECTIONS", "HotIndexStats", "HotIndexStore", "TermsScanner"]

logger = logging.getLogger(__name__)
HOT_COLLECTIONS = tuple(layer.collection for layer in LONG_TERM)  # the user's memories
LATE_COLLECTIONS = (Collection.EPISODES,)  # what late interaction re-scores


@runtime_checkable
class TermsScanner(Protocol):
    """A durable store that returns each row's BM25 terms with a scope's scan (the Milvus
    adapter's ``lexical`` column): a load then runs no tokenizer (~2.7 ms a LoCoMo turn)."""

    def scan_scope_terms(self, collection: Collection, scope: Scope, limit: int = 16_384
                         ) -> list[tuple[StoredRecord, list[str] | None]]: ...


@dataclass
class _User:
    tables: dict[Collection, HotTable]
    last_used: float
    entities: UserEntities | None = None  # the episode turns' entity index
    # the write generation the tables reflect (None: unknown, e.g. another process wrote
    # the user meanwhile: no snapshot is taken), and the generation of this node's current
    # snapshot of them (``hot_snapshot``)
    generation: int | None = None
    sealed: int | None = None

    @property
    def nbytes(self) -> int:
        return (sum(t.nbytes for t in self.tables.values())
                + (self.entities.nbytes if self.entities is not None else 0))

    @property
    def memories(self) -> int:
        return sum(len(t) for t in self.tables.values())


@dataclass
class HotIndexStats:
    """What the index holds now and what it has done (for metrics and the benchmark)."""

    users: int = 0
    memories: int = 0
    bytes: int = 0  # the heap's, estimated (what the cap counts)
    max_bytes: int = 0
    spilled_bytes: int = 0  # token vectors in the users' local spill files
    loads: int = 0
    evictions: int = 0
    hits: int = 0
    pending_access: int = 0
    load_ms: list[float] = field(default_factory=list)
    restored: int = 0  # loads read from a snapshot file instead of the store
    snapshots: int = 0  # snapshot files written


class HotIndexStore(TableServed):
    """See the module docstring. ``tokens`` gives the embedder whose token vectors late
    interaction uses (None: no late interaction data). ``spill_tokens``: the episodes'
    token vectors live in an unlinked local file per user (in ``spill_dir``, the system's
    temporary directory if None), read back for a recall's candidates only
    (``hot_table.TokenSpill``), not in the heap. ``entities``: keep each user's entity
    index (``hot_entities``), built on the first recall that asks for it (a recipe with the
    ``entities`` stage) and kept current by every write after it; the gazetteer and lexicon
    load once per process, then. ``snapshots``: keep idle users' tables in local files and
    load a user from theirs when still current (``hot_snapshot``); ``snapshot_idle_s``: how
    long a user is idle before the sweep writes theirs."""

    def __init__(self, inner: VectorStore, dim: int,
                 tokens: Callable[[], TokenEmbedder | None] | None = None,
                 max_bytes: int = 512 * 2**20, ttl_s: float = 1800.0,
                 clock: Callable[[], float] = time.monotonic,
                 spill_tokens: bool = True, spill_dir: str | None = None,
                 entities: bool = True, snapshots: HotSnapshots | None = None,
                 snapshot_idle_s: float = 60.0) -> None:
        self.inner = inner
        self._snapshots = snapshots
        self._snapshot_idle = snapshot_idle_s
        self._entities = entities
        self._dim = dim
        self._spill = (spill_tokens, spill_dir)
        self._tokens = tokens
        self._max_bytes = max_bytes
        self._ttl = ttl_s
        self._clock = clock
        self._users: OrderedDict[str, _User] = OrderedDict()
        self._pending: dict[tuple[Collection, str], set[str]] = {}
        self._write = threading.RLock()  # durable write + apply, loads, persistence
        self._index = threading.Lock()   # the tables themselves (held briefly)
        self._stats = HotIndexStats(max_bytes=max_bytes)
        # the open write batch: (scope key, collection -> records by id), under ``_write``
        self._batch: tuple[Scope, dict[Collection, dict[str, StoredRecord]]] | None = None

    # -- the index ----------------------------------------------------------------------
    def _user(self, scope: Scope) -> _User:
        """The user's tables, loaded from the durable store on a miss."""
        with self._index:
            user = self._users.get(scope.key)
            if user is not None:
                self._users.move_to_end(scope.key)
                user.last_used = self._clock()
                self._stats.hits += 1
                return user
        with self._write:
            with self._index:
                user = self._users.get(scope.key)
                if user is not None:
                    return user
            started = time.perf_counter()
            tables, generation = self._restore(scope)
            restored = tables is not None
            if tables is None:
                tables = {c: self._load(c, scope) for c in HOT_COLLECTIONS}
            user = _User(tables, self._clock(), generation=generation,  # the entity index:
                         sealed=generation if restored else None)       # on its first use
            with self._index:
                self._users[scope.key] = user
                self._stats.loads += 1
                self._stats.restored += restored
                self._stats.load_ms = [*self._stats.load_ms[-99:],
                                       (time.perf_counter() - started) * 1000]
            self._evict(keep=scope.key)
            return user

    def _entity_index(self, episodes: HotTable) -> UserEntities | None:
        """A loaded user's entity index over their episode turns (None: not kept)."""
        if not self._entities:
            return None
        entities = UserEntities(default_gazetteer(), default_lexicon())
        records = (episodes.record(i) for i in episodes.ids())
        entities.load((r for r in records if r is not None), episodes.speakers)
        return entities

    def _table(self, collection: Collection) -> HotTable:
        return HotTable(self._dim, self._spill_for(collection))

    def _spill_for(self, collection: Collection) -> TokenSpill | None:
        spill, directory = self._spill
        return TokenSpill(directory) if spill and collection in LATE_COLLECTIONS else None

    # -- snapshots (``hot_snapshot``) ------------------------------------------------------
    def _restore(self, scope: Scope) -> tuple[dict[Collection, HotTable] | None, int | None]:
        """The user's tables from their snapshot if current, and the write generation they
        reflect (read before any load from the store: a write after it shows)."""
        if self._snapshots is None:
            return None, None
        try:
            tables, generation = self._snapshots.read(scope.key, self._spill_for)
        except Exception as exc:  # Redis or the disk: the store has it all
            logger.warning("hot snapshot of %s not read (%s): loading from the store",
                           scope.key, exc)
            return None, None
        if tables is not None and not set(HOT_COLLECTIONS) <= set(tables):
            return None, generation
        return tables, generation

    def _written(self, keys: Collection_[str]) -> None:
        """Before a durable write of these users' memories: their snapshots stop being
        current everywhere (raises if that cannot be recorded: nothing is written then)."""
        if self._snapshots is None or not keys:
            return
        generations = self._snapshots.marks.invalidate(keys)
        self._snapshots.discard(keys)
        with self._index:
            for key, generation in generations.items():
                user = self._users.get(key)
                if user is not None:  # another process wrote in between: not known now
                    known = user.generation is not None and generation == user.generation + 1
                    user.generation = generation if known else None
                    user.sealed = None

    def _seal(self, key: str, user: _User) -> bool:
        """Write the user's snapshot if theirs is not current (under ``_write``)."""
        generation = user.generation
        if self._snapshots is None or generation is None or user.sealed == generation:
            return False
        with self._index:
            dumped = self._snapshots.dump(user.tables)
        try:
            if dumped is None or not self._snapshots.write(key, generation, dumped):
                return False
        except Exception as exc:  # the next sweep tries again; the store has it all
            logger.warning("hot snapshot of %s not written: %s", key, exc)
            return False
        user.sealed = generation
        self._stats.snapshots += 1
        return True

    def seal_idle(self) -> int:
        """Write the snapshots of users idle ``snapshot_idle_s`` whose file is not current
        (the shard's sweep calls this); how many were written."""
        now = self._clock()
        with self._index:
            idle = [(k, u) for k, u in self._users.items()
                    if now - u.last_used >= self._snapshot_idle]
        written = self._seal_users(idle)
        if self._snapshots is not None:
            self._snapshots.prune()
        return written

    def seal_all(self, budget_s: float) -> int:
        """Write the snapshots of every held user whose file is not current, the most
        recently used first, for at most ``budget_s`` (a stopping shard: its users' next
        first touch, after the restart, reads them)."""
        with self._index:
            users = list(reversed(self._users.items()))
        return self._seal_users(users, time.monotonic() + budget_s)

    def _seal_users(self, users: Sequence[tuple[str, _User]],
                    deadline: float = float("inf")) -> int:
        written = 0
        if self._snapshots is None:
            return written
        for key, user in users:
            if time.monotonic() >= deadline:
                break
            with self._write:
                if self._users.get(key) is user:
                    self._persist({k: v for k, v in self._pending.items() if k[1] == key})
                    written += self._seal(key, user)
        return written

    def _load(self, collection: Collection, scope: Scope) -> HotTable:
        table = self._table(collection)
        if isinstance(self.inner, TermsScanner):  # the terms as written: no tokenizing
            rows = self.inner.scan_scope_terms(collection, scope)
            records, terms = [r for r, _ in rows], [t for _, t in rows]
        else:
            records = self.inner.scan_scope(collection, scope)
            terms = [None] * len(records)
        missing = [r for r in records if collection in LATE_COLLECTIONS and not r.tokens]
        encoded = self._encode_tokens([r.text for r in missing])
        if missing and encoded:
            logger.info("encoded token vectors of %d stored %s of %s (stored before they "
                        "were persisted)", len(missing), collection.value, scope.key)
            for record, packed in zip(missing, encoded, strict=True):
                record.tokens = packed
        for record, record_terms in zip(records, terms, strict=True):
            table.put(record, record.vector or [0.0] * self._dim, _raw(record.tokens),
                      record_terms)
        table.trim()
        return table

    def _encode_tokens(self, texts: Sequence[str]) -> list[str] | None:
        embedder = self._tokens() if self._tokens is not None and texts else None
        if embedder is None:
            return None
        return [pack_tokens(v) for v in embedder.token_vectors(list(texts))]

    def _evict(self, keep: str) -> None:
        """Least recently used users out while over the byte cap; idle ones past the TTL."""
        now = self._clock()
        with self._index:
            total = sum(u.nbytes for u in self._users.values())
            doomed = []
            for key, user in self._users.items():
                if key == keep:
                    continue
                if total > self._max_bytes or now - user.last_used > self._ttl:
                    doomed.append(key)
                    total -= user.nbytes
        for key in doomed:
            self._persist({k: v for k, v in self._pending.items() if k[1] == key})
            leaving = self._users.get(key)
            if leaving is not None:
                self._seal(key, leaving)
            with self._index:
                self._users.pop(key, None)
                self._stats.evictions += 1

    def sweep(self) -> int:
        """Drop users idle past the TTL and write the snapshots of idle users (the shard
        calls this periodically); how many users left."""
        with self._write:
            before = len(self._users)
            self._evict(keep="")
            left = before - len(self._users)
        self.seal_idle()
        return left

    def stats(self) -> HotIndexStats:
        with self._index:
            users = list(self._users.values())
            return HotIndexStats(
                users=len(users), memories=sum(u.memories for u in users),
                bytes=sum(u.nbytes for u in users), max_bytes=self._max_bytes,
                spilled_bytes=sum(t.spilled_bytes for u in users for t in u.tables.values()),
                loads=self._stats.loads, evictions=self._stats.evictions,
                hits=self._stats.hits, pending_access=sum(len(v) for v in self._pending.values()),
                load_ms=list(self._stats.load_ms), restored=self._stats.restored,
                snapshots=self._stats.snapshots)

    def is_hot(self, scope: Scope) -> bool:
        return scope.key in self._users

    def warm(self, scope: Scope) -> None:
        """Load the user now if not in the index (a recall does this before it needs the
        query's vector)."""
        self._user(scope)

    def late_scorer(self, scope: Scope, query_tokens: Any
                    ) -> Callable[[str, Sequence[str]], list[list[float]]]:
        """Late interaction from the stored token vectors of this user's episodes (looked
        up by text; a text the index does not know, e.g. a merged pair, is encoded)."""
        table = self._user(scope).tables[Collection.EPISODES]

        def score(_query: str, texts: Sequence[str]) -> list[list[float]]:
            with self._index:
                blobs = [table.tokens_for_text(t) for t in texts]
            unknown = [t for t, b in zip(texts, blobs, strict=True) if b is None]
            fresh = iter(self._encode_tokens(unknown) or [""] * len(unknown))
            out = []
            for blob in blobs:
                rows, scale = unpack_tokens(blob if blob is not None else next(fresh))
                out.append(stored_maxima(query_tokens, rows, scale))
            return out

        return score

    def entity_reach(self, scope: Scope) -> EntityReach | None:
        """What the user's entity index reaches from a question (None: no index kept)."""
        user = self._user(scope)
        if user.entities is None and self._entities:
            with self._write:  # built on the first recall that asks (only recipes with the
                if user.entities is None:  # ``entities`` stage do): no cost for the rest
                    user.entities = self._entity_index(user.tables[Collection.EPISODES])
        entities = user.entities
        if entities is None:
            return None
        table = user.tables[Collection.EPISODES]

        def reached(question: str) -> Reach:
            with self._index:
                speakers = frozenset(table.speakers)
            return entities.reach(question, speakers)

        return reached

    def speakers(self, scope: Scope) -> frozenset[str]:
        """The people speaking in the user's multi-party conversations (their episodes'
        ``metadata.speaker``)."""
        table = self._user(scope).tables[Collection.EPISODES]
        with self._index:
            return frozenset(table.speakers)

    def terms_of(self, scope: Scope) -> Callable[[str], Collection_[str]]:
        """A text's index terms as the user's episodes table stored them at write time
        (``strata.stores.lexical.tokenize`` for a text it does not hold)."""
        table = self._user(scope).tables[Collection.EPISODES]

        def terms(text: str) -> Collection_[str]:
            with self._index:
                known = table.terms_for_text(text)
            return known if known is not None else tokenize(text)

        return terms

    # -- writes (durable first, then the table) -----------------------------------------
    def _with_tokens(self, collection: Collection, scope: Scope,
                     records: Sequence[StoredRecord]) -> list[StoredRecord]:
        """Records to write, each episode with its token vectors: kept from the indexed
        row when the text is unchanged, else encoded (in one batch)."""
        if collection not in LATE_COLLECTIONS:
            return list(records)
        table = self._user(scope).tables[collection]
        out, todo = [], []
        for record in records:
            if record.tokens:
                out.append(record)
                continue
            known = table.record(record.id)
            blob = table.tokens_of(record.id) if known and known.text == record.text else None
            if blob is None:
                blob = table.tokens_for_text(record.text)
            packed = base64.b64encode(blob).decode("ascii") if blob else None
            out.append(record.model_copy(update={"tokens": packed}))
            if packed is None:
                todo.append(len(out) - 1)
        encoded = self._encode_tokens([out[i].text for i in todo]) or []
        for i, packed in zip(todo, encoded, strict=False):
            out[i] = out[i].model_copy(update={"tokens": packed})
        return out

    def _apply(self, collection: Collection, scope: Scope,
               records: Sequence[StoredRecord]) -> None:
        user = self._users.get(scope.key)
        if user is None:
            return
        with self._index:
            table = user.tables[collection]
            for record in records:
                table.put(record, record.vector or [0.0] * self._dim, _raw(record.tokens))
            speakers = frozenset(table.speakers)
        if collection is Collection.EPISODES and user.entities is not None:
            user.entities.apply(records, speakers)

    def _write_records(self, collection: Collection, scope: Scope,
                       records: Sequence[StoredRecord], upsert: bool) -> None:
        write = self.inner.upsert if upsert else self.inner.insert
        if collection not in HOT_COLLECTIONS:
            write(collection, scope, records)
            return
        with self._write:
            ready = self._with_tokens(collection, scope, records)
            batch = self._batch
            if batch is not None and batch[0].key == scope.key and upsert:
                self._apply(collection, scope, ready)
                batch[1].setdefault(collection, {}).update((r.id, r) for r in ready)
                return
            self._flush_batch()
            self._written([scope.key])
            write(collection, scope, ready)
            self._user(scope)
            self._apply(collection, scope, ready)
            self._evict(keep=scope.key)  # the user grew: the others make room

    @contextmanager
    def write_batch(self, scope: Scope) -> Iterator[None]:
        """See the module docstring. Holds the index's write lock for the block."""
        with self._write:
            if self._batch is not None:  # nested: the outer block sends everything
                yield
                return
            self._user(scope)
            self._batch = (scope, {})
            try:
                yield
                self._flush_batch()
            except BaseException:
                with self._index:
                    self._users.pop(scope.key, None)  # reloaded from the durable store
                raise
            finally:
                self._batch = None
            self._evict(keep=scope.key)

    def _flush_batch(self) -> None:
        """Send the open batch's writes (under ``_write``); the batch stays open."""
        if self._batch is None:
            return
        scope, pending = self._batch
        if pending:
            self._written([scope.key])
        while pending:
            collection, records = next(iter(pending.items()))
            self.inner.upsert(collection, scope, list(records.values()))
            del pending[collection]

    def insert(self, collection: Collection, scope: Scope,
               records: Sequence[StoredRecord]) -> None:
        self._write_records(collection, scope, records, upsert=False)

    def upsert(self, collection: Collection, scope: Scope,
               records: Sequence[StoredRecord]) -> None:
        self._write_records(collection, scope, records, upsert=True)

    def delete(self, collection: Collection, scope: Scope, ids: Sequence[str]) -> int:
        with self._write:
            self._flush_batch()
            if collection in HOT_COLLECTIONS:
                self._written([scope.key])
            removed = self.inner.delete(collection, scope, ids)
            user = self._users.get(scope.key)
            if user is not None and collection in HOT_COLLECTIONS:
                with self._index:
                    user.tables[collection].delete(ids)
                    self._pending.get((collection, scope.key), set()).difference_update(ids)
                if collection is Collection.EPISODES and user.entities is not None:
                    user.entities.forget(ids)
            return removed

    def delete_scope(self, collection: Collection, scope: Scope) -> int:
        with self._write:
            self._flush_batch()
            if collection in HOT_COLLECTIONS:
                self._written([scope.key])
            removed = self.inner.delete_scope(collection, scope)
            with self._index:
                user = self._users.get(scope.key)
                if user is not None and collection in HOT_COLLECTIONS:
                    user.tables[collection] = self._table(collection)
                    if collection is Collection.EPISODES and user.entities is not None:
                        user.entities = self._entity_index(user.tables[collection])
                self._pending.pop((collection, scope.key), None)
            return removed

    def set_statuses(self, collection: Collection,
                     changes: Sequence[tuple[str, str, MemoryStatus]]) -> int:
        inner = self.inner
        if not isinstance(inner, StatusWriter):
            raise TypeError("the durable store cannot update statuses")
        return self._set_column(collection, changes, inner.set_statuses,
                                lambda table, rid, status: table.replace_fields(rid, status=status))

    def decay_fields(self, collection: Collection,
                     keys: Sequence[tuple[str, str]]) -> list[DecayFields]:
        if not isinstance(self.inner, StatusWriter):
            raise TypeError("the durable store cannot read decay fields")
        self.persist_access()  # the decay rule reads last access times
        return self.inner.decay_fields(collection, keys)

    def set_payloads(self, collection: Collection,
                     changes: Sequence[tuple[str, str, dict[str, Any]]]) -> int:
        return self._set_column(
            collection, changes, self.inner.set_payloads,
            lambda table, rid, payload: table.replace_fields(rid, payload=dict(payload)))

    def _set_column(self, collection: Collection, changes: Sequence[tuple[str, str, Any]],
                    write: Callable[[Collection, Any], int],
                    apply: Callable[[HotTable, str, Any], object]) -> int:
        """A one-column partial update of rows named by (scope key, id): durable first,
        then the indexed rows of loaded users."""
        with self._write:
            self._flush_batch()
            if collection in HOT_COLLECTIONS:
                self._written({key for key, _, _ in changes})
            written = write(collection, changes)
            if collection in HOT_COLLECTIONS:
                changed: dict[str, list[StoredRecord]] = {}
                with self._index:
                    for key, rid, value in changes:
                        user = self._users.get(key)
                        if user is not None:
                            apply(user.tables[collection], rid, value)
                            record = user.tables[collection].record(rid)
                            if record is not None:
                                changed.setdefault(key, []).append(record)
                if collection is Collection.EPISODES:  # forgotten or archived: leaves it now
                    self._entities_changed(changed)
            return written

    def _entities_changed(self, changed: dict[str, list[StoredRecord]]) -> None:
        for key, records in changed.items():
            user = self._users.get(key)
            if user is not None and user.entities is not None:
                with self._index:
                    speakers = frozenset(user.tables[Collection.EPISODES].speakers)
                user.entities.apply(records, speakers)

    # -- reinforcement ------------------------------------------------------------------
    def record_access(self, scope: Scope, ids: Sequence[str], at: datetime) -> int:
        """Recall returned these: access count + 1 and the access time, in the table now;
        persisted by ``persist_access``."""
        user = self._user(scope)
        done = 0
        with self._index:
            for collection in HOT_COLLECTIONS:
                table = user.tables[collection]
                for rid in ids:
                    record = table.record(rid)
                    if record is None:
                        continue
                    payload = {**record.payload,
                               "access_count": int(record.payload.get("access_count", 0)) + 1,
                               "last_access_at": at.isoformat()}
                    table.replace_fields(rid, payload=payload)
                    self._pending.setdefault((collection, scope.key), set()).add(rid)
                    done += 1
        return done

    def persist_access(self) -> int:
        """Write the reinforced rows' payloads (partial updates, one call per collection)."""
        with self._write:
            with self._index:
                pending, self._pending = self._pending, {}
            return self._persist(pending)

    def _persist(self, pending: dict[tuple[Collection, str], set[str]]) -> int:
        by_collection: dict[Collection, list[tuple[str, str, dict[str, Any]]]] = {}
        with self._index:
            for (collection, key), ids in pending.items():
                self._pending.pop((collection, key), None)
                user = self._users.get(key)
                if user is None:
                    continue
                for rid in ids:
                    record = user.tables[collection].record(rid)
                    if record is not None:
                        by_collection.setdefault(collection, []).append(
                            (key, rid, record.payload))
        written = 0
        for collection, changes in by_collection.items():
            try:
                self._written({key for key, _, _ in changes})
                written += self.inner.set_payloads(collection, changes)
            except Exception:
                with self._index:  # kept for the next round; nothing is lost
                    for key, rid, _ in changes:
                        self._pending.setdefault((collection, key), set()).add(rid)
                raise
        return written

    # -- reads ----------------------------------------------------------------------------
    def _served(self, collection: Collection, scope: Scope) -> HotTable | None:
        return self._user(scope).tables[collection] if collection in HOT_COLLECTIONS else None

    def _guard(self) -> AbstractContextManager[object]:
        return self._index

    def get(self, collection: Collection, scope: Scope, ids: Sequence[str]) -> list[StoredRecord]:
        table = self._served(collection, scope)
        if table is None:
            return self.inner.get(collection, scope, ids)
        with self._index:
            return [r for r in (table.record(i, with_vector=True) for i in ids) if r is not None]

    def scan_scope(self, collection: Collection, scope: Scope,
                   limit: int = 16_384) -> list[StoredRecord]:
        table = self._served(collection, scope)
        if table is None:
            return self.inner.scan_scope(collection, scope, limit)
        with self._index:
            return [r for r in (table.record(i, with_vector=True)
                                for i in table.ids()[:limit]) if r is not None]

    # -- pass-through ---------------------------------------------------------------------
    def ensure_collections(self, dim: int) -> None:
        self.inner.ensure_collections(dim)

    def flush(self, collection: Collection | None = None) -> None:
        self.persist_access()
        self.inner.flush(collection)

    def ping(self) -> None:
        self.inner.ping()

    def close(self) -> None:
        self.persist_access()
        self.seal_all(budget_s=2.0)
        self.inner.close()


def _raw(packed: str | None) -> bytes | None:
    return base64.b64decode(packed) if packed else None
