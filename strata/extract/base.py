"""What extractors produce: memory candidates, before filters and conflict resolution."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from enum import Enum
from typing import Any, Protocol

from pydantic import BaseModel, Field

from strata.models import (
    MemoryItem,
    MemoryKind,
    Provenance,
    Role,
    Source,
    Turn,
    Visibility,
    as_utc,
)

__all__ = ["PERSONAL_KEYS", "Candidate", "Extractor", "Intent", "attribute", "attributed",
           "attribution", "said_at_metadata"]

# facts about the person, whatever project they were said in: never tied to a context
PERSONAL_KEYS = ("identity.", "location.", "constraint.")


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
    context: str | None = None  # the project / business line (``attribute``)
    agent: str | None = None    # the agent that learned it (``attribute``)
    said_at: datetime | None = None  # when its latest source turn was said (``attribute``)
    visibility: Visibility = "shared"
    shared_with: list[str] = Field(default_factory=list)
    # a client's own fields (the memories API); Strata's keys (type, count, …) win
    metadata: dict[str, Any] = Field(default_factory=dict)


class Extractor(Protocol):
    """Turns → candidates. Never raises on odd input; returns what it could find."""

    def extract(self, turns: Sequence[Turn]) -> list[Candidate]: ...


def said_at_metadata(cand: Candidate) -> dict[str, str]:
    """What a memory keeps of when its words were said (``metadata.said_at``): a forget
    retried later forgets only what was said before it (``forget_match.said_earlier``)."""
    return {"said_at": as_utc(cand.said_at).isoformat()} if cand.said_at else {}


def attribute(candidates: Sequence[Candidate], turns: Sequence[Turn]) -> list[Candidate]:
    """Each candidate with the agent and the context of the turns it came from
    (``attributed``) and when the latest of them was said; an agent inferred it when its
    source is ``inferred`` or it holds the agent's own words (an exchange quotes its reply)."""
    by_id = {t.turn_id: t for t in turns}
    out = []
    for cand in candidates:
        sources = [by_id[t] for t in cand.provenance.turn_ids if t in by_id]
        agent = next((t.agent for t in sources if t.agent), None)
        context = next((t.context for t in sources if t.context), None)
        inferred = any(t.role is not Role.USER for t in sources)  # it holds the agent's words
        if sources:
            cand = cand.model_copy(update={"said_at": max(t.created_at for t in sources)})
        out.append(attributed(cand, agent, context, inferred=inferred))
    return out


def attributed(cand: Candidate, agent: str | None, context: str | None,
               inferred: bool = False, visibility: Visibility | None = None,
               shared_with: Sequence[str] = ()) -> Candidate:
    """The candidate as learned by ``agent`` in ``context``. Unless ``visibility`` says
    otherwise, what the user states is shared with all of the tenant's agents and what an
    agent inferred stays private to it. A fact about the person (``PERSONAL_KEYS``) belongs
    to no context; any other fact stated in a context is that context's (a ``project:`` scope
    tag, so it conflicts only with the same context's versions: Python in general, Java in
    project X); a sentence that names its project keeps that one."""
    if agent is None and context is None and visibility is None:
        return cand
    inferred = inferred or cand.source is Source.INFERRED
    update: dict[str, object] = {
        "agent": agent, "shared_with": sorted(set(shared_with)),
        "visibility": visibility or ("private" if agent and inferred else "shared")}
    personal = cand.kind is MemoryKind.FACT and (cand.key or "").startswith(PERSONAL_KEYS)
    tagged = any(t.startswith("project:") for t in cand.scope_tags)
    if context and not personal and not tagged:
        update["context"] = context
        if cand.kind is MemoryKind.FACT:
            update["scope_tags"] = [*cand.scope_tags, f"project:{context}"]
    return cand.model_copy(update=update)


def attribution(source: Candidate | MemoryItem) -> dict[str, Any]:
    """The context and sharing fields of a candidate (what ``attribute`` set, for
    ``MemoryItem(**…)``) or of a memory (what a new version of it keeps)."""
    return {"context": source.context, "agent": source.agent,
            "visibility": source.visibility, "shared_with": list(source.shared_with)}
