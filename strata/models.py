"""Strata's data: pydantic models with no I/O. Stores and services move these around.

Why this module is long: it is the one vocabulary every layer shares (scopes, memories,
records, hits and their scores, the recall request and response); split by layer, each
piece would import the others back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum, StrEnum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from strata.extract.pii import holds_secret

__all__ = [
    "LONG_TERM", "SHARED_USER", "AgentName", "Collection", "ContextName", "Layer", "MemoryItem",
    "MemoryKind", "MemoryStatus", "Provenance", "RecallItem", "RecallRequest", "RecallResponse",
    "RecordFilter", "Role", "Scope", "SearchHit", "Source", "StoredRecord", "Turn", "TurnScore",
    "UtcDatetime",
    "Visibility", "as_utc", "check_agent", "check_id", "check_name", "context_name", "is_visible",
    "utcnow",
]

SHARED_USER = "_shared"
Visibility = Literal["shared", "private", "agents"]
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}")  # whole string: fullmatch
# control characters break filter expressions and logs; lone surrogates cannot be encoded
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def utcnow() -> datetime:
    """The current time, timezone-aware (UTC)."""
    return datetime.now(timezone.utc)


def as_utc(when: datetime) -> datetime:
    """``when`` with a time zone: a time sent without one is taken as UTC (``UtcDatetime``)."""
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


UtcDatetime = Annotated[datetime, AfterValidator(as_utc)]


def _no_secret(kind: str, value: str, numbers: bool = False) -> None:
    """Ids and names are stored, logged and shown as sent: none may hold a credential (nor,
    ``numbers``, a card or ID number: free-text names; an id's digits may pass a checksum)."""
    if holds_secret(value, numbers):
        raise ValueError(f"{kind} holds what looks like a credential or a card or ID number; "
                         "ids and names are stored and shown as sent, so they may hold none")


def check_id(kind: str, value: str) -> str:
    """An identifier (tenant, user, session, memory): the whole value matches the pattern."""
    if not _ID_RE.fullmatch(value):
        raise ValueError(
            f"{kind} must be 1-128 characters of letters, digits and ._@+- "
            f"and start with a letter or digit; got {value!r}"
        )
    _no_secret(kind, value)
    return value


def check_name(kind: str, value: str, max_length: int = 200) -> str:
    """A free-form name a client chooses (a turn id, a fact key): any text of 1 to
    ``max_length`` characters without control characters."""
    if not 0 < len(value) <= max_length:
        raise ValueError(f"{kind} must be 1-{max_length} characters; got {len(value)}")
    if (bad := _UNPRINTABLE.search(value)) is not None:
        raise ValueError(f"{kind} may not contain control characters; got "
                         f"{bad.group()!r} at position {bad.start()}")
    _no_secret(kind, value)
    return value


class Scope(BaseModel):
    """Whose memory a read or write touches: one user inside one tenant.

    Every store call takes a Scope; the knowledge base of a tenant uses ``Scope.shared``.
    """

    model_config = ConfigDict(frozen=True)

    tenant: str
    user: str

    @field_validator("tenant")
    @classmethod
    def _tenant(cls, value: str) -> str:
        return check_id("tenant", value)

    @field_validator("user")
    @classmethod
    def _user(cls, value: str) -> str:
        return check_id("user_id", value)

    @classmethod
    def shared(cls, tenant: str) -> Scope:
        """The tenant's shared scope (its knowledge base); no user id can name it."""
        check_id("tenant", tenant)
        return cls.model_construct(tenant=tenant, user=SHARED_USER)

    @property
    def key(self) -> str:
        """The partition value stored with every record: ``tenant:user``."""
        return f"{self.tenant}:{self.user}"


class Collection(str, Enum):
    """One vector collection per long-term layer."""

    FACTS = "facts"
    EPISODES = "episodes"
    PROCEDURES = "procedures"
    KNOWLEDGE = "knowledge"


class Role(str, Enum):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


class MemoryKind(str, Enum):
    FACT = "fact"
    EPISODE = "episode"
    PROCEDURE = "procedure"


class MemoryStatus(StrEnum):
    """A stored memory's or chunk's status (a StrEnum: it formats and compares as its value,
    the string stored in a record's ``status`` column)."""

    ACTIVE = "active"
    SUPERSEDED = "superseded"
    PENDING = "pending"
    OBSERVATION = "observation"
    COLD = "cold"
    ARCHIVED = "archived"
    DEPRECATED = "deprecated"


class Layer(StrEnum):
    """A layer recall reads: the session's working memory, the user's facts, episodes and
    procedures, the tenant's knowledge base."""

    # the one map from a layer to the stored names (its Collection, its MemoryKind) is below
    WORKING = "working"
    FACTS = "facts"
    EPISODES = "episodes"
    PROCEDURES = "procedures"
    KNOWLEDGE = "knowledge"

    @property
    def collection(self) -> Collection:
        """The vector collection that holds the layer (working memory has none)."""
        if self is Layer.WORKING:
            raise ValueError("working memory is not a vector collection")
        return Collection(self.value)  # a collection is named as its layer

    @property
    def kind(self) -> MemoryKind | None:
        """The kind of the layer's memories; None for working memory and knowledge chunks."""
        return _KIND_OF.get(self)

    @property
    def long_term(self) -> bool:
        """One of the user's long-term layers: facts, episodes, procedures."""
        return self in _KIND_OF

    @classmethod
    def of_kind(cls, kind: MemoryKind) -> Layer:
        """The layer that holds memories of ``kind``."""
        return _LAYER_OF[kind]

    @classmethod
    def of_collection(cls, collection: Collection) -> Layer:
        """The layer a vector collection holds."""
        return cls(collection.value)


_KIND_OF = {Layer.FACTS: MemoryKind.FACT, Layer.EPISODES: MemoryKind.EPISODE,
            Layer.PROCEDURES: MemoryKind.PROCEDURE}
_LAYER_OF = {kind: layer for layer, kind in _KIND_OF.items()}
LONG_TERM: tuple[Layer, ...] = tuple(_KIND_OF)  # the user's memories, in this order


class Source(str, Enum):
    USER_STATED = "user_stated"
    INFERRED = "inferred"
    ADMIN = "admin"


class Provenance(BaseModel):
    """Where a memory came from: the session and the turns the turn API returned."""

    session_id: str | None = None
    turn_ids: list[str] = Field(default_factory=list)


class Turn(BaseModel):
    """One message of a conversation, as stored in working memory and the WAL."""

    turn_id: str
    session_id: str
    user_id: str
    role: Role
    content: str
    created_at: UtcDatetime = Field(default_factory=utcnow)
    metadata: dict[str, Any] = Field(default_factory=dict)
    pinned: bool = False
    agent: str | None = None    # the agent the turn was said to (or by)
    context: str | None = None  # the project / business line the turn belongs to


class MemoryItem(BaseModel):
    """A long-term memory of one user: a fact, an episode or a procedure."""

    id: str
    kind: MemoryKind
    text: str
    key: str | None = None
    value: str | None = None
    confidence: float = Field(default=0.8, ge=0.0, le=1.0)
    source: Source = Source.USER_STATED
    status: MemoryStatus = MemoryStatus.ACTIVE
    scope_tags: list[str] = Field(default_factory=list)
    provenance: Provenance = Field(default_factory=Provenance)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    event_time: datetime | None = None
    valid_to: datetime | None = None
    superseded_by: str | None = None
    last_access_at: datetime | None = None
    access_count: int = 0
    weight: float = 1.0
    metadata: dict[str, Any] = Field(default_factory=dict)
    # the project / business line it belongs to (None: the user in general)
    context: str | None = None
    # the agent that learned it, and who else sees it (``is_visible``)
    agent: str | None = None
    visibility: Visibility = "shared"
    shared_with: list[str] = Field(default_factory=list)

    def visible_to(self, viewer: str | None) -> bool:
        """``is_visible`` for this memory (``viewer`` None: every memory is)."""
        return viewer is None or is_visible({"agent": self.agent, "visibility": self.visibility,
                                             "shared_with": self.shared_with}, viewer)


# an episode's metadata key for the words a chat model wrote for it at extraction
# (``strata.extract.enrich``): searched with its text, never shown as said
KEYWORDS = "keywords"


def embedded_text(text: str, metadata: dict[str, Any] | Any) -> str:
    """What a memory's vector and index terms read: its text, and its keywords when it has
    them (``strata.extract.enrich``)."""
    words = metadata.get(KEYWORDS) if isinstance(metadata, dict) else None
    return f"{text}\n{words}" if isinstance(words, str) and words else text


class StoredRecord(BaseModel):
    """The row a vector collection holds, whatever the layer.

    Layer-specific fields travel in ``payload``; the columns are the ones every
    layer filters or ranks on.
    """

    id: str
    text: str
    vector: list[float] | None = None
    status: MemoryStatus = MemoryStatus.ACTIVE
    created_at: float = 0.0
    updated_at: float = 0.0
    confidence: float = 1.0
    embed_model: str = ""
    payload: dict[str, Any] = Field(default_factory=dict)
    # episodes: the text's token vectors for late interaction, computed at write time
    # (``strata.recall.late.pack_tokens``); returned with the vector by ``get``
    tokens: str | None = None

    @property
    def indexed_text(self) -> str:
        """What BM25 indexes: the text, with an episode's keywords (``embedded_text``)."""
        return embedded_text(self.text, self.payload.get("metadata"))


class RecordFilter(BaseModel):
    """A typed filter on the common columns; the scope is never part of it."""

    statuses: list[MemoryStatus] | None = None
    ids: list[str] | None = None
    created_after: float | None = None
    created_before: float | None = None
    # when it happened (``payload.event_time``, ISO) from this ISO day on, before this one
    event_from: str | None = Field(default=None, pattern=r"^\d{4}-\d{2}-\d{2}$")
    event_before: str | None = Field(default=None, pattern=r"^\d{4}-\d{2}-\d{2}$")
    # keys are payload paths: "key", or "metadata.type" for a nested field
    payload_equals: dict[str, str | int | float | bool] = Field(default_factory=dict)
    payload_not_equals: dict[str, str | int | float | bool] = Field(default_factory=dict)
    # only what this agent may see (``is_visible``); None: no visibility filter
    visible_to: str | None = None

    @field_validator("payload_equals", "payload_not_equals")
    @classmethod
    def _keys(
        cls, value: dict[str, str | int | float | bool]
    ) -> dict[str, str | int | float | bool]:
        for key in value:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}(\.[A-Za-z_][A-Za-z0-9_]{0,63})?",
                                key):
                raise ValueError(f"payload key {key!r} is not a plain identifier or a.b path")
        return value


