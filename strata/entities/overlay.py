"""A person's edits of their entity view (#38), kept apart from what is derived from their
memories: a rename, a retype, a merge of one entity into another, a delete. The view is
derived again from the memories on every read (``strata.shard.entities``); the edits are
laid over it (``apply_edits``), so a memory written later that names a merged entity lands
under the merge, and a deleted entity stays deleted while its memories stay.

Edits are kept per user and per *lane* — who made them: an admin key (``ADMIN_LANE``), a key
bound to no agent (``SHARED_LANE``), or an agent (its name). A view applies the admin's
edits, then those of its own lane; an agent's edits change only that agent's view, so one
agent renaming "Max" is not what another agent sees. An admin's view applies the admin's.

``EntityEditStore`` is the port (one ``EntityEdits`` per user and lane): Redis in a
deployment (``strata.entities.overlay_redis``), ``InMemoryEntityEditStore`` in a process.
Export and import carry the edits as data (``strata.portability``); erasing a user deletes
them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from strata.entities.models import Entity, EntityIndexSnapshot, EntityType, Link, LinkKind
from strata.models import Scope, utcnow

__all__ = ["ADMIN_LANE", "SHARED_LANE", "EntityEditStore", "EntityEdits",
           "InMemoryEntityEditStore", "apply_edits", "combined", "edits_seen_by", "lane_of",
           "lanes_seen_by", "public_id"]

ADMIN_LANE = "*"   # an admin key naming no agent (no agent name holds "*")
SHARED_LANE = "~"  # a key bound to no agent


def lane_of(viewer: str | None) -> str:
    """The lane a caller's edits go to (``Principal.viewer``: None an admin, "" a key of no
    agent, else the agent)."""
    if viewer is None:
        return ADMIN_LANE
    return viewer or SHARED_LANE


def lanes_seen_by(viewer: str | None) -> list[str]:
    """The lanes whose edits a view applies, in order (a later lane's rename wins)."""
    own = lane_of(viewer)
    return [ADMIN_LANE] if own == ADMIN_LANE else [ADMIN_LANE, own]


def public_id(key: str) -> str:
    """An entity's id in the API: URL-safe and fixed for its index id (``name:max``,
    ``place:city:4174757``, a title with a "/" in it)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


class EntityEdits(BaseModel):
    """One lane's edits of a user's entities, each keyed by the entity's index id."""

    model_config = ConfigDict(extra="forbid")

    renamed: dict[str, str] = Field(default_factory=dict)
    retyped: dict[str, EntityType] = Field(default_factory=dict)
    merged: dict[str, str] = Field(default_factory=dict)  # source → the entity it joined
    deleted: list[str] = Field(default_factory=list)
    updated_at: datetime | None = None

    def empty(self) -> bool:
        return not (self.renamed or self.retyped or self.merged or self.deleted)

    def rename(self, key: str, name: str) -> EntityEdits:
        return self._changed(renamed={**self.renamed, key: name})

    def retype(self, key: str, kind: EntityType) -> EntityEdits:
        return self._changed(retyped={**self.retyped, key: kind})

    def merge(self, key: str, into: str) -> EntityEdits:
        """``key`` joins ``into``: its mentions, names and links are shown under ``into``."""
        return self._changed(merged={**self.merged, key: into})

    def delete(self, key: str) -> EntityEdits:
        return self._changed(deleted=sorted({*self.deleted, key}))

    def _changed(self, **update: object) -> EntityEdits:
        return self.model_copy(update={**update, "updated_at": utcnow()})


def combined(lanes: Sequence[EntityEdits]) -> EntityEdits:
    """Several lanes' edits as one, a later lane's rename, retype and merge of an entity
    over an earlier's; deletes add up."""
    out = EntityEdits()
    for edits in lanes:
        out = out.model_copy(update={
            "renamed": {**out.renamed, **edits.renamed},
            "retyped": {**out.retyped, **edits.retyped},
            "merged": {**out.merged, **edits.merged},
            "deleted": sorted({*out.deleted, *edits.deleted})})
    return out


def _root(key: str, merged: Mapping[str, str], present: Mapping[str, Entity]) -> str:
    """Where a merge chain ends (a → b → c: c), stopping before an entity this view lacks;
    a chain that comes round (a → b → a, from two lanes or an import) ends at the least
    key of its loop, so one of them stays and takes the others."""
    path = [key]
    while (nxt := merged.get(path[-1])) is not None and nxt in present:
        if nxt in path:
            return min(path[path.index(nxt):])
        path.append(nxt)
    return path[-1]


def apply_edits(snapshot: EntityIndexSnapshot, edits: EntityEdits) -> EntityIndexSnapshot:
    """The derived index as the person edited it: merged entities folded into their targets
    (mentions, names, links), deleted ones gone with their mentions and the links to them,
    then renames and retypes. An edit of an entity this index does not hold is ignored
    (another lane's memories, or one since forgotten)."""
    entities = {e.id: e for e in snapshot.entities}
    mentions = {k: set(v) for k, v in snapshot.mentions.items()}
    roots = {k: _root(k, edits.merged, entities) for k in entities}
    for key, root in roots.items():
        if root == key:
            continue
        source, target = entities[key], entities[root]
        entities[root] = target.model_copy(update={"aliases": list(dict.fromkeys(
            [*target.aliases, source.name, *source.aliases]))})
        mentions.setdefault(root, set()).update(mentions.pop(key, set()))
    folded = {k: _folded(e, roots) for k, e in entities.items() if roots[k] == k}
    gone = {k for k in edits.deleted if k in folded}
    for key in gone:
        folded.pop(key)
        mentions.pop(key, None)
    out: list[Entity] = []
    for key, entity in sorted(folded.items()):
        links = [link for link in entity.links if link.target not in gone
                 and link.target != key]
        update: dict[str, object] = {"links": list(dict.fromkeys(links))}
        if (name := edits.renamed.get(key)) and name != entity.name:
            update["name"] = name
            update["aliases"] = list(dict.fromkeys([*entity.aliases, entity.name]))
        if (kind := edits.retyped.get(key)) is not None:
            update["type"] = kind
        out.append(entity.model_copy(update=update))
    kept = {e.id for e in out}
    return EntityIndexSnapshot(
        entities=out,
        mentions={k: sorted(v) for k, v in sorted(mentions.items()) if k in kept and v},
        speakers=dict(snapshot.speakers))


def _folded(entity: Entity, roots: Mapping[str, str]) -> Entity:
    """An entity's links pointing at a merged entity point at what it joined."""
    links = [Link(kind=link.kind, target=roots.get(link.target, link.target))
             if link.kind is not LinkKind.CATEGORY else link for link in entity.links]
    return entity.model_copy(update={"links": links})


@runtime_checkable
class EntityEditStore(Protocol):
    """Where each user's entity edits are kept, one ``EntityEdits`` per lane."""

    def load(self, scope: Scope, lane: str) -> EntityEdits:
        """The lane's edits (none yet: empty)."""
        ...

    def save(self, scope: Scope, lane: str, edits: EntityEdits) -> None:
        """Keep the lane's edits (empty ones: the lane is dropped)."""
        ...

    def lanes(self, scope: Scope) -> dict[str, EntityEdits]:
        """Every lane's edits of the user."""
        ...

    def delete(self, scope: Scope) -> bool:
        """Drop every lane's edits of the user; whether there were any."""
        ...


class InMemoryEntityEditStore:
    """The ``EntityEditStore`` of one process (unit tests, a bench); it keeps each lane as
    its JSON, so what it returns is what the Redis store would."""

    def __init__(self) -> None:
        self._data: dict[str, dict[str, str]] = {}

    def load(self, scope: Scope, lane: str) -> EntityEdits:
        raw = self._data.get(scope.key, {}).get(lane)
        return EntityEdits.model_validate_json(raw) if raw is not None else EntityEdits()

    def save(self, scope: Scope, lane: str, edits: EntityEdits) -> None:
        user = self._data.setdefault(scope.key, {})
        if edits.empty():
            user.pop(lane, None)
        else:
            user[lane] = edits.model_dump_json()
        if not user:
            self._data.pop(scope.key, None)

    def lanes(self, scope: Scope) -> dict[str, EntityEdits]:
        return {lane: EntityEdits.model_validate_json(raw)
                for lane, raw in sorted(self._data.get(scope.key, {}).items())}

    def delete(self, scope: Scope) -> bool:
        return self._data.pop(scope.key, None) is not None


def edits_seen_by(store: EntityEditStore, scope: Scope, viewer: str | None,
                  lanes: Iterable[str] | None = None) -> EntityEdits:
    """The edits a view of ``viewer`` applies (``lanes_seen_by``), combined."""
    every = store.lanes(scope)
    return combined([every[lane] for lane in (lanes or lanes_seen_by(viewer)) if lane in every])
