"""Entities and their links across sessions (#38): what each turn mentions (people, pets,
places, things, events, titles), resolved by a gazetteer and a category lexicon that ship
as data, and a per-user index from entity to the memories that mention it.

``extract_entities`` reads one text; ``EntityIndex`` holds a user's entities, their links
and mentions; ``reach`` answers which memories a question's entities and asked-for kinds
("what state", "which instruments") lead to, ``ranked`` orders them; the hot index keeps
one per user (``strata.stores.hot_entities``) for recall's ``entities`` stage.
"""

from strata.entities.asked import SOURCES, Asked, Reach, asked_for, ranked, reach, source_of
from strata.entities.extract import extract_entities, extract_mentions
from strata.entities.gazetteer import Gazetteer, Place, default_gazetteer
from strata.entities.index import EntityIndex, EntityStore, InMemoryEntityStore
from strata.entities.lexicon import CategoryLexicon, Term, default_lexicon
from strata.entities.models import (
    Entity,
    EntityIndexSnapshot,
    EntityType,
    Link,
    LinkKind,
    Mention,
    entity_id,
)

__all__ = ["SOURCES", "Asked", "CategoryLexicon", "Entity", "EntityIndex", "EntityIndexSnapshot",
           "EntityStore", "EntityType", "Gazetteer", "InMemoryEntityStore", "Link", "LinkKind",
           "Mention", "Place", "Reach", "Term", "asked_for", "default_gazetteer",
           "default_lexicon", "entity_id", "extract_entities", "extract_mentions", "ranked",
           "reach", "source_of"]
