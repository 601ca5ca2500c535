"""The entity index's data: an entity, its links, a mention of it in a turn, and the
serialised index. Pure data (pydantic); extraction lives in ``extract``, the index in
``index``."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Entity", "EntityIndexSnapshot", "EntityType", "Link", "LinkKind", "Mention",
           "entity_id"]


class EntityType(StrEnum):
    """What an entity is. ``NAME``: a proper noun nothing else resolved (a person, a pet, a
    band, a title — the turn did not say which)."""

    PERSON = "person"
    PET = "pet"
    PLACE = "place"
    ORGANISATION = "organisation"
    THING = "thing"
    EVENT = "event"
    TITLE = "title"  # a quoted work: a book, a song, a film
    NAME = "name"


class LinkKind(StrEnum):
    """How one entity leads to another (or to a category)."""

    IN_PLACE = "in_place"      # a city in its state, a state in its country, …
    CATEGORY = "category"      # a violin is an instrument; a pet's animal ("dog")
    PLATFORM = "platform"      # a game on its console
    SAME_AS = "same_as"        # "Switch" is the Nintendo Switch
    RELATION = "relation"      # "my dog Max": Max is a dog of the speaker; "my son Kyle"
    OWNER = "owner"            # the person whose pet / family member it is (a speaker's name)


class Link(BaseModel):
    """A directed link; ``target`` is an entity id, or a category name for ``CATEGORY``."""

    model_config = ConfigDict(frozen=True)

    kind: LinkKind
    target: str


class Entity(BaseModel):
    """One entity: its stable id, the name it is shown by, its type, the other names it was
    seen by, and its links. ``place_level`` for places: city, state, country or continent."""

    id: str
    name: str
    type: EntityType
    aliases: list[str] = Field(default_factory=list)
    links: list[Link] = Field(default_factory=list)
    place_level: str | None = None

    def categories(self) -> set[str]:
        return {link.target for link in self.links if link.kind is LinkKind.CATEGORY}


class Mention(BaseModel):
    """An entity as one text names it: the span it was read from (character offsets)."""

    model_config = ConfigDict(frozen=True)

    entity: Entity
    surface: str
    start: int
    end: int


class EntityIndexSnapshot(BaseModel):
    """An index as data (export, import, a store's value): its entities and, per entity id,
    the ids of the memories / turns that mention it."""

    version: int = 1
    entities: list[Entity] = Field(default_factory=list)
    mentions: dict[str, list[str]] = Field(default_factory=dict)
    speakers: dict[str, str] = Field(default_factory=dict)  # memory id → who said it


def entity_id(kind: str, key: str) -> str:
    """An entity's id: its kind and a normalised key (``name:max``, ``thing:violin``,
    ``place:city:4174757``)."""
    return f"{kind}:{' '.join(key.lower().split())}"
