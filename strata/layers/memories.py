"""The long-term memory of a user as one facade: the memories API, forgetting, reinforcement.

Runs inside the user's session shard (the single writer of that user's long-term memory).

Why this module is long: it is the one facade every write of a user's long-term memory goes
through — create, edit, delete with what was made from the same words, forget and its undo,
reinforcement — and those share the lookups across the three collections; split, each part
would need the others' finding and rewriting of a memory.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from strata.conflict import ConflictResolver
from strata.errors import Forbidden, InvalidInput, NotFound
from strata.extract.base import PERSONAL_KEYS, Candidate, Intent, attributed, attribution
from strata.extract.exchanges import EXCHANGE
from strata.extract.filters import WriteFilter
from strata.extract.pii import find_pii
from strata.extract.worker import LongTermWriter
from strata.layers.episodic import EpisodeStore
from strata.layers.forget_match import (
    EVERYTHING,
    MatchPolicy,
    Rival,
    by_meaning,
    forgettable,
    names,
    rival_of,
    said_before,
)
from strata.layers.memory_models import MemoryCreate, MemoryPatch
from strata.layers.procedural import ProcedureSpec, ProcedureStore, render
from strata.layers.records import from_record, to_record
from strata.layers.semantic import FactStore
from strata.layers.transfer import read_rows
from strata.models import (
    KEYWORDS,
    LONG_TERM,
    Collection,
    Layer,
    MemoryItem,
    MemoryKind,
    MemoryStatus,
    Provenance,
    RecordFilter,
    Scope,
    Source,
    StoredRecord,
    check_id,
    embedded_text,
    is_visible,
    utcnow,
)
from strata.stores.embedders import PreparedEmbedder
from strata.stores.hot import HotIndexStore
from strata.stores.ports import Embedder, VectorStore, cosine
from strata.stores.redis_ports import ForgetRequest

__all__ = ["LongTermMemory"]

logger = logging.getLogger(__name__)
MAX_EXCHANGES_SCAN = 16_384  # one session's exchanges (Milvus's largest query limit)
LIST_LIMIT = 1000
FORGET_POOL = 20  # memories per collection and query a forget ranks by meaning
MIN_SHARED_TEXT = 8  # shorter shared text ("ok", a name) does not tie two memories together


def _plain(text: str) -> str:
    """Text compared for "the same words": case-folded, runs of space as one, no end stops."""
    return " ".join(text.casefold().split()).strip(" .!?。！？")


def _strings(value: Any) -> list[str]:
    """Every string inside a JSON-like value (keys of objects included)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def _refuse_secrets(*fields: Any) -> None:
    """Every field that reaches long-term memory — text, key, value, scope tags, metadata (a
    procedure's steps too) — passes the sensitive-data filter; a write that carries a secret is
    refused whole, before anything is stored."""
    if any(find_pii(text) for field in fields for text in _strings(field)):
        raise InvalidInput("the memory contains sensitive data (ID, card, password, key, phone "
                           "or address), which Strata never stores long-term")


