"""What extractors produce: memory candidates, before filters and conflict resolution."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from enum import Enum
from typing import Protocol

from pydantic import BaseModel, Field

from strata.models import MemoryKind, Provenance, Source, Turn

__all__ = ["Candidate", "Extractor", "Intent"]


class Intent(str, Enum):
    """What the user asked for, beyond stating something."""

    NONE = "none"
    REMEMBER = "remember"  # "记住…", "remember that…": applied before the turn returns
    OVERRIDE = "override"  # "之前说的不算", "forget what I said, from now on…"
    FORGET = "forget"      # "不用管了", "forget about…": weight to zero at once


class Candidate(BaseModel):
    """A memory an extractor proposes; filters and the ConflictResolver decide its fate."""

    kind: MemoryKind
    text: str
    key: str | None = None
    value: str | None = None
    confidence: float = Field(default=0.8, ge=0.0, le=1.0)
    source: Source = Source.USER_STATED
    intent: Intent = Intent.NONE
    scope_tags: list[str] = Field(default_factory=list)
    provenance: Provenance = Field(default_factory=Provenance)
    event_time: datetime | None = None
    episode_type: str | None = None
    business_object: str | None = None
    sentiment: float = 0.0
    parts: list[str] = Field(default_factory=list)  # an exchange's member turns, in order
    speaker: str | None = None  # who said it, from the turn's ``metadata.speaker``


class Extractor(Protocol):
    """Turns → candidates. Never raises on odd input; returns what it could find."""

    def extract(self, turns: Sequence[Turn]) -> list[Candidate]: ...
