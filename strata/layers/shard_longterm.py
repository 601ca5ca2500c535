"""The long-term side of a session shard: the single writer of its users' long-term memory.

Explicit "remember"/override intents are written before the turn call returns (through
``q:ltm:high``, acknowledged once applied, so a failure leaves the job for a worker);
"forget" intents drop matching memories' weight to zero at once; deletes cascade through
every store and leave a content-free tombstone in the audit stream, and a background purge
(``strata.layers.forgetting.FilePurge``) then removes the deleted text from the stores' files.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from strata.errors import BackendUnavailable, NotFound, StrataError
from strata.extract.base import Candidate, Intent, attribute
from strata.extract.intents import is_declaration
from strata.extract.rules import RuleExtractor, detect_intent
from strata.extract.worker import WriteSummary
from strata.layers.corrections import corrections_of
from strata.layers.decay import (
    DecayPolicy,
    StatusChange,
    SweepCounts,
    apply_changes,
    sweep_scope,
)
from strata.layers.forgetting import FilePurge
from strata.layers.memories import LongTermMemory, MemoryCreate, MemoryPatch
from strata.layers.proactive import (
    FOREVER_S,
    FollowUp,
    FollowUpPolicy,
    choose,
    from_plans,
    from_task_states,
)
from strata.layers.transfer import import_items
from strata.layers.working import ContextAside, SessionState
from strata.models import (
    Collection,
    MemoryItem,
    MemoryKind,
    MemoryStatus,
    RecallRequest,
    RecordFilter,
    Role,
    Scope,
    Turn,
    utcnow,
)
from strata.portability import ImportCounts
from strata.recall.late import QueryBatcher, embed_queries
from strata.recall.recipes import DEFAULT, RecallRecipe
from strata.recall.routing import RouteDecision
from strata.recall.scoring import ScoredItem
from strata.recall.service import (
    LONG_TERM,
    LayerCandidates,
    RecallService,
    correction_items,
    could_pass,
    decide_route,
    select_candidates,
)
from strata.settings import Settings
from strata.stores.hot import HotIndexStore
from strata.stores.ports import Purging, QueryEmbedding, StatusWriter
from strata.stores.redis import QUEUE_HIGH, QUEUE_LOW, RedisStore

if TYPE_CHECKING:
    from strata.layers.sessions import WorkingMemoryView, _Entry

__all__ = ["IntentResult", "LongTermShardOps", "MemoryAnswer"]

logger = logging.getLogger(__name__)
HIGH_GROUP = "extractors"
EXPLICIT_MIN_CONFIDENCE = 0.6  # a declared fact below this waits for the session end


class IntentResult(BaseModel):
    remembered: list[str] = Field(default_factory=list)
    forgotten: list[str] = Field(default_factory=list)
    deferred: bool = False  # the long-term write failed; a worker will apply it


class MemoryAnswer(BaseModel):
    """A shard's half of a recall: the route, the session's working memory, the scored
    candidates of the personal layers (from the hot index), and the most-used facts when
    none of them passes the threshold (``strata.recall.service.assemble``'s last resort)."""

    decision: RouteDecision
    working: Any = None  # WorkingMemoryView
    found: LayerCandidates
    most_used: list[ScoredItem] = Field(default_factory=list)
    embedding: Any = None  # the query's QueryEmbedding, when the shard computed it
    # the user's corrections of knowledge chunks, by chunk id (when knowledge is routed)
    corrections: dict[str, ScoredItem] = Field(default_factory=dict)


class LongTermShardOps:
    """Mixed into ``SessionShardService``; uses its Redis, sessions and lock."""

    shard_id: int
    _settings: Settings
    _redis: RedisStore
    _sessions: OrderedDict[str, _Entry]
    _lock: threading.RLock  # the sessions
    # the users' long-term memory (single writer); taken after ``_lock`` when both are
    # needed, so a long extraction write never holds up turns, closes or recalls
    _memory_lock: threading.RLock
    _longterm_factory: Callable[[], LongTermMemory] | None
    _longterm: LongTermMemory | None
    _recall: RecallService | None = None
    _queries: QueryBatcher | None = None  # concurrent recalls' queries, embedded together
    _purge: FilePurge | None = None
    _build_lock = threading.Lock()

    @property
    def longterm(self) -> LongTermMemory:
        if self._longterm is None:
            if self._longterm_factory is None:
                raise BackendUnavailable("this shard has no long-term memory configured")
            with self._build_lock:  # concurrent calls build the model once
                if self._longterm is None:
                    self._longterm = self._longterm_factory()
        return self._longterm

    @property
    def file_purge(self) -> FilePurge:
        """The purge that follows deletes: the AOF rewrite, and the compaction of the durable
        vector store (under the hot index) when there is one."""
        if self._purge is None:
            durable = None
            if self._longterm_factory is not None:
                vectors = self.longterm.vectors
                inner = vectors.inner if isinstance(vectors, HotIndexStore) else vectors
                durable = inner if isinstance(inner, Purging) else None
            with self._build_lock:
                if self._purge is None:
                    self._purge = FilePurge(self._redis, durable)
        return self._purge

    def view(self, scope: Scope, session_id: str,
             viewer: str | None = None) -> WorkingMemoryView:
        raise NotImplementedError  # SessionShardService's

    # -- recall: the shard serves its users' long-term memory -------------------------------
    def recall_memory(self, scope: Scope, request: RecallRequest,
                      query: Callable[[], QueryEmbedding] | None = None,
                      recipe: RecallRecipe = DEFAULT) -> MemoryAnswer:
        """The working memory and the personal layers' candidates for one query. ``query``
        gives the query's embedding (computed concurrently by the caller; it is asked for
        only once the user's index is loaded and the route is known); without it the shard
        embeds the query with its own model, and the answer carries the embedding."""
        if query is None:
            def query() -> QueryEmbedding:
                return self._embed_query(request.query)
        working = None
        if request.session_id:
            try:
                working = self.view(scope, request.session_id, viewer=request.agent)
            except NotFound:
                working = None
        decision = decide_route(request, working is not None, recipe=recipe)
        try:
            if self._recall is None:
                self._recall = RecallService(self.longterm.vectors, parallelism=1)
            service = self._recall
            personal = [layer for layer in decision.layers if layer in LONG_TERM]
            corrections = (correction_items(corrections_of(self.longterm.vectors, scope))
                           if "knowledge" in decision.layers else {})
            if not personal:
                return MemoryAnswer(decision=decision, working=working,
                                    found=LayerCandidates(), corrections=corrections)
            vectors = self.longterm.vectors
            hot = vectors if isinstance(vectors, HotIndexStore) else None
            if hot is not None:
                hot.warm(scope)
        except StrataError as exc:  # the durable store is down: degrade, as a layer would
            logger.warning("recall: the long-term memory of %s is unavailable: %s",
                           scope.key, exc.detail)
            return MemoryAnswer(decision=decision, working=working,
                                found=LayerCandidates(degraded=True))
        waited = time.perf_counter()
        embedded = query()
        waited = (time.perf_counter() - waited) * 1000
        late = None
        if hot is not None and embedded.tokens is not None and recipe.late_share > 0:
            late = hot.late_scorer(scope, embedded.tokens)
        found = service.search_layers(scope, request, embedded.vector, personal, recipe,
                                      late=late,
                                      terms_of=hot.terms_of(scope) if hot is not None else None)
        found.timings_ms["embedding_wait"] = waited
        needs_fallback = not select_candidates(found.candidates, recipe)[0]
        if not request.debug:  # only what assemble can use travels back (debug: every one)
            found.candidates = [c for c in found.candidates if could_pass(c, recipe)]
        return MemoryAnswer(decision=decision, working=working, found=found,
                            most_used=(service.most_used(scope, request.agent or "")
                                       if needs_fallback else []),
                            embedding=embedded if "knowledge" in decision.layers else None,
                            corrections=corrections)

    # -- proactive recall (strata.layers.proactive) ------------------------------------------
    def _followup_policy(self) -> FollowUpPolicy:
        return FollowUpPolicy(per_session=self._settings.followups_per_session,
                              cooldown_s=self._settings.followup_cooldown_s,
                              min_age_s=self._settings.followup_min_age_s)

    def _followup_candidates(self, scope: Scope, now: datetime, policy: FollowUpPolicy,
                             viewer: str | None) -> list[FollowUp]:
        plans = self.longterm.vectors.query(Collection.EPISODES, scope, RecordFilter(
            statuses=[MemoryStatus.ACTIVE], payload_equals={"metadata.type": "plan"},
            visible_to=viewer), 200)
        states = []
        for session_key, at in self._redis.archived_of(scope.key):
            snap = self._redis.snapshot_get(session_key)
            owner = snap[0].get("agent") if snap is not None else None
            if viewer is not None and owner and owner != viewer:
                continue  # another agent's session: its open questions are not this one's
            if snap is not None and snap[0].get("task_state"):
                states.append((session_key[len(scope.key) + 1:], snap[0]["task_state"],
                               datetime.fromtimestamp(at, now.tzinfo)))
        return [*from_plans(plans, now, policy), *from_task_states(states, now, policy)]

    def follow_ups(self, scope: Scope, session_id: str | None, limit: int,
                   viewer: str | None = None) -> list[FollowUp]:
        """At most ``limit`` follow-ups for the user now (fewer once the session had its
        share); each proposed topic is then quiet for the cooldown."""
        policy, now = self._followup_policy(), utcnow()
        session_key = f"{scope.key}:{session_id}" if session_id else None
        with self._memory_lock:
            quiet, outcomes, made = self._redis.followup_state(scope.key, session_key)
            left = policy.per_session - made if session_key else policy.per_session
            chosen = choose(self._followup_candidates(scope, now, policy, viewer), quiet, now,
                            limit,
                            left, outcomes)
            self._redis.followup_proposed(scope.key, session_key, [f.topic for f in chosen],
                                          now.timestamp() + policy.cooldown_s,
                                          int(self._settings.session_ttl_s * 4))
        return chosen

    def follow_up_feedback(self, scope: Scope, topic: str, outcome: str) -> dict[str, Any]:
        """``used``: never proposed again; ``dismissed``: quiet for 30 days. Either way the
        kind's record shapes the next choice."""
        policy, now = self._followup_policy(), utcnow()
        quiet, _, _ = self._redis.followup_state(scope.key, None)
        if topic not in quiet:
            raise NotFound(f"follow-up {topic!r} was never proposed to this user")
        kind = "open_task" if topic.startswith("task:") else "plan"
        until = now.timestamp() + (FOREVER_S if outcome == "used" else policy.dismissed_s)
        self._redis.followup_outcome(scope.key, topic, kind, outcome, until)
        return {"topic": topic, "outcome": outcome,
                "quiet_until": datetime.fromtimestamp(until, now.tzinfo).isoformat()}

    def _embed_query(self, text: str) -> QueryEmbedding:
        started = time.perf_counter()
        if self._queries is None:
            embedder = self.longterm.embedder
            with self._build_lock:
                if self._queries is None:
                    self._queries = QueryBatcher(lambda texts: embed_queries(embedder, texts))
        embedded = self._queries.embed(text)
        logger.debug("query embedded in the shard in %.1f ms",
                     (time.perf_counter() - started) * 1000)
        return embedded

    def persist_hot(self) -> int:
        """Write pending reinforcements of the hot index (the shard calls this every
        second) and drop users idle past the TTL."""
        vectors = self._longterm.vectors if self._longterm is not None else None
        if not isinstance(vectors, HotIndexStore):
            return 0
        return vectors.persist_access()

    def hot_stats(self) -> dict[str, Any]:
        vectors = self._longterm.vectors if self._longterm is not None else None
        if not isinstance(vectors, HotIndexStore):
            return {"enabled": False}
        stats = vectors.stats()
        queries = self._queries
        batching = {"query_batches": queries.batches, "queries_embedded": queries.queries
                    } if queries is not None else {}
        return {"enabled": True, "shard": self.shard_id, **stats.__dict__, **batching}

    def _apply_intents(self, scope: Scope, turn: Turn, wal_from: str, wal_to: str,
                       previous: str | None = None) -> IntentResult:
        """Explicit intents of a user turn, applied now (``previous``: the user's turn before
        it, what a bare "that's no longer relevant" refers to)."""
        result = IntentResult()
        if turn.role is not Role.USER or self._longterm_factory is None:
            return result
        declared = is_declaration(turn.content)  # "my codename is Falcon": known at once
        if detect_intent(turn.content) is Intent.NONE and not declared:
            return result  # the common case: two cheap regex passes, no extraction
        candidates = attribute(RuleExtractor().extract([turn], previous=previous), [turn])
        forget = [c for c in candidates if c.intent is Intent.FORGET]
        explicit = [c for c in candidates if c.kind is MemoryKind.FACT and c.key
                    and (c.intent in (Intent.REMEMBER, Intent.OVERRIDE)
                         or (declared and c.intent is Intent.NONE
                             and c.confidence >= EXPLICIT_MIN_CONFIDENCE))]
        if not forget and not explicit:
            return result
        job = self._redis.enqueue(QUEUE_HIGH, {
            "type": "extract_session", "reason": "explicit", "tenant": scope.tenant,
            "user_id": scope.user, "session_id": turn.session_id, "wal_from": wal_from,
            "wal_to": wal_to})
        try:
            with self._memory_lock:
                for cand in forget:
                    result.forgotten.extend(self.longterm.forget_matching(
                        scope, cand.text, viewer=turn.agent or ""))
                if explicit:
                    self._redis.register_user(scope.key)
                    summary = self.longterm.writer.write(scope, explicit)
                    result.remembered = [f"{k}:{v}" for k, v in summary.facts.items()]
            self._redis.ensure_group(QUEUE_HIGH, HIGH_GROUP)
            self._redis.ack(QUEUE_HIGH, HIGH_GROUP, [job])
        except StrataError as exc:
            logger.warning("explicit intent deferred to the queue: %s", exc.detail)
            result.deferred = True
        except Exception:  # the turn is durable; the queued job retries the intent
            logger.exception("explicit intent failed; deferred to the queue")
            result.deferred = True
        if result.forgotten:
            self._redis.audit(scope.key, action="forget_intent", count=len(result.forgotten),
                              at=utcnow().isoformat())
        return result

    # -- the memories API --------------------------------------------------------------------
    def write_longterm(self, scope: Scope, candidates: list[Candidate]) -> WriteSummary:
        with self._memory_lock:
            self._redis.register_user(scope.key)
            return self.longterm.writer.write(scope, candidates)

    def sweep_decay(self, scope: Scope, policy: DecayPolicy, dry_run: bool = False
                    ) -> SweepCounts:
        """The decay sweep of one user, in the user's shard (the single writer)."""
        with self._memory_lock:
            return sweep_scope(self.longterm.vectors, scope, policy, utcnow(), dry_run)

    def apply_decay(self, changes: list[StatusChange], policy: DecayPolicy,
                    now: float) -> SweepCounts:
        """Planned status changes of this shard's users (``jobs.decay_sweep``), applied
        under the shard's lock; rows changed since the plan are re-decided."""
        vectors = self.longterm.vectors
        if not isinstance(vectors, StatusWriter):
            raise BackendUnavailable("this shard's vector store cannot update statuses")
        with self._memory_lock:
            return apply_changes(vectors, changes, policy, now)

    def purge_archived_sessions(self, session_keys: list[str], now: float) -> SweepCounts:
        """Delete closed sessions' archived working memory (past retention: the caller
        picks them from the archive index). A live session that reuses an expired
        session's id is left alone; only its stale index entry goes."""
        counts = SweepCounts()
        with self._lock:
            for key in session_keys:
                snap = self._redis.snapshot_get(key)
                if snap is not None and snap[0].get("closed"):
                    self._sessions.pop(key, None)
                    self._redis.delete_session(key)
                    counts.sessions_purged += 1
                else:  # expired by its TTL (or the id now names a new, live session)
                    counts.sessions_expired += 1
                self._redis.unarchive_session(key)
        return counts

    def create_memory(self, scope: Scope, body: MemoryCreate) -> dict[str, Any]:
        with self._memory_lock:
            self._redis.register_user(scope.key)
            item, action = self.longterm.create(scope, body)
            self._redis.audit(scope.key, action=f"create:{action}", memory_id=item.id,
                              kind=item.kind.value, at=utcnow().isoformat())
            return {"memory": item.model_dump(mode="json"), "action": action}

    def import_memories(self, scope: Scope, items: list[MemoryItem],
                        admin: bool) -> ImportCounts:
        """An export's memories written into ``scope`` with their ids, times and statuses
        (``strata.layers.transfer.import_items``), through this shard's hot index."""
        with self._memory_lock:
            if items:
                self._redis.register_user(scope.key)
            counts = import_items(self.longterm.vectors, self.longterm.embedder, scope, items,
                                  admin=admin, procedure_cap=self.longterm.procedures.cap)
            self._redis.audit(scope.key, action="import", count=counts.created + counts.updated,
                              at=utcnow().isoformat())
            return counts

    def list_memories(self, scope: Scope, kind: MemoryKind | None, status: str | None,
                      q: str | None, limit: int, viewer: str | None = None,
                      context: str | None = None) -> list[MemoryItem]:
        """``viewer``: the agent asking ("" none: what is shared; None: everything)."""
        return self.longterm.list_items(scope, kind, status, q, limit, viewer, context)

    def memory_history(self, scope: Scope, memory_id: str,
                       viewer: str | None = None) -> list[MemoryItem]:
        return self.longterm.history(scope, memory_id, viewer)

    def update_memory(self, scope: Scope, memory_id: str, patch: MemoryPatch,
                      viewer: str | None = None) -> MemoryItem:
        with self._memory_lock:
            item = self.longterm.update(scope, memory_id, patch, viewer)
            self._redis.audit(scope.key, action="update", memory_id=memory_id,
                              at=utcnow().isoformat())
            return item

    def reinforce(self, scope: Scope, memory_ids: list[str]) -> int:
        with self._memory_lock:
            return self.longterm.reinforce(scope, memory_ids)

    def reinforce_many(self, returned: list[tuple[Scope, list[str]]]) -> int:
        """``reinforce`` for what several recalls returned (the ingress sends them together)."""
        with self._memory_lock:
            return sum(self.longterm.reinforce(scope, ids) for scope, ids in returned)

    def delete_memory(self, scope: Scope, memory_id: str,
                      viewer: str | None = None) -> dict[str, Any]:
        """Delete a memory, its versions, the memories made from the same words
        (``LongTermMemory.delete``), their source turns and their recall-log entries."""
        with self._lock, self._memory_lock:
            doomed = self.longterm.delete(scope, memory_id, viewer)
            turns: dict[str, set[str]] = {}
            for item in doomed:
                if item.provenance.session_id:
                    turns.setdefault(item.provenance.session_id, set()).update(
                        item.provenance.turn_ids)
            removed = sum(self._scrub_session(scope, sid, ids, doomed)
                          for sid, ids in turns.items())
            self._redis.recall_log_remove(scope.key, {d.id for d in doomed})
            self._redis.audit(scope.key, action="delete", memory_id=memory_id,
                              count=len(doomed), at=utcnow().isoformat())
        self.file_purge.request()
        return {"deleted_versions": len(doomed), "deleted_turns": removed,
                "deleted_ids": [d.id for d in doomed]}

    def _scrub_session(self, scope: Scope, session_id: str, turn_ids: set[str],
                       doomed: list[MemoryItem]) -> int:
        """Remove the source turns from the WAL, the live window and the snapshot."""
        key = f"{scope.key}:{session_id}"
        removed = self._redis.wal_remove_turns(key, turn_ids)
        needles = [n for d in doomed for n in (d.value, d.text) if n and len(n) >= 2]
        entry = self._sessions.get(key)
        if entry is None:
            snap = self._redis.snapshot_get(key)
            if snap is None:
                return removed
            state = SessionState.model_validate(snap[0])
        else:
            state = entry.memory.state
        parts: list[SessionState | ContextAside] = [state, *state.set_aside.values()]
        for part in parts:  # the contexts set aside too
            part.window = [t for t in part.window if t.turn_id not in turn_ids]
            part.pinned = [t for t in part.pinned if t.turn_id not in turn_ids]
            part.summary = "\n".join(line for line in part.summary.split("\n")
                                     if not any(n.lower() in line.lower() for n in needles))
        self._redis.snapshot_put(key, state.model_dump(mode="json"), state.wal_id)
        return removed

    def delete_user(self, scope: Scope) -> dict[str, int]:
        """Forget everything about a user, in every store; only a tombstone remains."""
        with self._lock, self._memory_lock:
            memories = self.longterm.delete_user(scope) if self._longterm_factory else 0
            for key in [k for k in self._sessions if k.startswith(f"{scope.key}:")]:
                self._sessions.pop(key)
            sessions = self._redis.delete_user_sessions(scope.key)
            queued = sum(self._redis.remove_user_from_queue(q, scope.tenant, scope.user)
                         for q in (QUEUE_LOW, QUEUE_HIGH))
            self._redis.untrack_user(self.shard_id, scope.key)
            self._redis.unregister_user(scope.key)
            logged = self._redis.recall_log_remove(scope.key)
            self._redis.audit(scope.key, action="delete_user", count=memories,
                              at=utcnow().isoformat())
        self.file_purge.request()
        return {"memories": memories, "session_keys": sessions, "queued_jobs": queued,
                "recall_log_entries": logged}
