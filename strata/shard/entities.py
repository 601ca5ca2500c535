"""``ShardEntities``: a user's entity view (#38), read and edited in the user's shard.

The view is derived from the memories the caller may see — facts and episodes (exchanges
too), active or cold, not hidden by a forget — with ``strata.entities.EntityIndex``, then the
person's edits are laid over it (``strata.entities.overlay``). Deriving costs about 2 ms a
memory here (the gazetteer and lexicon passes), so each (user, viewer) keeps its derived
index between reads and brings it up to date with what changed since: memories gone or
changed leave it (``EntityIndex.forget``), new or changed ones are added; the view built
from it is kept too while neither the memories nor the edits change. A read with nothing
changed costs the scan of the user's rows (docs/benchmarks.md, "The entity view's cost").

Editing writes the caller's lane of edits; deleting an entity is a delete edit (its
memories stay). Forgetting an entity hides every memory the caller sees that names it — the
way a conversational "forget Max" does: weight 0 at once, a forget request in the user's
forget log (listed by ``GET …/forgets``, undoable for ``forget_grace_s``, then deleted with
its source turns by ``ShardForgets``' sweep, and what a late extraction says of it before
then is left out).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from strata.entities.gazetteer import Gazetteer, default_gazetteer
from strata.entities.index import EntityIndex
from strata.entities.lexicon import CategoryLexicon, default_lexicon
from strata.entities.overlay import (
    EntityEdits,
    EntityEditStore,
    combined,
    edits_seen_by,
    lane_of,
)
from strata.entities.view import EntityDetail, EntityList, EntityPatch, EntityView
from strata.errors import InvalidInput, NotFound
from strata.layers.records import from_record, to_record
from strata.layers.transfer import read_rows
from strata.models import (
    Collection,
    MemoryItem,
    MemoryStatus,
    RecordFilter,
    Scope,
    Source,
    StoredRecord,
    utcnow,
)
from strata.shard.longterm import LazyLongTerm, ShardMemories
from strata.shard.models import ForgetView
from strata.stores.redis_ports import AuditLog, ForgetLog, ForgetRequest

__all__ = ["VIEWS_KEPT", "ShardEntities"]

VIEWS_KEPT = 16  # derived views a shard keeps (user × viewer; ~4 MB at 700 memories), LRU
_SHOWN = (MemoryStatus.ACTIVE, MemoryStatus.COLD)
_INDEXED = (Collection.FACTS, Collection.EPISODES)


@dataclass
class _Derived:
    """A viewer's derived index of a user and what it was derived from."""

    index: EntityIndex
    items: dict[str, MemoryItem] = field(default_factory=dict)
    seen: dict[str, tuple[float, str]] = field(default_factory=dict)
    view: EntityView | None = None  # the view last built from it, and with which edits
    view_edits: EntityEdits | None = None


def _fingerprint(row: StoredRecord) -> tuple[float, str]:
    return row.updated_at, row.text


