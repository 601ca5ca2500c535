"""The FastAPI dependencies every route takes its caller and scope from.

``Caller`` is the principal of the request's API key (401 without a known key); ``UserScope``
the scope of the path's ``user_id`` for that caller — the tenant comes from the key, never
from the request; ``AgentParam`` the ``agent`` query parameter, checked.
"""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import Depends, Request
from ray import serve

from serve_app.routes.base import IngressState
from strata import tracing
from strata.auth import Principal, scope_for
from strata.errors import InvalidInput
from strata.models import Scope, check_agent

__all__ = ["AgentParam", "Caller", "UserScope", "caller", "ingress"]


def ingress() -> IngressState:
    """The ingress this replica runs (Serve's class-based view injects it as ``self``;
    the dependencies and the middleware reach it here)."""
    return cast(IngressState, serve.get_replica_context().servable_object)


def caller(request: Request) -> Principal:
    """The principal of the request's API key (its tenant named on the request's span)."""
    principal = ingress().principal(request)
    tracing.annotate(tenant=principal.tenant)
    return principal


Caller = Annotated[Principal, Depends(caller)]


def user_scope(user_id: str, principal: Caller) -> Scope:
    """The scope of ``user_id`` in the caller's tenant."""
    scope = scope_for(principal, user_id)
    tracing.annotate(user_id=scope.user)
    return scope


UserScope = Annotated[Scope, Depends(user_scope)]


def agent_param(agent: str | None = None) -> str | None:
    """An ``agent`` query parameter: an agent name, checked."""
    try:
        return check_agent(agent)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


AgentParam = Annotated[str | None, Depends(agent_param)]
