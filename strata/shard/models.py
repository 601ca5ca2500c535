"""What goes into and comes out of a session shard: turns, acknowledgements, the working
memory's view, sweep reports and the shard's half of a recall."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from strata.models import AgentName, ContextName, Turn, UtcDatetime
from strata.recall.assembly import LayerCandidates
from strata.recall.routing import RouteDecision
from strata.recall.scoring import ScoredItem

__all__ = ["CloseAck", "IntentResult", "MemoryAnswer", "SweepReport", "TurnAck", "TurnIn",
           "WorkingMemoryView"]


class TurnIn(BaseModel):
    """A turn as a client sends it (the HTTP body of a turn, without the user)."""

    model_config = ConfigDict(extra="forbid")

    role: str
    content: str
    created_at: UtcDatetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    turn_id: str | None = Field(default=None, description="client id; a retry is deduplicated")
    context: ContextName | None = Field(default=None, description=(
        "the project / business line of this turn and the ones after it; a new one sets "
        "the session's working memory aside for that context's"))
    agent: AgentName | None = Field(default=None, description=(
        "the agent of this session (a key bound to an agent sets it)"))


class IntentResult(BaseModel):
    remembered: list[str] = Field(default_factory=list)
    forgotten: list[str] = Field(default_factory=list)
    # the forget requests the turn made (``GET /v1/users/{user_id}/forgets``: what each hid,
    # and until when it can be undone)
    forgets: list[str] = Field(default_factory=list)
    deferred: bool = False  # the long-term write failed; a worker will apply it


class TurnAck(BaseModel):
    turn_id: str
    session_id: str
    turn_count: int
    pinned: bool
    window_size: int
    duplicate: bool = False
    intents: IntentResult = IntentResult()
    context: str | None = None  # the session's context after this turn


class CloseAck(BaseModel):
    session_id: str
    closed: bool = True
    already_closed: bool = False
    extraction_job: str | None = None


class WorkingMemoryView(BaseModel):
    session_id: str
    user_id: str
    window: list[Turn]
    summary: str
    pinned: list[Turn]
    task_state: dict[str, Any]
    turn_count: int
    tokens: int
    closed: bool
    last_active_at: datetime
    context: str | None = None
    set_aside: list[str] = Field(default_factory=list)  # contexts left ("": none)
    agent: str | None = None


class ForgetView(BaseModel):
    """A forget request as the API shows it."""

    forget_id: str
    turn_id: str
    said_at: datetime
    target: str  # what it named ("*": everything)
    agent: str | None = None  # the agent it was said to
    hidden: int  # the memories it hid (0 once final: they are deleted)
    state: Literal["undoable", "final"]
    undo_until: datetime | None = None
    restored: int | None = None  # an undo's answer: the memories that came back


class SweepReport(BaseModel):
    idle_extractions: int = 0
    evicted: int = 0
    in_memory: int = 0


class MemoryAnswer(BaseModel):
    """A shard's half of a recall: the route, the session's working memory, the scored
    candidates of the personal layers (from the hot index), and the most-used facts when
    none of them passes the threshold (``strata.recall.service.assemble``'s last resort)."""

    decision: RouteDecision
    working: WorkingMemoryView | None = None
    found: LayerCandidates
    most_used: list[ScoredItem] = Field(default_factory=list)
    embedding: Any = None  # the query's QueryEmbedding, when the shard computed it
    # the user's corrections of knowledge chunks, by chunk id (when knowledge is routed)
    corrections: dict[str, ScoredItem] = Field(default_factory=dict)
