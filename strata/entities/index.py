"""A user's entity index: every entity their turns mention, its links, and the memories /
turns that mention it, across sessions. Built at write time (``add``), read by what a
question asks for: an entity and everything it contains (a state → its cities' turns, a
console → its games' turns), a category and its subcategories (food → desserts), the places
of one level (every turn naming a place in a US state). Pure and in-process; a store keeps
its ``snapshot`` (``EntityStore``), so export, import and forgetting see it as data.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
from typing import Protocol, runtime_checkable

from strata.entities.extract import extract_entities, place_entity, thing_entity
from strata.entities.gazetteer import Gazetteer
from strata.entities.lexicon import CategoryLexicon
from strata.entities.models import Entity, EntityIndexSnapshot, EntityType, LinkKind, entity_id
from strata.models import Scope

__all__ = ["EntityIndex", "EntityStore", "InMemoryEntityStore"]

_CONTAINS = (LinkKind.IN_PLACE, LinkKind.PLATFORM, LinkKind.SAME_AS)


class EntityIndex:
    """One user's entities → their links → the ids of the memories that mention them."""

    def __init__(self, gazetteer: Gazetteer, lexicon: CategoryLexicon) -> None:
        self._gazetteer = gazetteer
        self._lexicon = lexicon
        self.entities: dict[str, Entity] = {}
        self._mentions: dict[str, set[str]] = defaultdict(set)
        self._speaker_of: dict[str, str] = {}
        self._names: dict[str, str] = {}  # a lower-case name → its entity id
        self._inside: dict[str, set[str]] = defaultdict(set)  # target → what links into it

    @property
    def gazetteer(self) -> Gazetteer:
        return self._gazetteer

    @property
    def lexicon(self) -> CategoryLexicon:
        return self._lexicon

    def known_names(self) -> Collection[str]:
        """The lower-case names of the entities it holds (not places)."""
        return self._names.keys()

    # --- writing ------------------------------------------------------------------------

    def add(self, memory_id: str, text: str, lang: str = "en", *, speaker: str | None = None,
            speakers: Collection[str] = ()) -> list[Entity]:
        """Index the entities ``text`` mentions under ``memory_id``; returns them."""
        found = extract_entities(text, lang, gazetteer=self._gazetteer, lexicon=self._lexicon,
                                 speakers=speakers, speaker=speaker, known=self._names.keys())
        out = []
        for entity in found:
            stored = self._put(self._known_as(entity))
            self._mentions[stored.id].add(memory_id)
            out.append(stored)
        if speaker:
            self._speaker_of[memory_id] = speaker
        return out

    def _known_as(self, entity: Entity) -> Entity:
        """A bare name the index already knows as a pet, a person or a place is that one."""
        if entity.type is EntityType.NAME:
            known = self._names.get(entity.name.lower())
            if known and known in self.entities:
                return self.entities[known]
        return entity

    def _put(self, entity: Entity) -> Entity:
        old = self.entities.get(entity.id)
        if old is not None:
            kind = old.type if old.type is not EntityType.NAME else entity.type
            entity = old.model_copy(update={
                "type": kind, "links": list(dict.fromkeys([*old.links, *entity.links])),
                "aliases": list(dict.fromkeys([*old.aliases, *entity.aliases]))})
        self._store(entity)
        for link in entity.links:  # what contains it exists too (Tampa → Florida → US)
            if link.kind is LinkKind.IN_PLACE and link.target not in self.entities:
                place = self._gazetteer.get(link.target)
                if place is not None:
                    self._put(place_entity(place, self._gazetteer))
            elif link.kind is LinkKind.PLATFORM and link.target not in self.entities:
                name = link.target.split(":", 1)[1]
                term = self._lexicon.terms.get(name)
                self._store(thing_entity(term) if term is not None else
                            Entity(id=link.target, name=name, type=EntityType.THING))
        return entity

    def _store(self, entity: Entity) -> None:
        self.entities[entity.id] = entity
        if entity.type is not EntityType.PLACE:
            self._names.setdefault(entity.name.lower(), entity.id)
        for link in entity.links:
            if link.kind in _CONTAINS:
                self._inside[link.target].add(entity.id)

    def forget(self, memory_ids: Iterable[str]) -> int:
        """Drop these memories' mentions (a forgotten or deleted memory); an entity nothing
        mentions any more, and nothing else links to, goes too. Returns entities removed."""
        gone = set(memory_ids)
        for ids in self._mentions.values():
            ids -= gone
        for memory_id in gone:
            self._speaker_of.pop(memory_id, None)
        return self._prune()

    def delete_entity(self, entity_id_: str) -> bool:
        """Remove one entity and its mentions (a person deleting what the index holds)."""
        if self.entities.pop(entity_id_, None) is None:
            return False
        self._mentions.pop(entity_id_, None)
        self._names = {n: i for n, i in self._names.items() if i != entity_id_}
        self._inside.pop(entity_id_, None)
        for children in self._inside.values():
            children.discard(entity_id_)
        return True

    def _prune(self) -> int:
        linked = {link.target for e in self.entities.values() for link in e.links}
        dead = [i for i in self.entities if not self._mentions.get(i) and i not in linked]
        for i in dead:
            self.delete_entity(i)
        return len(dead) + (self._prune() if dead else 0)

    # --- reading ------------------------------------------------------------------------

    def mentions(self, entity_id_: str) -> set[str]:
        """The memories that name this entity itself."""
        return set(self._mentions.get(entity_id_, ()))

    def speaker(self, memory_id: str) -> str | None:
        return self._speaker_of.get(memory_id)

    def find(self, name: str) -> Entity | None:
        """The entity a name (or an entity id) stands for."""
        if name in self.entities:
            return self.entities[name]
        known = self._names.get(name.lower())
        if known:
            return self.entities.get(known)
        for kind in ("name", "thing", "title"):
            candidate = self.entities.get(entity_id(kind, name))
            if candidate is not None:
                return candidate
        return None

    def contained(self, entity_id_: str) -> set[str]:
        """The entity and every entity inside or on it (Florida → Tampa, Miami; Nintendo
        Switch → Xenoblade Chronicles), by following the links backwards."""
        out, todo = {entity_id_}, [entity_id_]
        while todo:
            for child in self._inside.get(todo.pop(), ()):
                if child not in out:
                    out.add(child)
                    todo.append(child)
        return out

    def turns_of(self, entity_id_: str) -> set[str]:
        """The memories naming the entity or anything it contains."""
        return {m for e in self.contained(entity_id_) for m in self._mentions.get(e, ())}

    def in_category(self, category: str) -> set[str]:
        """The entities of a category or one below it (``food`` holds the desserts)."""
        wanted = self._lexicon.descendants(category)
        return {e.id for e in self.entities.values() if e.categories() & wanted}

    def turns_in_category(self, category: str) -> set[str]:
        return {m for e in self.in_category(category) for m in self.turns_of(e)}

    def places_at(self, level: str) -> set[str]:
        """The place entities of a level ("state", "country", "city")."""
        return {e.id for e in self.entities.values() if e.place_level == level}

    def turns_at_level(self, level: str, within: str | None = None) -> set[str]:
        """The memories naming a place of ``level`` or one inside such a place ("what
        state": Florida's turns and Tampa's); ``within``: only places inside that one (the
        "European countries")."""
        out: set[str] = set()
        allowed = self.contained(within) if within else None
        for place in self.places_at(level):
            if allowed is None or place in allowed:
                out |= self.turns_of(place)
        return out

    def by_speaker(self, memory_ids: Iterable[str], speaker: str) -> set[str]:
        """The memories of ``memory_ids`` that ``speaker`` said."""
        return {m for m in memory_ids if (self._speaker_of.get(m) or "").lower()
                == speaker.lower()}

    # --- as data ------------------------------------------------------------------------

    def snapshot(self) -> EntityIndexSnapshot:
        return EntityIndexSnapshot(
            entities=sorted(self.entities.values(), key=lambda e: e.id),
            mentions={i: sorted(ids) for i, ids in sorted(self._mentions.items()) if ids},
            speakers=dict(sorted(self._speaker_of.items())))

    @classmethod
    def from_snapshot(cls, snapshot: EntityIndexSnapshot, gazetteer: Gazetteer,
                      lexicon: CategoryLexicon) -> EntityIndex:
        index = cls(gazetteer, lexicon)
        for entity in snapshot.entities:
            index._store(entity)
        for entity_id_, ids in snapshot.mentions.items():
            index._mentions[entity_id_] = set(ids)
        index._speaker_of = dict(snapshot.speakers)
        return index

    def __len__(self) -> int:
        return len(self.entities)


@runtime_checkable
class EntityStore(Protocol):
    """Where a user's entity index is kept, one snapshot per scope."""

    def load(self, scope: Scope) -> EntityIndexSnapshot | None: ...

    def save(self, scope: Scope, snapshot: EntityIndexSnapshot) -> None: ...

    def delete(self, scope: Scope) -> bool: ...


class InMemoryEntityStore:
    """The ``EntityStore`` of one process (tests, a single-node app); it keeps each snapshot
    as its JSON, so what it returns is what a durable store would."""

    def __init__(self) -> None:
        self._data: dict[tuple[str, str], str] = {}

    def load(self, scope: Scope) -> EntityIndexSnapshot | None:
        raw = self._data.get((scope.tenant, scope.user))
        return EntityIndexSnapshot.model_validate_json(raw) if raw is not None else None

    def save(self, scope: Scope, snapshot: EntityIndexSnapshot) -> None:
        self._data[(scope.tenant, scope.user)] = snapshot.model_dump_json()

    def delete(self, scope: Scope) -> bool:
        return self._data.pop((scope.tenant, scope.user), None) is not None
