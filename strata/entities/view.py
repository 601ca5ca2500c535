"""The entity view people browse (#38): a user's entities as the API and the inspector show
them — name, type, how many memories mention each, its links with names (a city → its
state → its country, a pet → its owner and animal) — and one entity's mentions across
sessions, newest first. Pure: built from a derived ``EntityIndex``, the memories it was
derived from, and the person's edits (``strata.entities.overlay``)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, model_validator

from strata.entities.gazetteer import Gazetteer
from strata.entities.index import EntityIndex
from strata.entities.lexicon import CategoryLexicon
from strata.entities.models import Entity, EntityType, LinkKind
from strata.entities.overlay import EntityEdits, apply_edits, public_id
from strata.models import MemoryItem, MemoryKind

__all__ = ["EntityDetail", "EntityLinkView", "EntityList", "EntityMention", "EntityPatch",
           "EntitySummary", "EntityView"]

MAX_NAME = 200


class EntityLinkView(BaseModel):
    """A link as shown: its kind, where it leads (an entity's API id, or a category's name)
    and the name to show."""

    kind: LinkKind
    target: str
    name: str
    entity: bool = Field(description="whether target is an entity of the view (else a "
                                     "category, or a person the user talks with)")


class EntitySummary(BaseModel):
    id: str = Field(description="the entity's id in the API (URL-safe)")
    key: str = Field(description="its id in the entity index: kind and normalised name")
    name: str
    type: EntityType
    aliases: list[str] = Field(default_factory=list)
    place_level: str | None = None
    mentions: int = Field(description="memories that name it (or an entity merged into it)")
    sessions: int = Field(description="sessions those memories came from")
    last_mentioned_at: datetime | None = None
    within: list[str] = Field(default_factory=list,
                              description="a place's containing places, nearest first")
    links: list[EntityLinkView] = Field(default_factory=list)


class EntityMention(BaseModel):
    """A memory that names the entity (or, ``via``, an entity inside it: Florida's Tampa)."""

    memory_id: str
    kind: MemoryKind
    text: str
    session_id: str | None = None
    turn_ids: list[str] = Field(default_factory=list)
    at: datetime
    speaker: str | None = None
    via: str | None = Field(default=None, description="the API id of the entity inside "
                                                      "this one that the memory names")


class EntityDetail(EntitySummary):
    contains: list[EntityLinkView] = Field(default_factory=list,
                                           description="entities inside or on this one")
    mention_list: list[EntityMention] = Field(default_factory=list)


class EntityList(BaseModel):
    entities: list[EntitySummary]
    total: int = Field(description="entities in the view before type, q and limit")
    memories_read: int = Field(description="the visible memories the view was derived from")


class EntityPatch(BaseModel):
    """``PATCH /v1/users/{user_id}/entities/{entity_id}``: a new name, a new type, or a
    merge into another entity (by its API id) — at least one."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=MAX_NAME)
    type: EntityType | None = None
    merge_into: str | None = Field(default=None, pattern=r"^[0-9a-f]{16}$")

    @model_validator(mode="after")
    def _something(self) -> EntityPatch:
        if self.name is not None and not self.name.strip():
            raise ValueError("name must not be blank")
        if self.name is None and self.type is None and self.merge_into is None:
            raise ValueError("give name, type or merge_into")
        return self


def _at(item: MemoryItem) -> datetime:
    return item.event_time or item.created_at


class EntityView:
    """One viewer's entity view of a user: the derived index with the edits applied."""

    def __init__(self, derived: EntityIndex, items: Mapping[str, MemoryItem],
                 edits: EntityEdits, gazetteer: Gazetteer, lexicon: CategoryLexicon) -> None:
        self._derived = derived
        self.index = EntityIndex.from_snapshot(apply_edits(derived.snapshot(), edits),
                                               gazetteer, lexicon)
        self._items = items
        self._by_public = {public_id(k): k for k in self.index.entities}
        speakers = {s.lower(): s for s in self.index.snapshot().speakers.values()}
        self._speakers = speakers
        self._summaries: list[EntitySummary] | None = None

    def derived_name(self, key: str) -> str:
        """The name the memories give the entity (before a rename)."""
        entity = self._derived.entities.get(key)
        return entity.name if entity is not None else self.index.entities[key].name

    def key_of(self, entity_id: str) -> str | None:
        """The index id of an API id, if the view holds it."""
        return self._by_public.get(entity_id)

    def summaries(self) -> list[EntitySummary]:
        """Every entity, most mentioned first (built once per view)."""
        if self._summaries is None:
            out = [self.summary(key) for key in self.index.entities]
            self._summaries = sorted(out, key=lambda s: (-s.mentions, s.name.lower(), s.key))
        return self._summaries

    def summary(self, key: str) -> EntitySummary:
        entity = self.index.entities[key]
        memories = [self._items[m] for m in self.index.mentions(key) if m in self._items]
        return EntitySummary(
            id=public_id(key), key=key, name=entity.name, type=entity.type,
            aliases=entity.aliases, place_level=entity.place_level, mentions=len(memories),
            sessions=len({m.provenance.session_id for m in memories
                          if m.provenance.session_id}),
            last_mentioned_at=max(map(_at, memories), default=None),
            within=self._within(entity), links=[self._link(lk.kind, lk.target)
                                                for lk in entity.links])

    def detail(self, key: str) -> EntityDetail:
        """The entity with every memory naming it or what it contains, newest first."""
        mentions: list[EntityMention] = []
        for inner in sorted(self.index.contained(key)):
            for memory_id in self.index.mentions(inner):
                item = self._items.get(memory_id)
                if item is None or any(m.memory_id == memory_id for m in mentions):
                    continue
                mentions.append(EntityMention(
                    memory_id=item.id, kind=item.kind, text=item.text,
                    session_id=item.provenance.session_id, turn_ids=item.provenance.turn_ids,
                    at=_at(item), speaker=self.index.speaker(item.id),
                    via=None if inner == key else public_id(inner)))
        mentions.sort(key=lambda m: (m.at, m.memory_id), reverse=True)
        inside = self.index.contained(key)
        contains = [self._link(self._joined_by(child, inside), child)
                    for child in sorted(inside - {key})]
        return EntityDetail(**self.summary(key).model_dump(), contains=contains,
                            mention_list=mentions)

    def _joined_by(self, child: str, inside: set[str]) -> LinkKind:
        """How an entity inside another is linked to it (a city in, a game on)."""
        return next((lk.kind for lk in self.index.entities[child].links
                     if lk.target in inside and lk.kind is not LinkKind.CATEGORY),
                    LinkKind.IN_PLACE)

    def _within(self, entity: Entity) -> list[str]:
        chain: list[str] = []
        current: Entity | None = entity
        seen = {entity.id}
        while current is not None:
            parent = next((lk.target for lk in current.links
                           if lk.kind is LinkKind.IN_PLACE and lk.target not in seen), None)
            current = self.index.entities.get(parent) if parent else None
            if current is not None:
                chain.append(current.name)
                seen.add(current.id)
        return chain

    def _link(self, kind: LinkKind, target: str) -> EntityLinkView:
        entity = self.index.entities.get(target)
        if entity is not None:
            return EntityLinkView(kind=kind, target=public_id(target), name=entity.name,
                                  entity=True)
        tail = target.split(":", 1)[1] if ":" in target else target
        return EntityLinkView(kind=kind, target=target,
                              name=self._speakers.get(tail, tail), entity=False)