def check_agent(value: str | None) -> str | None:
    """An agent's name: an identifier (letters, digits, ``._@+-``)."""
    return None if value is None else check_id("agent", value)


def context_name(value: str | None) -> str | None:
    """A project or business-line context as stored and compared: case-folded, runs of space
    as one ``-`` ("Project X" and "project-x" are one context); any language, ≤ 80 chars."""
    if value is None:
        return None
    check_name("context", value, max_length=80)
    _no_secret("context", value, numbers=True)
    name = "-".join(value.casefold().split())
    if not name:
        raise ValueError("context is blank")
    return name


def _context(value: str) -> str:
    return str(context_name(value))


# fields of requests: an agent's name, a context (stored as ``context_name`` gives it)
AgentName = Annotated[str, AfterValidator(lambda value: check_id("agent", value))]
ContextName = Annotated[str, AfterValidator(_context)]


def is_visible(payload: dict[str, Any], viewer: str) -> bool:
    """Whether an agent sees a memory (``viewer`` "" is a caller that names no agent: it sees
    what is shared). A memory is ``shared`` with all of the tenant's agents unless it says
    ``private`` (its agent only) or ``agents`` (its agent and those in ``shared_with``); a
    memory written before visibility existed is shared."""
    visibility = payload.get("visibility") or "shared"
    if visibility not in ("private", "agents"):
        return True
    if viewer and payload.get("agent") == viewer:
        return True
    return visibility == "agents" and bool(viewer) and viewer in (payload.get("shared_with") or [])


