"""The memory inspector: the ``/ui/`` static page and the read endpoints it needs.

Every endpoint here is scoped by the API key's tenant exactly like the rest of the API: none
takes a tenant parameter, and what comes back is filtered to the key's tenant before it
leaves. The page itself is plain HTML, CSS and JavaScript shipped in ``serve_app/ui/`` (no
CDN, no build step), so it works offline.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from types import MappingProxyType
from typing import Any

from fastapi import APIRouter
from fastapi.responses import FileResponse, RedirectResponse

from serve_app.routes.deps import Caller, Knowledge, Redis, Vectors
from strata.errors import InvalidInput, NotFound
from strata.layers.transfer import holds_visible
from strata.models import Scope
from strata.stores.keys import QUEUE_HIGH, QUEUE_LOW
from strata.stores.ports import VectorStore
from strata.stores.redis_ports import WriteQueues

__all__ = ["UI_DIR", "queue_report", "router", "tenant_users"]

UI_DIR = Path(__file__).parent / "ui"
# the only files /ui/ serves; anything else is a 404 (no directory listing, no traversal)
UI_FILES = MappingProxyType({"index.html": "text/html; charset=utf-8",
                             "app.js": "text/javascript; charset=utf-8",
                             "app.css": "text/css; charset=utf-8"})
# the page loads nothing but its own files and talks to nothing but this origin
UI_HEADERS = MappingProxyType({
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
                               "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
})
EXTRACTOR_GROUP = "extractors"

router = APIRouter()


def tenant_users(registry: list[Scope], tenant: str, q: str | None = None) -> list[str]:
    """The user ids of one tenant in the user registry, sorted."""
    users = [scope.user for scope in registry if scope.tenant == tenant]
    if q:
        users = [u for u in users if q.lower() in u.lower()]
    return sorted(users)


def _visible_users(vectors: VectorStore, tenant: str, users: list[str], viewer: str,
                   enough: int) -> list[str]:
    """The first ``enough`` of ``users`` that hold a memory ``viewer`` may see."""
    seen: list[str] = []
    for user in users:
        if holds_visible(vectors, Scope(tenant=tenant, user=user), viewer):
            seen.append(user)
            if len(seen) >= enough:
                break
    return seen


def queue_report(queues: WriteQueues, tenant: str, include_system: bool,
                 now_s: float | None = None) -> list[dict[str, Any]]:
    """Per long-term queue: this tenant's unacknowledged entries and extraction lag.

    An acknowledged entry is deleted, so whatever is still in a stream is the backlog. The
    system-wide depth (counts only, no tenant names) is added for admin keys.
    """
    now = time.time() if now_s is None else now_s
    report = []
    for queue in (QUEUE_HIGH, QUEUE_LOW):
        mine = [(rid, p) for rid, p in queues.entries(queue) if p.get("tenant") == tenant]
        oldest_ms = int(mine[0][0].split("-")[0]) if mine else None
        row: dict[str, Any] = {
            "queue": queue,
            "backlog": len(mine),
            "lag_s": round(max(0.0, now - oldest_ms / 1000), 3) if oldest_ms else 0.0,
            "by_user": dict(Counter(str(p.get("user_id")) for _, p in mine)),
            "by_type": dict(Counter(str(p.get("type")) for _, p in mine)),
        }
        if include_system:
            depth = queues.depth(queue, EXTRACTOR_GROUP)
            first = queues.oldest_ids(queue, 1)
            row["system"] = {
                "length": depth.length, "pending": depth.pending, "undelivered": depth.lag,
                "backlog": depth.backlog,
                "lag_s": round(max(0.0, now - int(first[0].split("-")[0]) / 1000), 3)
                if first else 0.0}
        report.append(row)
    return report


# -- the static page --------------------------------------------------------------------------
@router.get("/ui", include_in_schema=False)
async def ui_root() -> RedirectResponse:
    return RedirectResponse("/ui/", status_code=307)


@router.get("/ui/", include_in_schema=False)
async def ui_index() -> FileResponse:
    return _ui_file("index.html")


@router.get("/ui/{name}", include_in_schema=False)
async def ui_asset(name: str) -> FileResponse:
    return _ui_file(name)


def _ui_file(name: str) -> FileResponse:
    if name not in UI_FILES:
        raise NotFound(f"no such file in the inspector: {name!r}")
    return FileResponse(UI_DIR / name, media_type=UI_FILES[name], headers=UI_HEADERS)


# -- the JSON endpoints the page reads (tenant-scoped) ---------------------------------------
@router.get("/v1/whoami")
async def whoami(principal: Caller) -> dict[str, str | None]:
    """The tenant, role and agent of the presented key (the inspector's login check)."""
    return {"tenant": principal.tenant, "role": principal.role, "agent": principal.agent}


@router.get("/v1/users")
async def list_users(principal: Caller, redis: Redis, vectors: Vectors, q: str | None = None,
                     limit: int = 1000) -> dict[str, Any]:
    """The users of the key's tenant that have long-term memory the caller may see (an
    agent's key: a user who holds only another agent's private memories is not listed)."""
    if not 1 <= limit <= 10_000:
        raise InvalidInput("limit must be between 1 and 10000")
    if q is not None and len(q) > 128:
        raise InvalidInput("q must be at most 128 characters")
    registry = await asyncio.to_thread(redis.users.all)
    users = tenant_users(registry, principal.tenant, q)
    viewer = principal.viewer()
    if viewer is not None:
        store = await vectors.get()
        users = await asyncio.to_thread(_visible_users, store, principal.tenant, users,
                                        viewer, limit + 1)
    return {"users": users[:limit], "truncated": len(users) > limit}


@router.get("/v1/knowledge/documents")
async def list_documents(principal: Caller, knowledge: Knowledge) -> dict[str, Any]:
    """The key's tenant's documents, with their versions and chunk statuses."""
    docs = await knowledge.documents(principal.tenant)
    return {"documents": [d.model_dump(mode="json") for d in docs]}


@router.get("/v1/queues")
async def queues(principal: Caller, redis: Redis) -> dict[str, Any]:
    """Long-term write queues: this tenant's backlog and extraction lag."""
    report = await asyncio.to_thread(queue_report, redis.queues, principal.tenant,
                                     principal.role == "admin")
    return {"tenant": principal.tenant, "queues": report}
