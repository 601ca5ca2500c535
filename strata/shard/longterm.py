"""The long-term side of a session shard: the single writer of its users' long-term memory.

Explicit "remember"/override intents are written before the turn call returns (through
``q:ltm:high``, acknowledged once applied, so a failure leaves the job for a worker);
"forget" intents drop matching memories' weight to zero at once and are kept in the user's
forget log, so that what was said before a forget and is written after it (a session's
extraction that lands late, a retried job) is left out too; deletes
(``strata.shard.erasure``) cascade through every store and leave a content-free tombstone in
the audit stream, and a background purge (``strata.layers.forgetting.FilePurge``) then
removes the deleted text from the stores' files.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

from strata.errors import BackendUnavailable, StrataError
from strata.extract.base import Candidate, Intent, attribute
from strata.extract.intent_model import (
    IntentDetector,
    Utterance,
    as_override,
)
from strata.extract.intents import is_declaration
from strata.extract.rules import RuleExtractor, detect_intent
from strata.extract.worker import WriteSummary
from strata.layers.decay import (
    DecayPolicy,
    StatusChange,
    SweepCounts,
    apply_changes,
    sweep_scope,
)
from strata.layers.forget_match import EVERYTHING, EXTENTS
from strata.layers.forgetting import FilePurge
from strata.layers.memories import LongTermMemory
from strata.layers.memory_models import MemoryCreate, MemoryPatch
from strata.layers.reactivation import reactivate, spoken_turns
from strata.layers.transfer import import_items
from strata.models import MemoryItem, MemoryKind, Role, Scope, Turn, utcnow
from strata.portability import ImportCounts
from strata.shard.models import IntentResult
from strata.shard.readings import TurnReadings
from strata.stores.hot import HotIndexStore
from strata.stores.keys import QUEUE_HIGH, deleted_turn
from strata.stores.ports import Purging, StatusWriter
from strata.stores.redis_ports import (
    AppendOnlyFile,
    AuditLog,
    ForgetLog,
    ForgetRequest,
    JobStatus,
    UserRegistry,
    WriteQueues,
)

__all__ = ["EXPLICIT_MIN_CONFIDENCE", "HIGH_GROUP", "LazyLongTerm", "ShardMemories"]

logger = logging.getLogger(__name__)
HIGH_GROUP = "extractors"
EXPLICIT_MIN_CONFIDENCE = 0.6  # a declared fact below this waits for the session end


def _request(cand: Candidate, turn: Turn | None = None) -> ForgetRequest:
    """The forget request a ``FORGET`` candidate makes, said in ``turn`` (at the turn's time)
    or else in the candidate's source turn."""
    return ForgetRequest(
        turn_id=turn.turn_id if turn else cand.provenance.turn_ids[0],
        at=turn.created_at if turn else cand.said_at or cand.event_time or utcnow(),
        target=cand.text, viewer=(turn.agent if turn else cand.agent) or "",
        speaker=cand.speaker)


class LazyLongTerm:
    """The users' long-term memory, built on first use (building loads the embedding model);
    a shard built without a factory has none."""

    def __init__(self, factory: Callable[[], LongTermMemory] | None) -> None:
        self._factory = factory
        self._memory: LongTermMemory | None = None
        self._lock = threading.Lock()

    @property
    def configured(self) -> bool:
        return self._factory is not None

    def get(self) -> LongTermMemory:
        if self._memory is None:
            if self._factory is None:
                raise BackendUnavailable("this shard has no long-term memory configured")
            with self._lock:  # concurrent calls build the model once
                if self._memory is None:
                    self._memory = self._factory()
        return self._memory

    def hot_index(self) -> HotIndexStore | None:
        """The hot index, once the memory is built (never builds it)."""
        vectors = self._memory.vectors if self._memory is not None else None
        return vectors if isinstance(vectors, HotIndexStore) else None


class ShardMemories:
    """The shard's users' long-term memory, written by this shard only. ``lock`` serialises
    the writes; it is taken after the sessions' lock when both are needed, so a long
    extraction write never holds up turns, closes or recalls."""

    def __init__(self, longterm: LazyLongTerm, *, queues: WriteQueues, users: UserRegistry,
                 audit: AuditLog, aof: AppendOnlyFile, forgets: ForgetLog,
                 detector: Callable[[], IntentDetector] | None = None, shard_id: int = 0,
                 forget_grace_s: float = 86_400.0) -> None:
        self.lock = threading.RLock()
        self._shard_id = shard_id
        self._grace_s = forget_grace_s  # a forget's hidden memories are deleted after this
        self._detector = detector  # a learned reading of forgets the rules miss (built lazily)
        self._learned = TurnReadings(detector)
        self._queues = queues
        self._forgets = forgets
        self._users = users
        self._audit = audit
        self._aof = aof
        self._longterm = longterm
        self._purge: FilePurge | None = None
        self._purge_lock = threading.Lock()

    @property
    def longterm(self) -> LongTermMemory:
        return self._longterm.get()

    @property
    def file_purge(self) -> FilePurge:
        """The purge that follows deletes: the AOF rewrite, and the compaction of the durable
        vector store (under the hot index) when there is one."""
        if self._purge is None:
            durable = None
            if self._longterm.configured:
                vectors = self.longterm.vectors
                inner = vectors.inner if isinstance(vectors, HotIndexStore) else vectors
                durable = inner if isinstance(inner, Purging) else None
            with self._purge_lock:
                if self._purge is None:
                    self._purge = FilePurge(self._aof, durable)
        return self._purge

    def read_ahead(self, said: Sequence[Utterance]) -> None:
        """A batch's user turns read by the learned detector in one call (``TurnReadings``)."""
        if self._longterm.configured:
            self._learned.read_ahead(said)

    def apply_intents(self, scope: Scope, turn: Turn, wal_from: str, wal_to: str,
                      previous: str | None = None) -> IntentResult:
        """Explicit intents of a user turn, applied now (``previous``: the user's turn before
        it, what a bare "that's no longer relevant" refers to)."""
        result = IntentResult()
        if turn.role is not Role.USER or not self._longterm.configured:
            return result
        declared = is_declaration(turn.content)  # "my codename is Falcon": known at once
        ruled = detect_intent(turn.content)
        reading = self._learned.reading(turn, previous)
        learned = self._learned.forget(turn, previous, ruled, reading)
        # what the model reads a forget to take (one, topic, person), the rules' too
        extent = reading.scope if reading is not None and reading.scope in EXTENTS else None
        changed = ruled is Intent.NONE and learned is None and self._learned.change(
            turn, previous)
        if ruled is Intent.NONE and not declared and learned is None and not changed:
            return result  # the common case: two regex passes and one linear model
        # the rules' forget stands only if the detector (rules + model) reads one too, as the
        # session's extraction decides it (``RuleExtractor``'s ``reads_forget``) and as
        # bench/intents.py measures the shipped detector
        agrees = (None if self._detector is None else
                  lambda *_: reading is not None and reading.intent == "forget")
        candidates = RuleExtractor(reads_forget=agrees).extract([turn], previous=previous)
        if changed:  # a change the rules did not read: the facts they found supersede
            candidates = [as_override(c) for c in candidates]
        if learned is not None:  # the model's forget stands for the rules' (everything)
            candidates = [c for c in candidates if c.intent is not Intent.FORGET
                          or learned.text != EVERYTHING] + [learned]
        candidates = attribute(candidates, [turn])
        forget = [c for c in candidates if c.intent is Intent.FORGET]
        explicit = [c for c in candidates if c.kind is MemoryKind.FACT and c.key
                    and (c.intent in (Intent.REMEMBER, Intent.OVERRIDE)
                         or (declared and c.intent is Intent.NONE
                             and c.confidence >= EXPLICIT_MIN_CONFIDENCE))]
        if not forget and not explicit:
            return result
        job = self._queues.enqueue(QUEUE_HIGH, {
            "type": "extract_session", "reason": "explicit", "tenant": scope.tenant,
            "user_id": scope.user, "session_id": turn.session_id, "wal_from": wal_from,
            "wal_to": wal_to})
        try:
            summary = WriteSummary()
            with self.lock:
                for cand in forget:
                    result.forgotten.extend(self._forget(scope, _request(cand, turn),
                                                         said=turn.content, extent=extent))
                if explicit:
                    self._users.register(scope)
                    summary = self.longterm.writer.write(scope, explicit)
                    result.remembered = [f"{k}:{v}" for k, v in summary.facts.items()]
            self._queues.ensure_group(QUEUE_HIGH, HIGH_GROUP)
            self._queues.ack(QUEUE_HIGH, HIGH_GROUP, [job])
            summary.forgotten = len(result.forgotten)
            self._queues.update_job(job, JobStatus.DONE, written=summary.counts())
        except StrataError as exc:
            logger.warning("explicit intent deferred to the queue: %s", exc.detail)
            result.deferred = True
        except Exception:  # the turn is durable; the queued job retries the intent
            logger.exception("explicit intent failed; deferred to the queue")
            result.deferred = True
        result.forgets = [_request(c, turn).forget_id for c in forget]  # what an undo names
        if result.forgotten:
            self._audit.append(scope, action="forget_intent", count=len(result.forgotten),
                               at=utcnow().isoformat())
        return result

    def _forget(self, scope: Scope, request: ForgetRequest, late: bool = False,
                said: str = "", extent: str | None = None) -> list[str]:
        """Apply a forget request to what is stored (``late``: after its turn, to what was
        said before it only; ``said``: the turn's words; ``extent``: one, topic or person, as
        the detector read it), then keep it in the forget log (a failure in between leaves
        the queued job to do both again)."""
        hidden = self.longterm.forget_matching(scope, request.target, viewer=request.viewer,
                                               speaker=request.speaker,
                                               before=request if late else None,
                                               said=said, extent=extent)
        kept = next((r for r in self._forgets.recent(scope) if r.key == request.key), None)
        if kept is not None and kept.purged_at is None:  # a retry: what it hid stays undoable
            hidden = {**kept.forgotten, **hidden}
        due = time.time() + self._grace_s
        request = request.model_copy(update={
            "forgotten": hidden,
            "undo_until": datetime.fromtimestamp(due, timezone.utc) if hidden else None})
        self._forgets.add(scope, request)
        if hidden:  # undoable until the grace period ends, then deleted (``ShardForgets``)
            self._forgets.schedule(self._shard_id, scope, request, due)
        return list(hidden)

    # -- the memories API --------------------------------------------------------------------
    def write_longterm(self, scope: Scope, candidates: list[Candidate]) -> WriteSummary:
        """An extraction job's candidates, written. A forget among them that was not applied
        at its turn (the turn's attempt failed) is applied now; a candidate that a forget
        said after it names is left out (counted in ``forgotten``), and so is one made from a
        turn the user deleted since the job read it (counted in ``deleted``)."""
        with self.lock:
            gone = self._forgets.deleted_turns(scope)
            alive = [c for c in candidates if not any(
                deleted_turn(c.provenance.session_id or "", t) in gone
                for t in c.provenance.turn_ids)]
            deleted, candidates = len(candidates) - len(alive), alive
            self._users.register(scope)
            requests = self._forgets.recent(scope)
            kept_keys = {r.key for r in requests}
            applied = {r.turn_id for r in requests}  # applied to what was stored then
            forgotten = 0
            for cand in candidates:
                if cand.intent is not Intent.FORGET or not cand.provenance.turn_ids:
                    continue
                request = _request(cand)
                if request.key in kept_keys:
                    continue
                kept_keys.add(request.key)
                requests.append(request)
                if request.turn_id in applied:  # the same forget in other words (an LLM's)
                    self._forgets.add(scope, request)
                else:  # its turn's attempt failed: now, with what is stored now
                    applied.add(request.turn_id)
                    forgotten += len(self._forget(scope, request, late=True,
                                                  extent=cand.metadata.get("extent")))
            # the turn that asked to forget is no event to recall ("the dispute is behind me,
            # don't bring it up"), alone or in an exchange with the turn after it
            asked = {r.turn_id for r in requests}
            said = [c for c in candidates if not (
                c.kind is MemoryKind.EPISODE and asked.intersection(c.provenance.turn_ids))]
            forgotten += len(candidates) - len(said)
            kept, left_out = self.longterm.unforgotten(said, requests)
            summary = self.longterm.writer.write(scope, kept)
            summary.forgotten += forgotten + left_out
            summary.deleted += deleted
            # what the user spoke of again is current again (a cold memory mentioned)
            summary.reactivated = reactivate(self.longterm.vectors, self.longterm.embedder,
                                             scope, spoken_turns(said), utcnow())
            return summary

    def sweep_decay(self, scope: Scope, policy: DecayPolicy, dry_run: bool = False
                    ) -> SweepCounts:
        """The decay sweep of one user, in the user's shard (the single writer)."""
        with self.lock:
            return sweep_scope(self.longterm.vectors, scope, policy, utcnow(), dry_run)

    def apply_decay(self, changes: list[StatusChange], policy: DecayPolicy,
                    now: float) -> SweepCounts:
        """Planned status changes of this shard's users (``jobs.decay_sweep``), applied
        under the shard's lock; rows changed since the plan are re-decided."""
        vectors = self.longterm.vectors
        if not isinstance(vectors, StatusWriter):
            raise BackendUnavailable("this shard's vector store cannot update statuses")
        with self.lock:
            return apply_changes(vectors, changes, policy, now)

    def create_memory(self, scope: Scope, body: MemoryCreate) -> dict[str, Any]:
        with self.lock:
            self._users.register(scope)
            item, action = self.longterm.create(scope, body)
            self._audit.append(scope, action=f"create:{action}", memory_id=item.id,
                               kind=item.kind.value, at=utcnow().isoformat())
            return {"memory": item.model_dump(mode="json"), "action": action}

    def import_memories(self, scope: Scope, items: list[MemoryItem], admin: bool,
                        viewer: str | None = None) -> ImportCounts:
        """An export's memories written into ``scope`` with their ids, times and statuses
        (``strata.layers.transfer.import_items``), through this shard's hot index, as
        ``viewer`` sees the scope (``Principal.viewer``; None: everything)."""
        with self.lock:
            if items:
                self._users.register(scope)
            counts = import_items(self.longterm.vectors, self.longterm.embedder, scope, items,
                                  admin=admin, procedure_cap=self.longterm.procedures.cap,
                                  viewer=viewer)
            self._audit.append(scope, action="import", count=counts.created + counts.updated,
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
        with self.lock:
            item = self.longterm.update(scope, memory_id, patch, viewer)
            self._audit.append(scope, action="update", memory_id=memory_id,
                               at=utcnow().isoformat())
            return item

    def reinforce(self, scope: Scope, memory_ids: list[str]) -> int:
        with self.lock:
            return self.longterm.reinforce(scope, memory_ids)

    def reinforce_many(self, returned: list[tuple[Scope, list[str]]]) -> int:
        """``reinforce`` for what several recalls returned (the ingress sends them together)."""
        with self.lock:
            return sum(self.longterm.reinforce(scope, ids) for scope, ids in returned)

    def hot_index(self) -> HotIndexStore | None:
        """The hot index, once the long-term memory is built (never builds it)."""
        return self._longterm.hot_index()

    def persist_hot(self) -> int:
        """Write pending reinforcements of the hot index (the shard calls this every
        second) and drop users idle past the TTL."""
        hot = self.hot_index()
        return hot.persist_access() if hot is not None else 0
