"""The bodies of the memories API: what a caller may create and change (validated here, so
a bad request is a 422 before it reaches a shard)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from strata.models import (
    AgentName,
    ContextName,
    MemoryKind,
    Source,
    Visibility,
    check_id,
    check_name,
    context_name,
)

__all__ = ["MemoryCreate", "MemoryPatch", "check_fact_key", "check_scope_tags",
           "check_session_id"]


# rules of fields these bodies share with a memory's import line and a follow-up request, as
# validators (``_key = field_validator("key")(check_fact_key)``): after the field's own checks
def check_fact_key(value: str | None) -> str | None:
    """A fact's key: a name (``check_name``)."""
    return None if value is None else check_name("key", value)


def check_scope_tags(value: list[str] | None) -> list[str] | None:
    """Scope tags: each a name (``check_name``)."""
    return None if value is None else [check_name("scope tag", tag) for tag in value]


def check_session_id(value: str | None) -> str | None:
    """A session id: an identifier (``check_id``)."""
    return None if value is None else check_id("session_id", value)


class MemoryCreate(BaseModel):
    """Body of ``POST /v1/users/{user_id}/memories``."""

    model_config = ConfigDict(extra="forbid")

    kind: MemoryKind
    text: str | None = Field(default=None, max_length=8000)
    key: str | None = Field(default=None, max_length=200)
    value: str | None = Field(default=None, max_length=2000)
    confidence: float = Field(default=0.9, ge=0.0, le=1.0)
    source: Source = Source.USER_STATED
    scope_tags: list[str] = Field(default_factory=list, max_length=20)
    metadata: dict[str, Any] = Field(default_factory=dict)
    session_id: str | None = None
    context: ContextName | None = Field(default=None, description="the project / business line")
    agent: AgentName | None = Field(default=None, description=(
        "the agent that learned it (a key bound to an agent sets it)"))
    visibility: Visibility | None = Field(default=None, description=(
        "shared (all of the tenant's agents), private (the agent only) or agents (the agent "
        "and shared_with); default: shared, private when source is inferred"))
    shared_with: list[AgentName] = Field(default_factory=list, max_length=50)

    _key = field_validator("key")(check_fact_key)
    _tags = field_validator("scope_tags")(check_scope_tags)
    _session_id = field_validator("session_id")(check_session_id)


class MemoryPatch(BaseModel):
    """Body of ``PATCH /v1/users/{user_id}/memories/{id}``."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = Field(default=None, min_length=1, max_length=8000)
    value: str | None = Field(default=None, min_length=1, max_length=2000)
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    status: Literal["active", "cold", "archived"] | None = None
    scope_tags: list[str] | None = None
    metadata: dict[str, Any] | None = None
    context: str | None = Field(default=None, description=(
        "move it to this project / business line; \"\" makes it the user's in general"))
    visibility: Visibility | None = None
    shared_with: list[AgentName] | None = Field(default=None, max_length=50)

    _tags = field_validator("scope_tags")(check_scope_tags)

    @field_validator("context")
    @classmethod
    def _context(cls, value: str | None) -> str | None:
        return value if value in (None, "") else context_name(value)