class ShardEntities:
    """The entity views of the shard's users, their edits, and forgetting an entity."""

    def __init__(self, shard_id: int, longterm: LazyLongTerm, memories: ShardMemories, *,
                 edits: EntityEditStore, forgets: ForgetLog, audit: AuditLog,
                 forget_grace_s: float,
                 gazetteer: Callable[[], Gazetteer] = default_gazetteer,
                 lexicon: Callable[[], CategoryLexicon] = default_lexicon) -> None:
        self._shard_id = shard_id
        self._longterm = longterm
        self._memories = memories
        self._edits = edits
        self._forgets = forgets
        self._audit = audit
        self._grace_s = forget_grace_s
        self._gazetteer = gazetteer
        self._lexicon = lexicon
        self._views: OrderedDict[tuple[str, str | None], _Derived] = OrderedDict()
        self._lock = threading.Lock()

    # -- deriving ----------------------------------------------------------------------------
    def _rows(self, scope: Scope, viewer: str | None) -> list[StoredRecord]:
        """The rows the view is derived from (not hidden by a forget), oldest first."""
        vectors = self._longterm.get().vectors
        flt = RecordFilter(statuses=list(_SHOWN), visible_to=viewer)
        rows = [r for c in _INDEXED for r in read_rows(vectors, c, scope, flt)
                if float(r.payload.get("weight", 1.0)) > 0.0]
        return sorted(rows, key=lambda r: (r.created_at, r.id))

    def _derived(self, scope: Scope, viewer: str | None) -> _Derived:
        """The viewer's derived index, brought up to date with the user's memories (only a
        row that is new or changed since the last read is read into a memory and indexed)."""
        rows = self._rows(scope, viewer)
        with self._lock:
            key = (scope.key, viewer)
            derived = self._views.pop(key, None) or _Derived(
                EntityIndex(self._gazetteer(), self._lexicon()))
            self._views[key] = derived
            while len(self._views) > VIEWS_KEPT:
                self._views.popitem(last=False)
            now = {r.id: _fingerprint(r) for r in rows}
            stale = [m for m, seen in derived.seen.items() if now.get(m) != seen]
            if stale or len(now) != len(derived.seen):
                derived.view = None
            if stale:
                derived.index.forget(stale)
            fresh = [from_record(r) for r in rows if derived.seen.get(r.id) != now[r.id]]
            items = {**{m: i for m, i in derived.items.items() if m in now
                        and derived.seen.get(m) == now[m]}, **{i.id: i for i in fresh}}
            speakers = {str(s) for i in items.values() if (s := i.metadata.get("speaker"))}
            for item in fresh:
                speaker = item.metadata.get("speaker")
                derived.index.add(item.id, item.text, str(item.metadata.get("lang") or "en"),
                                  speaker=str(speaker) if speaker else None, speakers=speakers)
            derived.seen = now
            derived.items = items
            return derived

    def _view(self, scope: Scope, viewer: str | None) -> tuple[EntityView, int]:
        derived = self._derived(scope, viewer)
        edits = edits_seen_by(self._edits, scope, viewer)
        with self._lock:
            if derived.view is None or derived.view_edits != edits:
                derived.view = EntityView(derived.index, derived.items, edits,
                                          self._gazetteer(), self._lexicon())
                derived.view_edits = edits
            return derived.view, len(derived.items)

    def _key(self, view: EntityView, entity_id: str) -> str:
        key = view.key_of(entity_id)
        if key is None:
            raise NotFound(f"no entity {entity_id!r} in this user's entity view (ids come "
                           "from GET /v1/users/{user_id}/entities)")
        return key

    # -- reading -----------------------------------------------------------------------------
    def list_entities(self, scope: Scope, viewer: str | None = None,
                      kind: str | None = None, q: str | None = None,
                      limit: int = 200) -> EntityList:
        """The user's entities the viewer's memories name, most mentioned first."""
        view, read = self._view(scope, viewer)
        every = view.summaries()
        needle = q.casefold() if q else None
        chosen = [s for s in every if (kind is None or s.type == kind) and (
            needle is None or any(needle in n.casefold() for n in (s.name, *s.aliases)))]
        return EntityList(entities=chosen[:limit], total=len(every), memories_read=read)

    def entity(self, scope: Scope, entity_id: str, viewer: str | None = None) -> EntityDetail:
        view, _ = self._view(scope, viewer)
        return view.detail(self._key(view, entity_id))

    # -- editing -----------------------------------------------------------------------------
    def edit_entity(self, scope: Scope, entity_id: str, patch: EntityPatch,
                    viewer: str | None = None) -> EntityDetail:
        """Rename, retype or merge (into another entity of the same view), in the caller's
        lane; answers the entity as it now is (a merge: the one it joined)."""
        view, _ = self._view(scope, viewer)
        key = self._key(view, entity_id)
        lane = lane_of(viewer)
        edits = self._edits.load(scope, lane)
        shown = key
        if patch.merge_into is not None:
            into = self._key(view, patch.merge_into)
            if into == key:
                raise InvalidInput("an entity cannot be merged into itself")
            edits, shown = edits.merge(key, into), into
        if patch.name is not None:
            edits = edits.rename(shown, " ".join(patch.name.split()))
        if patch.type is not None:
            edits = edits.retype(shown, patch.type)
        self._edits.save(scope, lane, edits)
        self._audit.append(scope, action="entity_edit", at=utcnow().isoformat())
        view, _ = self._view(scope, viewer)
        return view.detail(shown)

    def delete_entity(self, scope: Scope, entity_id: str,
                      viewer: str | None = None) -> dict[str, int | str]:
        """The entity leaves the caller's view (and what reads the view's edits); the
        memories that name it stay."""
        view, _ = self._view(scope, viewer)
        key = self._key(view, entity_id)
        mentions = view.summary(key).mentions
        lane = lane_of(viewer)
        self._edits.save(scope, lane, self._edits.load(scope, lane).delete(key))
        self._audit.append(scope, action="entity_delete", at=utcnow().isoformat())
        return {"deleted_entity": entity_id, "memories_kept": mentions}

    def forget_entity(self, scope: Scope, entity_id: str, viewer: str | None = None,
                      admin: bool = False) -> ForgetView:
        """Hide every memory the caller sees that names the entity (or one merged into
        it), as a forget request of the entity's name: undoable, then final. Memories an
        admin wrote (source admin) stay unless the caller is an admin."""
        view, _ = self._view(scope, viewer)
        key = self._key(view, entity_id)
        detail = view.detail(key)
        ids = [m.memory_id for m in detail.mention_list if m.via is None]
        lt = self._longterm.get()
        hidden: dict[str, float] = {}
        with self._memories.lock:
            for collection in _INDEXED:
                for row in lt.vectors.get(collection, scope, ids):
                    item = from_record(row)
                    if item.weight <= 0.0 or (item.source is Source.ADMIN and not admin):
                        continue
                    if row.vector is None:
                        continue
                    lt.vectors.upsert(collection, scope, [to_record(item.model_copy(
                        update={"weight": 0.0, "updated_at": utcnow()}), row.vector,
                        row.embed_model or lt.embedder.model_id)])
                    hidden[item.id] = item.weight
            request = self._request(scope, view.derived_name(key), key, viewer, hidden)
            self._forgets.add(scope, request)
            if hidden:
                self._forgets.schedule(self._shard_id, scope, request,
                                       request.undo_until.timestamp()
                                       if request.undo_until else time.time())
            self._audit.append(scope, action="forget_entity", count=len(hidden),
                               at=utcnow().isoformat())
        return ForgetView(forget_id=request.forget_id, turn_id=request.turn_id,
                          said_at=request.at, target=request.target,
                          agent=request.viewer or None, hidden=len(hidden),
                          state="undoable" if hidden else "final",
                          undo_until=request.undo_until)

    def _request(self, scope: Scope, name: str, key: str, viewer: str | None,
                 hidden: dict[str, float]) -> ForgetRequest:
        at = utcnow()
        digest = hashlib.sha256(f"{scope.key}|{key}|{at.isoformat()}".encode()).hexdigest()
        due = datetime.fromtimestamp(time.time() + self._grace_s, timezone.utc)
        return ForgetRequest(turn_id=f"entity-forget-{digest[:12]}", at=at, target=name,
                             viewer=viewer or "", forgotten=hidden,
                             undo_until=due if hidden else None)

    # -- as data -----------------------------------------------------------------------------
    def export_edits(self, scope: Scope, viewer: str | None = None) -> dict[str, EntityEdits]:
        """The edits an export carries: every lane for an admin, else the caller's own."""
        lanes = self._edits.lanes(scope)
        if viewer is None:
            return lanes
        own = lane_of(viewer)
        return {own: lanes[own]} if own in lanes else {}

    def import_edits(self, scope: Scope, lanes: dict[str, EntityEdits],
                     viewer: str | None = None) -> int:
        """An export's edits into ``scope``: an admin's import keeps each lane; any other
        key's goes into the key's own lane. Returns the lanes written."""
        if viewer is not None:
            merged = combined(list(lanes.values()))
            lanes = {lane_of(viewer): merged} if not merged.empty() else {}
        for lane, edits in lanes.items():
            self._edits.save(scope, lane, edits)
        return len(lanes)

    def delete_user(self, scope: Scope) -> bool:
        """The user's edits and derived views go (a user delete or an erasure)."""
        with self._lock:
            for key in [k for k in self._views if k[0] == scope.key]:
                del self._views[key]
        return self._edits.delete(scope)
