"""A user's long-term memories over HTTP: ``/v1/users/{user_id}/…`` — create, list, edit,
forget; corrections of knowledge; proactive follow-ups; erasing a user. Each is a call to
the user's shard, in the scope the key's tenant and the path's user make."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from actors.directory import ShardDirectory
from serve_app.clients import resolve
from serve_app.guards import api_router
from serve_app.routes.deps import (
    AgentParam,
    Caller,
    Export,
    Knowledge,
    ReplicaSettings,
    Shards,
    UserScope,
)
from strata.auth import Principal
from strata.errors import Conflict, InvalidInput, NotFound
from strata.layers.corrections import CorrectionIn, correction_create
from strata.layers.forgetting import FORGET_BOUND_S, data_files, wait_forgotten
from strata.layers.memory_models import MemoryCreate, MemoryPatch
from strata.layers.proactive import FollowUp, FollowUpFeedback, FollowUpRequest
from strata.models import (
    MemoryItem,
    MemoryKind,
    MemoryStatus,
    Scope,
    check_name,
    context_name,
)
from strata.shard.models import ForgetView

__all__ = ["ErasureRequest", "FollowUps", "ForgetList", "MemoryList", "MemoryUpdated",
           "MemoryVersions", "router"]

router = api_router()


class ErasureRequest(BaseModel):
    """Forget a memory (``memory_id``) or everything about the user, then check that
    ``phrase`` — which must be in what is forgotten — is gone from the server's files."""

    model_config = ConfigDict(extra="forbid")
    phrase: str = Field(min_length=4, max_length=1000)
    memory_id: str | None = None
    bound_s: float = Field(default=FORGET_BOUND_S, gt=0, le=120)


class MemoryList(BaseModel):
    memories: list[MemoryItem]


class MemoryVersions(BaseModel):
    versions: list[MemoryItem]


class MemoryUpdated(BaseModel):
    memory: MemoryItem


class FollowUps(BaseModel):
    follow_ups: list[FollowUp]


class ForgetList(BaseModel):
    forgets: list[ForgetView]


FORGET_ID = re.compile(r"^[0-9a-f]{20}$")


async def _changeable(shards: ShardDirectory, principal: Principal, scope: Scope,
                      memory_id: str, agent: str | None) -> str | None:
    """The view a change to a memory acts in, once the key may change it: an agent key
    may not touch what only an admin writes (procedures, source admin), in any version
    of a fact, nor what its agent does not see."""
    viewer = principal.viewer(agent)
    if principal.role != "admin" or viewer is not None:
        for item in await resolve(shards.for_scope(scope).memory_history.remote(
                scope, memory_id, viewer)):
            principal.require_may_write(item.kind, item.source)
    return viewer


@router.post("/v1/users/{user_id}/memories")
async def create_memory(body: MemoryCreate, principal: Caller, scope: UserScope,
                        shards: Shards) -> dict[str, Any]:
    principal.require_may_write(body.kind, body.source)
    body = body.model_copy(update={"agent": principal.agent_for(body.agent)})
    result: dict[str, Any] = await resolve(
        shards.for_scope(scope).create_memory.remote(scope, body))
    return result


@router.post("/v1/users/{user_id}/knowledge/corrections")
async def correct_knowledge(body: CorrectionIn, scope: UserScope, shards: Shards,
                            knowledge: Knowledge) -> dict[str, Any]:
    """The user's correction of a knowledge chunk, kept as that user's memory and shown
    under the chunk in that user's later recalls (the knowledge base is not changed)."""
    chunk = await knowledge.chunk(scope.tenant, body.chunk_id)
    if chunk is None or chunk.status != "active":
        raise NotFound(f"no current knowledge chunk {body.chunk_id!r} in this tenant's "
                       "knowledge base (ids come from a recall's knowledge items)")
    result: dict[str, Any] = await resolve(shards.for_scope(scope).create_memory
                                           .remote(scope, correction_create(chunk, body.text)))
    return result


@router.post("/v1/users/{user_id}/follow-ups", response_model=FollowUps)
async def follow_ups(body: FollowUpRequest, principal: Caller, scope: UserScope,
                     shards: Shards) -> FollowUps:
    """Proactive recall: at most ``limit`` of the user's open threads to bring up now
    (``strata.layers.proactive``), rationed per topic and per session."""
    chosen = await resolve(shards.for_scope(scope).follow_ups.remote(
        scope, body.session_id, body.limit, principal.viewer()))
    return FollowUps(follow_ups=chosen)


@router.post("/v1/users/{user_id}/follow-ups/{topic}/feedback")
async def follow_up_feedback(topic: str, body: FollowUpFeedback, scope: UserScope,
                             shards: Shards) -> dict[str, Any]:
    """The agent's report on a proposed follow-up: ``used`` or ``dismissed``."""
    try:
        check_name("topic", topic)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    result: dict[str, Any] = await resolve(shards.for_scope(scope)
                                           .follow_up_feedback.remote(scope, topic,
                                                                      body.outcome))
    return result


@router.get("/v1/users/{user_id}/memories", response_model=MemoryList)
async def list_memories(principal: Caller, scope: UserScope, agent: AgentParam,
                        shards: Shards, kind: MemoryKind | None = None, status: str | None = None,
                        q: str | None = None, limit: int = 100,
                        context: str | None = None) -> MemoryList:
    """The user's memories that the calling agent may see (an admin key naming no agent:
    all of them), newest first; ``context``: only that project's / business line's."""
    if not 1 <= limit <= 1000:
        raise InvalidInput("limit must be between 1 and 1000")
    if status is not None and status not in {s.value for s in MemoryStatus}:
        raise InvalidInput(f"unknown status {status!r}; one of "
                           f"{sorted(s.value for s in MemoryStatus)}")
    try:
        context = context_name(context)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    items = await resolve(shards.for_scope(scope).list_memories.remote(
        scope, kind, status, q, limit, principal.viewer(agent), context))
    return MemoryList(memories=items)