@dataclass(frozen=True, slots=True)
class TurnScore:
    """How the episodes layer's ranking scored one turn (``strata.recall.granularity``):
    its own similarity, its best exchange's, the share of the query's terms both hold, the
    best turn of its session, MaxSim when late interaction scored it, and the score it
    ranks by. ``terms`` are what each ranking stage added (``strata.recall.stages``; a boost
    that did not apply is absent), in the order they were added."""

    own: float
    exchange: float
    coverage: float
    session: float
    score: float
    late: float | None = None
    terms: tuple[tuple[str, float], ...] = ()
    merged_with: str | None = None

    def term(self, stage: str) -> float | None:
        """What the stage added to this turn's score (None: nothing)."""
        return next((v for s, v in self.terms if s == stage), None)


class SearchHit(BaseModel):
    """A record returned by a search, with its score (higher is better). ``parts`` are the
    store's raw similarities: ``dense`` (cosine) and ``lexical`` (BM25); a turn the
    episodes' ranking scored carries that ranking in ``turn``."""

    record: StoredRecord
    score: float
    parts: dict[str, float] = Field(default_factory=dict)
    turn: TurnScore | None = None


class RecallRequest(BaseModel):
    """The body of ``POST /v1/recall``."""

    model_config = ConfigDict(extra="forbid")

    user_id: str
    query: str = Field(min_length=1, max_length=4000)
    session_id: str | None = None
    budget_tokens: int = Field(default=500, ge=50, le=8000)
    layers: list[Layer] | None = None
    top_k: int = Field(default=10, ge=1, le=100)
    debug: bool = False
    include_cold: bool = False
    recipe: str | None = Field(default=None, description="a named recall recipe")
    context: ContextName | None = Field(default=None, description=(
        "the current project / business line: its memories rank first, another context's "
        "never above them"))
    context_only: bool = Field(default=False, description=(
        "leave out memories of other contexts (those of no context stay)"))
    agent: AgentName | None = Field(default=None, description=(
        "the calling agent (a key bound to an agent sets it): recall sees what it may see"))


class RecallItem(BaseModel):
    """One line of recalled context."""

    id: str
    layer: Layer
    text: str
    score: float
    created_at: datetime | None = None
    confidence: float | None = None
    source: str | None = None
    provenance: Provenance = Field(default_factory=Provenance)
    context: str | None = None
    speaker: str | None = Field(default=None, description=(
        "who said it, in a multi-party conversation (the turn's metadata.speaker)"))


class RecallResponse(BaseModel):
    """The answer of ``POST /v1/recall``."""

    context: str
    items: list[RecallItem]
    route: str
    layers: list[Layer] = Field(default_factory=list)
    degraded: bool = False
    timings_ms: dict[str, float] = Field(default_factory=dict)
    debug: dict[str, Any] | None = None
