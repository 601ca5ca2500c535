"""A user's entity view over HTTP (#38): ``/v1/users/{user_id}/entities`` — list and
inspect the people, pets, places and things the user's memories name, rename / retype /
merge one, delete one (its memories stay), forget one (every memory naming it, undoable like
a conversational forget). Each is a call to the user's shard, in the caller's view: an agent
key sees the entities of what its agent sees, and its edits stay in its own lane."""

from __future__ import annotations

import re
from typing import Any

from serve_app.clients import resolve
from serve_app.guards import api_router
from serve_app.routes.deps import AgentParam, Caller, Shards, UserScope
from strata.entities.models import EntityType
from strata.entities.view import EntityDetail, EntityList, EntityPatch
from strata.errors import InvalidInput
from strata.shard.models import ForgetView

__all__ = ["router"]

router = api_router()

ENTITY_ID = re.compile(r"^[0-9a-f]{16}$")
MAX_LIMIT = 1000


def _checked(entity_id: str) -> str:
    if not ENTITY_ID.match(entity_id):
        raise InvalidInput("entity_id is the 16 hex characters GET "
                           "/v1/users/{user_id}/entities gives each entity as id")
    return entity_id


@router.get("/v1/users/{user_id}/entities", response_model=EntityList)
async def list_entities(principal: Caller, scope: UserScope, agent: AgentParam,
                        shards: Shards, type: EntityType | None = None,
                        q: str | None = None, limit: int = 200) -> EntityList:
    """The entities the user's memories name (those the calling agent may see), most
    mentioned first, with their links; ``type``, ``q`` (in a name or alias): only those."""
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}")
    if q is not None and len(q) > 200:
        raise InvalidInput("q is at most 200 characters")
    listed: EntityList = await resolve(shards.for_scope(scope).list_entities.remote(
        scope, principal.viewer(agent), type.value if type else None, q, limit))
    return listed


@router.get("/v1/users/{user_id}/entities/{entity_id}", response_model=EntityDetail)
async def get_entity(entity_id: str, principal: Caller, scope: UserScope, agent: AgentParam,
                     shards: Shards) -> EntityDetail:
    """One entity: its links, what it contains, and every memory naming it (or what it
    contains) across sessions, newest first."""
    detail: EntityDetail = await resolve(shards.for_scope(scope).entity.remote(
        scope, _checked(entity_id), principal.viewer(agent)))
    return detail


@router.patch("/v1/users/{user_id}/entities/{entity_id}", response_model=EntityDetail)
async def edit_entity(entity_id: str, body: EntityPatch, principal: Caller, scope: UserScope,
                      agent: AgentParam, shards: Shards) -> EntityDetail:
    """Rename, retype, or merge into another entity (``merge_into``: its id); kept for the
    user in the caller's lane. Answers the entity as it now is (after a merge: the one it
    joined)."""
    detail: EntityDetail = await resolve(shards.for_scope(scope).edit_entity.remote(
        scope, _checked(entity_id), body, principal.viewer(agent)))
    return detail


@router.delete("/v1/users/{user_id}/entities/{entity_id}")
async def delete_entity(entity_id: str, principal: Caller, scope: UserScope,
                        agent: AgentParam, shards: Shards) -> dict[str, Any]:
    """The entity leaves the view; the memories naming it stay (to forget them too:
    ``POST …/entities/{entity_id}/forget``)."""
    result: dict[str, Any] = await resolve(shards.for_scope(scope).delete_entity.remote(
        scope, _checked(entity_id), principal.viewer(agent)))
    return result


@router.post("/v1/users/{user_id}/entities/{entity_id}/forget", response_model=ForgetView)
async def forget_entity(entity_id: str, principal: Caller, scope: UserScope,
                        agent: AgentParam, shards: Shards) -> ForgetView:
    """Forget every memory the caller sees that names the entity: hidden at once, listed by
    ``GET …/forgets``, undoable with ``POST …/forgets/{forget_id}/undo`` for the grace
    period, then deleted with their source turns."""
    view: ForgetView = await resolve(shards.for_scope(scope).forget_entity.remote(
        scope, _checked(entity_id), principal.viewer(agent), principal.role == "admin"))
    return view