@router.get("/v1/users/{user_id}/memories/{memory_id}/history",
            response_model=MemoryVersions)
async def memory_history(memory_id: str, principal: Caller, scope: UserScope,
                         agent: AgentParam, shards: Shards) -> MemoryVersions:
    items = await resolve(shards.for_scope(scope).memory_history.remote(
        scope, memory_id, principal.viewer(agent)))
    return MemoryVersions(versions=items)


@router.patch("/v1/users/{user_id}/memories/{memory_id}", response_model=MemoryUpdated)
async def update_memory(memory_id: str, body: MemoryPatch, principal: Caller,
                        scope: UserScope, agent: AgentParam, shards: Shards) -> MemoryUpdated:
    """Edit a memory the calling agent sees; its context, and — for its own agent or an
    admin — its visibility."""
    viewer = await _changeable(shards, principal, scope, memory_id, agent)
    item = await resolve(shards.for_scope(scope).update_memory.remote(
        scope, memory_id, body, viewer))
    return MemoryUpdated(memory=item)


@router.delete("/v1/users/{user_id}/memories/{memory_id}")
async def delete_memory(memory_id: str, principal: Caller, scope: UserScope,
                        agent: AgentParam, shards: Shards) -> dict[str, Any]:
    viewer = await _changeable(shards, principal, scope, memory_id, agent)
    result: dict[str, Any] = await resolve(
        shards.for_scope(scope).delete_memory.remote(scope, memory_id, viewer))
    return {"deleted": memory_id, **result}


@router.get("/v1/users/{user_id}/forgets", response_model=ForgetList)
async def list_forgets(principal: Caller, scope: UserScope, agent: AgentParam,
                       shards: Shards) -> ForgetList:
    """The user's "forget …" requests said in conversation, newest first: what each named,
    how many memories it hid, and until when it can be undone (``undo_until``; then the
    memories are deleted and it is ``final``). An agent's view: those said to it."""
    views = await resolve(shards.for_scope(scope).list_forgets.remote(
        scope, principal.viewer(agent)))
    return ForgetList(forgets=views)


@router.post("/v1/users/{user_id}/forgets/{forget_id}/undo", response_model=ForgetView)
async def undo_forget(forget_id: str, principal: Caller, scope: UserScope,
                      agent: AgentParam, shards: Shards) -> ForgetView:
    """Undo a conversational forget within its grace period: what it hid is recalled
    again (``restored``: how many memories came back). 409 once it is final."""
    if not FORGET_ID.match(forget_id):
        raise InvalidInput("forget_id is the 20 hex characters a turn's "
                           "intents.forgets or GET /v1/users/{user_id}/forgets gives")
    view: ForgetView = await resolve(shards.for_scope(scope).undo_forget.remote(
        scope, forget_id, principal.viewer(agent)))
    return view


@router.delete("/v1/users/{user_id}")
async def delete_user(user_id: str, principal: Caller, scope: UserScope,
                      shards: Shards) -> dict[str, Any]:
    principal.require_admin()  # it erases procedures and source-admin memories too
    result: dict[str, Any] = await resolve(
        shards.for_scope(scope).delete_user.remote(scope))
    return {"deleted_user": user_id, **result}


@router.post("/v1/users/{user_id}/erasure")
async def erase_verified(body: ErasureRequest, principal: Caller, scope: UserScope,
                         agent: AgentParam, settings: ReplicaSettings, shards: Shards,
                         export: Export) -> dict[str, Any]:
    """Delete, then verify on the server's own files (the embedded Redis's AOF and
    milvus-lite under the data dir) that ``phrase`` is in none of them, polling up to
    ``bound_s``. Refused before anything is deleted when the server has no such files
    (a Redis or Milvus server: 409, nothing could be verified) or when ``phrase`` is
    not in what would be forgotten (422: the check is not a probe of other data)."""
    roots = ("redis", "milvus.db")
    data_dir = settings.data_dir
    if not await asyncio.to_thread(data_files, data_dir, roots):
        raise Conflict("nothing to verify: this server keeps no Redis AOF or milvus-lite "
                       "files in its data dir (a Redis or Milvus server holds them); "
                       "nothing was deleted")
    if body.memory_id is None:
        principal.require_admin()
        items = await export.memories(scope)  # every memory of the user, read by its shard
    else:
        viewer = await _changeable(shards, principal, scope, body.memory_id, agent)
        items = await resolve(shards.for_scope(scope).memory_history.remote(
            scope, body.memory_id, viewer))
    if not any(body.phrase in f"{i.text}\n{i.value or ''}" for i in items):
        raise InvalidInput("the phrase is not in what would be forgotten (the memory's "
                           "or the user's texts); nothing was deleted")
    shard = shards.for_scope(scope)
    if body.memory_id is None:
        deleted: dict[str, Any] = {"deleted_user": scope.user, **await resolve(
            shard.delete_user.remote(scope))}
    else:
        deleted = {"deleted": body.memory_id, **await resolve(shard.delete_memory.remote(
            scope, body.memory_id, principal.viewer(agent)))}
    check = await asyncio.to_thread(wait_forgotten, data_dir, body.phrase, body.bound_s,
                                    0.5, roots)
    return {**deleted, "verify": {**check.model_dump(exclude={"phrase_bytes"}),
                                  "forgotten": check.forgotten}}
