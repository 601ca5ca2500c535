"""Export and import of memories as JSON Lines (``strata.portability``):
``/v1/users/{user_id}/export``, ``/v1/export`` (admin), ``/v1/users/{user_id}/import``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from fastapi import Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from serve_app import guards
from serve_app.guards import api_router
from serve_app.inspector import tenant_users
from serve_app.routes.base import IngressState, resolve
from serve_app.routes.deps import Caller, UserScope
from strata.layers.transfer import read_scope
from strata.models import MemoryItem, Scope, utcnow
from strata.portability import (
    MEDIA_TYPE,
    ExportHeader,
    ImportCounts,
    header_line,
    memory_lines,
    parse_export,
)
from strata.stores.ports import VectorStore

__all__ = ["ImportSummary", "JsonLines", "PortabilityRoutes", "read_user", "router"]

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


# the route reads the raw body whatever its Content-Type; text/plain is listed as well for
# clients and generators that know no serializer for JSON Lines
_EXPORT_BODY = {"requestBody": {"required": True, "description": "an export (JSON Lines)",
                                "content": {MEDIA_TYPE: {"schema": {"type": "string"}},
                                            "text/plain": {"schema": {"type": "string"}}}}}


def read_user(vectors: VectorStore, tenant: str, user: str,
               viewer: str | None = None) -> list[MemoryItem]:
    """A user's memories, those ``viewer`` may see (``Principal.viewer``; None: all)."""
    return [item for item in read_scope(vectors, Scope(tenant=tenant, user=user))
            if item.visible_to(viewer)]


class PortabilityRoutes(IngressState):
    """A user's (or, for an admin, a tenant's) memories out and back in."""

    async def _export(self, tenant: str, users: list[str],
                      viewer: str | None = None) -> JsonLines:
        """The users' memories as JSON Lines, read from the durable store once each shard has
        written its pending reinforcements (access counts)."""
        info = await self._embedder_info()
        vectors = await self._vector_store()
        shards = {self._shards.ring.shard_for(Scope(tenant=tenant, user=u)) for u in users}
        await asyncio.gather(*(resolve(self._shards.at(i).persist_hot.remote())
                               for i in sorted(shards)))
        header = ExportHeader(embed_model=str(info["model_id"]), exported_at=utcnow(),
                              tenant=tenant, users=users)
        first = (await asyncio.to_thread(read_user, vectors, tenant, users[0], viewer)
                 if users else [])

        async def lines() -> AsyncIterator[str]:
            yield header_line(header)
            for n, user in enumerate(users):  # one user in memory at a time
                items = first if n == 0 else await asyncio.to_thread(
                    read_user, vectors, tenant, user, viewer)
                yield "".join(memory_lines(user, items))

        return JsonLines(lines())

    @router.get("/v1/users/{user_id}/export", response_class=JsonLines)
    async def export_user(self, principal: Caller, scope: UserScope) -> JsonLines:
        """The user's memories (every kind and status) as JSON Lines — those the calling
        agent may see."""
        return await self._export(scope.tenant, [scope.user], principal.viewer())

    @router.get("/v1/export", response_class=JsonLines)
    async def export_tenant(self, principal: Caller) -> JsonLines:
        """(admin) Every user of the key's tenant that has long-term memory."""
        principal.require_admin()
        registry = await asyncio.to_thread(self._redis.users.all)
        return await self._export(principal.tenant, tenant_users(registry, principal.tenant))

    @router.post("/v1/users/{user_id}/import", openapi_extra=_EXPORT_BODY,
                 response_model=ImportSummary)
    async def import_user(self, user_id: str, request: Request, principal: Caller,
                          scope: UserScope) -> ImportSummary:
        """An export's lines (one user's) into this user, ids kept; checked whole first."""
        parsed = parse_export(await request.body(), parse=guards.parse_json)
        parsed.require_may_write(principal)
        items = parsed.in_lane_of(principal)
        counts: ImportCounts = await resolve(self._shards.for_scope(scope).import_memories
                                             .remote(scope, items, principal.role == "admin",
                                                     principal.viewer()))
        return ImportSummary(user_id=user_id, lines=len(items), **counts.model_dump(),
                             embed_model_of_file=parsed.header.embed_model)