def _procedure_spec(metadata: dict[str, Any]) -> ProcedureSpec:
    """A procedure's metadata as its spec; what is wrong with it is the client's (422)."""
    try:
        return ProcedureSpec.model_validate(metadata)
    except ValidationError as exc:
        raise InvalidInput("procedure metadata: " + "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())) from None


def _sharing(item: MemoryItem, patch: MemoryPatch, viewer: str | None) -> dict[str, Any]:
    """The context and sharing a patch changes. Only the memory's own agent (or an admin,
    ``viewer`` None) changes who sees it; a private memory needs an agent."""
    changes: dict[str, Any] = {}
    if patch.context is not None:
        changes["context"] = patch.context or None
    if patch.visibility is None and patch.shared_with is None:
        return changes
    if viewer is not None and item.agent != viewer:
        raise Forbidden("only the agent that learned a memory (or an admin key) changes who "
                        "sees it")
    visibility = patch.visibility or item.visibility
    if visibility != "shared" and not item.agent:
        raise InvalidInput(f"a memory of no agent cannot be {visibility}: it has no agent to "
                           "keep it")
    changes["visibility"] = visibility
    if patch.shared_with is not None:
        changes["shared_with"] = sorted(set(patch.shared_with))
    return changes


class LongTermMemory:
    """Facts, episodes and procedures of users, behind the memories API."""

    def __init__(self, vectors: VectorStore, embedder: Embedder,
                 resolver: ConflictResolver | None = None,
                 write_filter: WriteFilter | None = None, procedure_cap: int = 100,
                 forget_policy: MatchPolicy | None = None) -> None:
        self.vectors = vectors
        self.embedder = embedder
        self.forget_policy = forget_policy or MatchPolicy()  # how a forget matches by meaning
        prepared = PreparedEmbedder(embedder)  # the writer encodes a job's texts in one batch
        self.facts = FactStore(vectors, prepared, resolver)
        self.episodes = EpisodeStore(vectors, prepared)
        self.procedures = ProcedureStore(vectors, embedder, procedure_cap)
        self.filter = write_filter or WriteFilter()
        self.writer = LongTermWriter(self.facts, self.episodes, self.filter, prepared, vectors)

    # -- reads -----------------------------------------------------------------------------
    def find(self, scope: Scope, memory_id: str,
             viewer: str | None = None) -> tuple[Collection, MemoryItem]:
        """The memory by id, if ``viewer`` (an agent; "" none; None: any) may see it."""
        try:
            check_id("memory_id", memory_id)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
        for layer in LONG_TERM:
            rows = self.vectors.get(layer.collection, scope, [memory_id])
            if rows and (viewer is None or is_visible(rows[0].payload, viewer)):
                return layer.collection, from_record(rows[0])
        raise NotFound(f"no memory {memory_id!r} for this user")

    def list_items(self, scope: Scope, kind: MemoryKind | None = None, status: str | None = None,
                   q: str | None = None, limit: int = 100, viewer: str | None = None,
                   context: str | None = None) -> list[MemoryItem]:
        layers = [Layer.of_kind(kind)] if kind else LONG_TERM
        flt = RecordFilter(statuses=[MemoryStatus(status)] if status else None, visible_to=viewer,
                           payload_equals={"context": context} if context else {})
        items: list[MemoryItem] = []
        for layer in layers:
            collection = layer.collection
            if q:
                vector = self.embedder.encode([q])[0].tolist()
                hits = self.vectors.search_hybrid(collection, scope, vector, q, limit, flt)
                items.extend(from_record(h.record) for h in hits)
            else:
                items.extend(from_record(r) for r in self.vectors.query(collection, scope, flt,
                                                                        LIST_LIMIT))
        if not q:
            items.sort(key=lambda i: i.updated_at, reverse=True)
        return items[:limit]

    def history(self, scope: Scope, memory_id: str,
                viewer: str | None = None) -> list[MemoryItem]:
        collection, item = self.find(scope, memory_id, viewer)
        if collection is Collection.FACTS:
            return [v for v in self.facts.history(scope, memory_id)
                    if v.visible_to(viewer)]
        return [item]

    # -- writes ----------------------------------------------------------------------------
    def create(self, scope: Scope, body: MemoryCreate) -> tuple[MemoryItem, str]:
        """Create a memory; returns it and what happened (insert, supersede, …)."""
        provenance = Provenance(session_id=body.session_id)
        _refuse_secrets(body.key, body.value, body.text, body.scope_tags, body.metadata)
        if body.kind is MemoryKind.PROCEDURE:
            if not body.key:
                raise InvalidInput("a procedure needs key (its name)")
            return self.procedures.create(scope, body.key, _procedure_spec(body.metadata)), "insert"
        if body.kind is MemoryKind.FACT:
            if not body.key or not (body.value or body.text):
                raise InvalidInput("a fact needs key and value")
            value = body.value or body.text or ""
            candidate = Candidate(kind=MemoryKind.FACT, key=body.key, value=value,
                                  text=body.text or f"{body.key}: {value}",
                                  confidence=body.confidence, source=body.source,
                                  intent=Intent.REMEMBER, scope_tags=body.scope_tags,
                                  provenance=provenance, event_time=utcnow(),
                                  metadata=body.metadata)
        else:
            if not body.text:
                raise InvalidInput("an episode needs text")
            if not isinstance(body.metadata.get("type", ""), str):
                raise InvalidInput("metadata.type of an episode must be a string")
            candidate = Candidate(kind=MemoryKind.EPISODE, text=body.text,
                                  confidence=body.confidence, source=body.source,
                                  scope_tags=body.scope_tags, provenance=provenance,
                                  event_time=utcnow(), episode_type=body.metadata.get("type"),
                                  metadata=body.metadata)
        if body.visibility in ("private", "agents") and not body.agent:
            raise InvalidInput(f"a {body.visibility} memory needs its agent (a key bound to an "
                               "agent, or agent in the body)")
        candidate = attributed(candidate, body.agent, body.context,
                               visibility=body.visibility, shared_with=body.shared_with)
        if body.kind is MemoryKind.FACT:
            write = self.facts.apply(scope, candidate)
            return write.item, write.decision.action.value
        episode = self.episodes.apply(scope, candidate)
        return episode.item, episode.action

    def _rewrite(self, collection: Collection, scope: Scope, item: MemoryItem,
                 reembed: bool = False) -> None:
        if reembed:
            vector = self.embedder.encode([embedded_text(item.text, item.metadata)])[0].tolist()
        else:
            rows = self.vectors.get(collection, scope, [item.id])
            if not rows or rows[0].vector is None:
                raise NotFound(f"no memory {item.id!r} for this user")
            vector = rows[0].vector
        self.vectors.upsert(collection, scope, [to_record(item, vector, self.embedder.model_id)])

    def update(self, scope: Scope, memory_id: str, patch: MemoryPatch,
               viewer: str | None = None) -> MemoryItem:
        """Edit a memory. A fact's new value is a new version (the old is superseded).
        Who sees it (visibility, shared_with) only its own agent or an admin (``viewer``
        None) changes."""
        collection, item = self.find(scope, memory_id, viewer)
        _refuse_secrets(patch.text, patch.value, patch.scope_tags, patch.metadata)
        sharing = _sharing(item, patch, viewer)
        if collection is Collection.FACTS and (patch.value or patch.text) and item.key:
            candidate = Candidate(
                kind=MemoryKind.FACT, key=item.key, value=patch.value or item.value,
                text=patch.text or f"{item.key}: {patch.value}",
                confidence=patch.confidence or max(item.confidence, 0.9),
                source=Source.USER_STATED, intent=Intent.OVERRIDE,
                scope_tags=patch.scope_tags if patch.scope_tags is not None else item.scope_tags,
                provenance=Provenance(session_id=f"edit-{utcnow().timestamp()}"),
                event_time=utcnow(), **{**attribution(item), **sharing})
            return self.facts.apply(scope, candidate).item
        changes: dict[str, Any] = {"updated_at": utcnow()}
        if patch.text:
            changes["text"] = patch.text
        if patch.confidence is not None:
            changes["confidence"] = patch.confidence
        if patch.status:
            changes["status"] = MemoryStatus(patch.status)
        if patch.scope_tags is not None:
            changes["scope_tags"] = sorted(patch.scope_tags)
        changes.update(sharing)
        if "context" in sharing and collection is Collection.FACTS:  # its conflict scope too
            tags = [t for t in changes.get("scope_tags", item.scope_tags)
                    if not t.startswith("project:")]
            if sharing["context"] and not (item.key or "").startswith(PERSONAL_KEYS):
                tags.append(f"project:{sharing['context']}")
            changes["scope_tags"] = sorted(tags)
        if patch.metadata is not None:
            changes["metadata"] = {**item.metadata, **patch.metadata}
            if collection is Collection.PROCEDURES:
                changes["text"] = render(str(item.key), _procedure_spec(changes["metadata"]))
        updated = item.model_copy(update=changes)
        if (updated.text != item.text and KEYWORDS in updated.metadata
                and KEYWORDS not in (patch.metadata or {})):  # written for the old words
            updated = updated.model_copy(update={"metadata": {
                k: v for k, v in updated.metadata.items() if k != KEYWORDS}})
        self._rewrite(collection, scope, updated, reembed=(
            updated.text != item.text
            or updated.metadata.get(KEYWORDS) != item.metadata.get(KEYWORDS)))
        if collection is Collection.EPISODES and updated.text != item.text:
            # the exchanges that repeat the old wording go: they would recall it again
            self.vectors.delete(collection, scope, [e.id for e in self._exchanges_of(scope, item)])
        return updated

    def delete(self, scope: Scope, memory_id: str,
               viewer: str | None = None) -> list[MemoryItem]:
        """Delete a memory, every version of it, and what was made from the same words;
        returns everything deleted (the memory and its versions first).

        Made from the same words: a fact or episode (a turn's episode, an exchange, a merged
        event) of the same session that shares a source turn with a deleted version and
        whose text contains that version's text or is contained in it (compared case- and
        space-insensitively, at least ``MIN_SHARED_TEXT`` characters), and every exchange
        that repeats a deleted episode's turns. So deleting a fact also deletes the turn's
        episode and the exchanges that quote the sentence; deleting a turn's episode also
        deletes the facts read from it. The caller removes the source turns from the
        session's WAL, window and snapshot (live or archived): ``delete_memory``.
        """
        collection, item = self.find(scope, memory_id, viewer)
        versions = self.history(scope, memory_id) if collection is Collection.FACTS else [item]
        doomed = {v.id: v for v in versions}
        for version in versions:
            for other in self._same_words(scope, version):
                doomed.setdefault(other.id, other)
            if collection is Collection.EPISODES:
                for other in self._exchanges_of(scope, version):
                    doomed.setdefault(other.id, other)
        by_collection: dict[Collection, list[str]] = {}
        for d in doomed.values():
            by_collection.setdefault(Layer.of_kind(d.kind).collection, []).append(d.id)
        for target, ids in by_collection.items():
            self.vectors.delete(target, scope, ids)
        return list(doomed.values())

    def _same_words(self, scope: Scope, item: MemoryItem) -> list[MemoryItem]:
        """Facts and episodes of ``item``'s session that share a source turn with it and
        hold its text (or are held in it); never ``item`` itself."""
        turns, needle = set(item.provenance.turn_ids), _plain(item.text)
        if not turns or not item.provenance.session_id or len(needle) < MIN_SHARED_TEXT:
            return []
        same_session = RecordFilter(payload_equals={
            "provenance.session_id": item.provenance.session_id})
        found = []
        for collection in (Collection.FACTS, Collection.EPISODES):
            for other in map(from_record, self.vectors.query(collection, scope, same_session,
                                                             MAX_EXCHANGES_SCAN)):
                text = _plain(other.text)
                if (other.id != item.id and turns & set(other.provenance.turn_ids)
                        and len(text) >= MIN_SHARED_TEXT and (needle in text or text in needle)):
                    found.append(other)
        return found

    def _exchanges_of(self, scope: Scope, item: MemoryItem) -> list[MemoryItem]:
        """Exchange memories that share a source turn with ``item`` (never ``item`` itself)."""
        turns = set(item.provenance.turn_ids)
        if not turns or item.metadata.get("type") == EXCHANGE:
            return []
        session = item.provenance.session_id or ""
        rows = self.vectors.query(Collection.EPISODES, scope, RecordFilter(payload_equals={
            "metadata.type": EXCHANGE, "provenance.session_id": session}), MAX_EXCHANGES_SCAN)
        return [m for m in map(from_record, rows) if turns & set(m.provenance.turn_ids)]

    def delete_user(self, scope: Scope) -> int:
        return sum(self.vectors.delete_scope(layer.collection, scope) for layer in LONG_TERM)

    def forget_matching(self, scope: Scope, target: str, viewer: str | None = None,
                        speaker: str | None = None, before: ForgetRequest | None = None,
                        said: str = "", extent: str | None = None) -> dict[str, float]:
        """A "forget" intent: the facts and episodes (exchanges too) that name the target
        (``EVERYTHING``: all of them) get weight 0 at once — those ``forget_match.names``
        holds, and the one(s) ``forget_match.by_meaning`` finds clearly best among the
        user's memories closest to the target and to the whole turn (``said``), every one
        about it for a topic or a person (``extent``). Said by one person of a multi-party
        conversation (``speaker``), it forgets what that person said, not another's. Applied
        later than its turn (``before``: the request, retried), it forgets only what was said
        before it (``metadata.said_at``; a memory that does not say when counts as earlier).
        Returns each forgotten memory's weight before (what ``restore`` puts back)."""
        if target == EVERYTHING:  # "forget everything you know about me"
            live = RecordFilter(statuses=[MemoryStatus.ACTIVE, MemoryStatus.COLD],
                                visible_to=viewer)
            doomed = [(c, r) for c in (Collection.FACTS, Collection.EPISODES)
                      for r in read_rows(self.vectors, c, scope, live)
                      if forgettable(r, speaker, before)]
        else:
            pool = self.forget_rivals(scope, target, said, viewer, speaker, before)
            rivals = [rival for _, _, rival in pool]
            chosen = by_meaning(target, said, extent, rivals, self.forget_policy) | {
                i for i, r in enumerate(rivals) if names(target, r.words, r.dense_target)}
            doomed = [pool[i][:2] for i in sorted(chosen)]
        forgotten: dict[str, float] = {}
        for collection, record in doomed:
            before_weight = from_record(record)
            item = before_weight.model_copy(update={"weight": 0.0, "updated_at": utcnow()})
            self._rewrite(collection, scope, item)
            forgotten[item.id] = before_weight.weight
        return forgotten

    def forget_rivals(self, scope: Scope, target: str, said: str = "",
                      viewer: str | None = None, speaker: str | None = None,
                      before: ForgetRequest | None = None
                      ) -> list[tuple[Collection, StoredRecord, Rival]]:
        """The memories a forget of ``target`` (said in the turn ``said``) may hide, ranked
        by ``forget_matching``: the user's facts and episodes closest to the target and to
        the turn (``FORGET_POOL`` of each collection for each, by hybrid search) that
        ``forget_match.forgettable`` keeps, with their cosines to both."""
        live = RecordFilter(statuses=[MemoryStatus.ACTIVE, MemoryStatus.COLD], visible_to=viewer)
        texts = [target] + ([said] if said and said != target else [])
        queries = dict(zip(texts, (v.tolist() for v in self.embedder.encode(texts)),
                           strict=True))
        pool: list[tuple[Collection, StoredRecord, Rival]] = []
        for collection in (Collection.FACTS, Collection.EPISODES):
            ids = list(dict.fromkeys(h.record.id for text, vector in queries.items()
                                     for h in self.vectors.search_hybrid(
                                         collection, scope, vector, text, FORGET_POOL, live)))
            pool.extend((collection, r, rival_of(r, queries[target], queries.get(said)))
                        for r in self.vectors.get(collection, scope, ids)
                        if forgettable(r, speaker, before))
        return pool

    def restore(self, scope: Scope, weights: Mapping[str, float]) -> int:
        """Undo a forget: each memory still at weight 0 gets its weight back (one deleted or
        edited since stays as it is); how many came back."""
        restored = 0
        for collection in (Collection.FACTS, Collection.EPISODES):
            for row in self.vectors.get(collection, scope, list(weights)):
                item = from_record(row)
                if item.weight > 0.0:
                    continue
                self._rewrite(collection, scope, item.model_copy(
                    update={"weight": weights[item.id], "updated_at": utcnow()}))
                restored += 1
        return restored

    def still_forgotten(self, scope: Scope, ids: Sequence[str]) -> list[str]:
        """Of these memories, the ones that exist and are still at weight 0."""
        return [row.id for collection in (Collection.FACTS, Collection.EPISODES)
                for row in self.vectors.get(collection, scope, list(ids))
                if from_record(row).weight <= 0.0]

    def unforgotten(self, candidates: Sequence[Candidate], requests: Sequence[ForgetRequest]
                    ) -> tuple[list[Candidate], int]:
        """The candidates that no forget request said after them names (``forget_matching``'s
        test, for memories not written yet: a session's extraction that lands after the
        user's "forget …" of what it holds), and how many were left out."""
        pairs = [(cand, req) for cand in candidates if cand.intent is not Intent.FORGET
                 for req in requests if said_before(cand, req)]
        if not pairs:
            return list(candidates), 0
        texts = sorted({t for cand, req in pairs for t in (cand.text, req.target)
                        if t != EVERYTHING})
        vectors = dict(zip(texts, self.embedder.encode(texts), strict=True))
        doomed = {id(cand) for cand, req in pairs if req.target == EVERYTHING or names(
            req.target, [cand.text, cand.key, cand.value],
            cosine(vectors[req.target], vectors[cand.text]))}
        return [c for c in candidates if id(c) not in doomed], len(doomed)

    def reinforce(self, scope: Scope, memory_ids: list[str]) -> int:
        """Recall returned these: bump last access and access count — in the hot index at
        once (persisted in batches), else one get and one upsert per collection."""
        now = utcnow()
        if isinstance(self.vectors, HotIndexStore):
            return self.vectors.record_access(scope, memory_ids, now)
        done = 0
        for collection in (layer.collection for layer in LONG_TERM):
            rows = self.vectors.get(collection, scope, memory_ids)
            if not rows:
                continue
            updated = []
            for row in rows:
                item = from_record(row)
                item = item.model_copy(update={"access_count": item.access_count + 1,
                                               "last_access_at": now})
                updated.append(to_record(item, row.vector or [], row.embed_model))
            self.vectors.upsert(collection, scope, updated)
            done += len(updated)
        return done
