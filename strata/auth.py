"""API keys → (tenant, role). The scope every store call uses is fixed from this, nowhere else."""

from __future__ import annotations

import hmac
from typing import Literal

from pydantic import BaseModel, ValidationError

from strata.errors import Forbidden, InvalidInput, Unauthorized
from strata.models import MemoryKind, Scope, Source
from strata.settings import ApiKey

__all__ = ["DEV_KEY", "Principal", "authenticate", "scope_for"]

DEV_KEY = "dev"


class Principal(BaseModel):
    """Who is calling: the key's tenant and role (and its recall recipe, if it has one)."""

    tenant: str
    role: Literal["admin", "agent"]
    recipe: str | None = None
    agent: str | None = None  # the agent a key is bound to

    def agent_for(self, requested: str | None) -> str | None:
        """The agent a request acts as: the key's, if it is bound to one (a request may not
        name another), else the one the request names (or none)."""
        if self.agent is None:
            return requested
        if requested is not None and requested != self.agent:
            raise Forbidden(f"this key is bound to agent {self.agent!r}; it cannot act as "
                            f"{requested!r}")
        return self.agent

    def viewer(self, requested: str | None = None) -> str | None:
        """Whose view of memories a read gets: the agent's (``agent_for``); with no agent,
        an admin sees everything (None) and any other key what is shared ("")."""
        agent = self.agent_for(requested)
        if agent is not None:
            return agent
        return None if self.role == "admin" else ""

    def require_admin(self) -> None:
        if self.role != "admin":
            raise Forbidden("this needs an admin key")

    def require_may_write(self, kind: MemoryKind, source: Source) -> None:
        """Procedures and memories whose source is ``admin`` are an admin's: only an admin
        key creates, changes or deletes them."""
        if self.role == "admin":
            return
        if kind is MemoryKind.PROCEDURE:
            raise Forbidden("only an admin key may create, change or delete procedures")
        if source is Source.ADMIN:
            raise Forbidden("only an admin key may create, change or delete memories whose "
                            "source is admin")


def authenticate(authorization: str | None, keys: dict[str, ApiKey]) -> Principal:
    """Resolve ``Authorization: Bearer <key>``; with no keys configured only ``dev`` works."""
    if not authorization or not authorization.lower().startswith("bearer "):
        raise Unauthorized("send Authorization: Bearer <api key>")
    presented = authorization[7:].strip()
    table = keys or {DEV_KEY: ApiKey(tenant="default", role="admin")}
    for key, entry in table.items():
        if hmac.compare_digest(key.encode(), presented.encode()):
            return Principal(tenant=entry.tenant, role=entry.role, recipe=entry.recipe,
                             agent=entry.agent)
    raise Unauthorized("unknown API key")


def scope_for(principal: Principal, user_id: str) -> Scope:
    """The (tenant, user) scope of a request; the tenant always comes from the key."""
    try:
        return Scope(tenant=principal.tenant, user=user_id)
    except ValidationError as exc:
        raise InvalidInput(exc.errors()[0]["msg"]) from None
