"""Export and import of memories as JSON Lines (``strata.portability``):
``/v1/users/{user_id}/export``, ``/v1/export`` (admin), ``/v1/users/{user_id}/import``."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from serve_app import guards
from serve_app.clients import resolve
from serve_app.guards import api_router
from serve_app.inspector import tenant_users
from serve_app.routes.deps import Caller, Export, Redis, Shards, UserScope
from strata.portability import MEDIA_TYPE, ImportCounts, parse_export

__all__ = ["ImportSummary", "JsonLines", "router"]

router = api_router()


class JsonLines(StreamingResponse):
    """An export: JSON Lines, streamed (so the OpenAPI document names the media type)."""

    media_type = MEDIA_TYPE


class ImportSummary(BaseModel):
    """What importing an export into a user did (``ImportCounts``, with the file's lines
    and the model its vectors were made with)."""

    user_id: str
    lines: int
    created: int
    updated: int
    unchanged: int
    embed_model_of_file: str
    entity_edit_lanes: int = 0


def _export_body() -> dict[str, Any]:
    """The import's request body in the OpenAPI document: the route reads the raw body
    whatever its Content-Type; text/plain is listed as well for clients and generators that
    know no serializer for JSON Lines."""
    return {"requestBody": {"required": True, "description": "an export (JSON Lines)",
                            "content": {MEDIA_TYPE: {"schema": {"type": "string"}},
                                        "text/plain": {"schema": {"type": "string"}}}}}


# A user's (or, for an admin, a tenant's) memories out and back in. An export is read user
# by user, each by the user's shard (``UserExport``), and streamed as it is read.
@router.get("/v1/users/{user_id}/export", response_class=JsonLines)
async def export_user(principal: Caller, scope: UserScope, export: Export) -> JsonLines:
    """The user's memories (every kind and status) as JSON Lines — those the calling
    agent may see."""
    return JsonLines(await export.lines(scope.tenant, [scope.user], principal.viewer()))


@router.get("/v1/export", response_class=JsonLines)
async def export_tenant(principal: Caller, export: Export, redis: Redis) -> JsonLines:
    """(admin) Every user of the key's tenant that has long-term memory."""
    principal.require_admin()
    registry = await asyncio.to_thread(redis.users.all)
    return JsonLines(await export.lines(principal.tenant,
                                        tenant_users(registry, principal.tenant)))


@router.post("/v1/users/{user_id}/import", openapi_extra=_export_body(),
             response_model=ImportSummary)
async def import_user(user_id: str, request: Request, principal: Caller, scope: UserScope,
                      shards: Shards) -> ImportSummary:
    """An export's lines (one user's) into this user, ids kept; checked whole first. Its
    entity view edits are restored (an agent key's into its own lane)."""
    parsed = parse_export(await request.body(), parse=guards.parse_json)
    parsed.require_may_write(principal)
    items = parsed.in_lane_of(principal)
    shard = shards.for_scope(scope)
    counts: ImportCounts = await resolve(shard.import_memories.remote(
        scope, items, principal.role == "admin", principal.viewer()))
    lanes = parsed.edits_of_one_user()  # the user's entity view edits, after the memories
    written = await resolve(shard.import_entity_edits.remote(
        scope, lanes, principal.viewer())) if lanes else 0
    return ImportSummary(user_id=user_id, lines=len(items), **counts.model_dump(),
                         embed_model_of_file=parsed.header.embed_model,
                         entity_edit_lanes=written)
