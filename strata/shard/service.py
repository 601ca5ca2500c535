"""``SessionShardService``: one shard, its parts composed behind the methods the actor
(``actors.session_shard``) serves. Every method hands over to one part; the parts meet only
through what the constructor passes them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from strata import gc_pauses
from strata.entities.overlay import EntityEdits, EntityEditStore, InMemoryEntityEditStore
from strata.entities.view import EntityDetail, EntityList, EntityPatch
from strata.errors import NotFound
from strata.extract.base import Candidate
from strata.extract.intent_model import packaged_detector
from strata.extract.worker import WriteSummary
from strata.layers.decay import DecayPolicy, StatusChange, SweepCounts
from strata.layers.forgetting import FilePurge
from strata.layers.memories import LongTermMemory
from strata.layers.memory_models import MemoryCreate, MemoryPatch
from strata.layers.proactive import FollowUp
from strata.layers.summarize import Summarizer
from strata.layers.working import WorkingMemoryConfig
from strata.models import MemoryItem, MemoryKind, RecallRequest, Scope
from strata.portability import ImportCounts
from strata.recall.expansion import make_expander
from strata.recall.recipes import DEFAULT, RecallRecipe
from strata.settings import Settings
from strata.shard.entities import ShardEntities
from strata.shard.erasure import ShardErasure
from strata.shard.export import ShardExport
from strata.shard.followups import ShardFollowUps
from strata.shard.forgets import ShardForgets
from strata.shard.longterm import LazyLongTerm, ShardMemories
from strata.shard.models import (
    CloseAck,
    ForgetView,
    MemoryAnswer,
    SweepReport,
    TurnAck,
    TurnIn,
    WorkingMemoryView,
)
from strata.shard.recall import ShardRecall
from strata.shard.sessions import ShardSessions
from strata.stores.keys import SessionRef
from strata.stores.ports import QueryEmbedding
from strata.stores.redis_ports import RedisPorts

__all__ = ["SessionShardService"]


class SessionShardService:
    """One shard's sessions and its users' long-term memory (plain class;
    ``actors.session_shard`` wraps it for Ray). ``longterm``: builds the long-term memory on
    first use (None: a shard of working memory only); ``entity_edits``: where the users'
    entity view edits are kept (None: in this process)."""

    def __init__(self, shard_id: int, settings: Settings, redis: RedisPorts,
                 summarizer: Summarizer, config: WorkingMemoryConfig | None = None,
                 longterm: Callable[[], LongTermMemory] | None = None,
                 entity_edits: EntityEditStore | None = None) -> None:
        self.shard_id = shard_id
        self._settings = settings
        self._redis = redis
        self._longterm = LazyLongTerm(longterm)
        # each part gets the Redis ports it uses, no more
        self.memories = ShardMemories(
            self._longterm, queues=redis.queues, users=redis.users, audit=redis.audit,
            aof=redis.aof, forgets=redis.forgets,
            detector=packaged_detector if settings.intent_detector == "learned" else None,
            shard_id=shard_id, forget_grace_s=settings.forget_grace_s)
        if settings.intent_detector == "learned":  # ~2 s of loading, not on a user's turn
            threading.Thread(target=packaged_detector, name="strata-intents", daemon=True).start()
        self.sessions = ShardSessions(shard_id, settings, summarizer, self.memories,
                                      log=redis.sessions, index=redis.index,
                                      queues=redis.queues, config=config)
        self.recall = ShardRecall(self._longterm, make_expander(settings))
        self.followups = ShardFollowUps(settings, self._longterm, self.memories.lock,
                                        log=redis.sessions, index=redis.index,
                                        state=redis.followups)
        self.erasure = ShardErasure(shard_id, self.sessions, self.memories, self._longterm,
                                    log=redis.sessions, index=redis.index, queues=redis.queues,
                                    followups=redis.followups, users=redis.users,
                                    recalls=redis.recalls, audit=redis.audit,
                                    forgets=redis.forgets)
        self.forgets = ShardForgets(shard_id, self.memories, self.erasure, self._longterm,
                                    forgets=redis.forgets, audit=redis.audit)
        self.export = ShardExport(self._longterm, self.memories)
        self.entities = ShardEntities(shard_id, self._longterm, self.memories,
                                      edits=entity_edits or InMemoryEntityEditStore(),
                                      forgets=redis.forgets, audit=redis.audit,
                                      forget_grace_s=settings.forget_grace_s)

    @property
    def longterm(self) -> LongTermMemory:
        """The users' long-term memory (built on first use)."""
        return self._longterm.get()

    @property
    def file_purge(self) -> FilePurge:
        return self.memories.file_purge

    # -- sessions (ShardSessions) ----------------------------------------------------------
    def append_turn(self, scope: Scope, session_id: str, role: str, content: str,
                    created_at: datetime | None = None, metadata: dict[str, Any] | None = None,
                    turn_id: str | None = None, context: str | None = None,
                    agent: str | None = None, caller: str | None = None) -> TurnAck:
        return self.sessions.append_turn(scope, session_id, role, content, created_at,
                                         metadata, turn_id, context, agent, caller)

    def append_turns(self, scope: Scope, session_id: str,
                     turns: Sequence[TurnIn | Mapping[str, Any]],
                     caller: str | None = None) -> list[TurnAck]:
        return self.sessions.append_turns(scope, session_id, turns, caller)

    def patch_task_state(self, scope: Scope, session_id: str, patch: dict[str, Any],
                         viewer: str | None = None) -> dict[str, Any]:
        return self.sessions.patch_task_state(scope, session_id, patch, viewer)

    def close(self, scope: Scope, session_id: str, viewer: str | None = None) -> CloseAck:
        return self.sessions.close(scope, session_id, viewer)

    def view(self, scope: Scope, session_id: str,
             viewer: str | None = None) -> WorkingMemoryView:
        return self.sessions.view(scope, session_id, viewer)

    def flush_snapshots(self) -> None:
        self.sessions.flush_snapshots()

    def sweep(self, now: float | None = None) -> SweepReport:
        return self.sessions.sweep(now)

    def stats(self) -> dict[str, int]:
        return {"shard": self.shard_id, "sessions_in_memory": len(self.sessions.live)}

    def shutdown(self) -> None:
        self.sessions.shutdown()

    # -- recall (ShardRecall, FollowUps) ---------------------------------------------------
    def recall_memory(self, scope: Scope, request: RecallRequest,
                      query: Callable[[], QueryEmbedding] | None = None,
                      recipe: RecallRecipe = DEFAULT,
                      viewer: str | None = "") -> MemoryAnswer:
        """The working memory and the personal layers' candidates for one query
        (``ShardRecall.recall_memory``; ``query``: the caller's embedding of the query).
        ``viewer``: whose view the caller has (``Principal.viewer``): the session of
        ``request.session_id`` must be one it may read (another agent's: ``Forbidden``)."""
        working = None
        if request.session_id:
            try:
                working = self.view(scope, request.session_id, viewer=viewer)
            except NotFound:
                working = None
        return self.recall.recall_memory(scope, request, working, query, recipe)

    def follow_ups(self, scope: Scope, session_id: str | None, limit: int,
                   viewer: str | None = None) -> list[FollowUp]:
        return self.followups.follow_ups(scope, session_id, limit, viewer)

    def follow_up_feedback(self, scope: Scope, topic: str, outcome: str) -> dict[str, Any]:
        return self.followups.follow_up_feedback(scope, topic, outcome)

    def persist_hot(self) -> int:
        return self.memories.persist_hot()

    def hot_stats(self) -> dict[str, Any]:
        hot = self.memories.hot_index()
        if hot is None:
            return {"enabled": False}
        return {"enabled": True, "shard": self.shard_id, **hot.stats().__dict__,
                **self.recall.batching(), "gc": gc_pauses.pauses()}

    # -- long-term memory (ShardMemories) --------------------------------------------------
    def write_longterm(self, scope: Scope, candidates: list[Candidate]) -> WriteSummary:
        return self.memories.write_longterm(scope, candidates)

    def sweep_decay(self, scope: Scope, policy: DecayPolicy, dry_run: bool = False
                    ) -> SweepCounts:
        return self.memories.sweep_decay(scope, policy, dry_run)

    def apply_decay(self, changes: list[StatusChange], policy: DecayPolicy,
                    now: float) -> SweepCounts:
        return self.memories.apply_decay(changes, policy, now)

    def create_memory(self, scope: Scope, body: MemoryCreate) -> dict[str, Any]:
        return self.memories.create_memory(scope, body)

    def import_memories(self, scope: Scope, items: list[MemoryItem], admin: bool,
                        viewer: str | None = None) -> ImportCounts:
        return self.memories.import_memories(scope, items, admin, viewer)

    def export_memories(self, scope: Scope, viewer: str | None = None) -> list[MemoryItem]:
        return self.export.export_memories(scope, viewer)

    def list_memories(self, scope: Scope, kind: MemoryKind | None, status: str | None,
                      q: str | None, limit: int, viewer: str | None = None,
                      context: str | None = None) -> list[MemoryItem]:
        return self.memories.list_memories(scope, kind, status, q, limit, viewer, context)

    def memory_history(self, scope: Scope, memory_id: str,
                       viewer: str | None = None) -> list[MemoryItem]:
        return self.memories.memory_history(scope, memory_id, viewer)

    def update_memory(self, scope: Scope, memory_id: str, patch: MemoryPatch,
                      viewer: str | None = None) -> MemoryItem:
        return self.memories.update_memory(scope, memory_id, patch, viewer)

    def reinforce(self, scope: Scope, memory_ids: list[str]) -> int:
        return self.memories.reinforce(scope, memory_ids)

    def reinforce_many(self, returned: list[tuple[Scope, list[str]]]) -> int:
        return self.memories.reinforce_many(returned)

    # -- deletes (ShardErasure) ------------------------------------------------------------
    def delete_memory(self, scope: Scope, memory_id: str,
                      viewer: str | None = None) -> dict[str, Any]:
        return self.erasure.delete_memory(scope, memory_id, viewer)

    def delete_user(self, scope: Scope) -> dict[str, int]:
        deleted = self.erasure.delete_user(scope)
        self.entities.delete_user(scope)  # the entity view's edits go with the user
        return deleted

    def purge_archived_sessions(self, sessions: list[SessionRef], now: float) -> SweepCounts:
        return self.erasure.purge_archived_sessions(sessions, now)

    # -- conversational forgets (ShardForgets) ---------------------------------------------
    def list_forgets(self, scope: Scope, viewer: str | None = None) -> list[ForgetView]:
        return self.forgets.list_forgets(scope, viewer)

    def undo_forget(self, scope: Scope, forget_id: str, viewer: str | None = None
                    ) -> ForgetView:
        return self.forgets.undo_forget(scope, forget_id, viewer)

    def finalise_forgets(self, now: float | None = None) -> int:
        return self.forgets.finalise_due(now)

    # -- the entity view (ShardEntities) ---------------------------------------------------
    def list_entities(self, scope: Scope, viewer: str | None = None, kind: str | None = None,
                      q: str | None = None, limit: int = 200) -> EntityList:
        return self.entities.list_entities(scope, viewer, kind, q, limit)

    def entity(self, scope: Scope, entity_id: str, viewer: str | None = None) -> EntityDetail:
        return self.entities.entity(scope, entity_id, viewer)

    def edit_entity(self, scope: Scope, entity_id: str, patch: EntityPatch,
                    viewer: str | None = None) -> EntityDetail:
        return self.entities.edit_entity(scope, entity_id, patch, viewer)

    def delete_entity(self, scope: Scope, entity_id: str,
                      viewer: str | None = None) -> dict[str, int | str]:
        return self.entities.delete_entity(scope, entity_id, viewer)

    def forget_entity(self, scope: Scope, entity_id: str, viewer: str | None = None,
                      admin: bool = False) -> ForgetView:
        return self.entities.forget_entity(scope, entity_id, viewer, admin)

    def export_entity_edits(self, scope: Scope,
                            viewer: str | None = None) -> dict[str, EntityEdits]:
        return self.entities.export_edits(scope, viewer)

    def import_entity_edits(self, scope: Scope, lanes: dict[str, EntityEdits],
                            viewer: str | None = None) -> int:
        return self.entities.import_edits(scope, lanes, viewer)
