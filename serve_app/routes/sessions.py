"""Working memory over HTTP: ``/v1/sessions/{session_id}/…`` — each call is one call to
the user's session shard — and ``/v1/jobs/{job_id}``, the status of the extraction a close
queued (read from Redis, where the queue keeps it)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from serve_app.clients import resolve
from serve_app.guards import api_router
from serve_app.routes.deps import AgentParam, Caller, Redis, Shards
from strata.auth import scope_for
from strata.errors import InvalidInput, NotFound
from strata.models import AgentName
from strata.shard.models import CloseAck, TurnAck, TurnIn, WorkingMemoryView
from strata.stores.redis_ports import JobRecord

__all__ = ["TaskStateRequest", "TurnBatchRequest", "TurnBatchResponse",
           "TurnRequest", "UserRequest", "router"]

router = api_router()
JOB_ID = re.compile(r"\d{1,20}-\d{1,20}")


class TurnRequest(TurnIn):
    user_id: str


class TurnBatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str
    turns: list[TurnIn] = Field(min_length=1, description="in order; one session's turns")


class TurnBatchResponse(BaseModel):
    session_id: str
    acks: list[TurnAck]


class UserRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str
    agent: AgentName | None = Field(default=None, description=(
        "the calling agent (a key bound to an agent sets it): a session of an agent is "
        "that agent's"))


class TaskStateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str
    patch: dict[str, Any]
    agent: AgentName | None = Field(default=None, description=(
        "the calling agent (a key bound to an agent sets it): a session of an agent is "
        "that agent's"))


class TaskState(BaseModel):
    session_id: str
    task_state: dict[str, Any]


# Turns in, the window out, close; the user is named in the body (or the query).
@router.post("/v1/sessions/{session_id}/turns", response_model=TurnAck)
async def append_turn(session_id: str, body: TurnRequest, principal: Caller,
                      shards: Shards) -> TurnAck:
    scope = scope_for(principal, body.user_id)
    ack: TurnAck = await resolve(shards.for_scope(scope).append_turn.remote(
        scope, session_id, body.role, body.content, body.created_at, body.metadata,
        body.turn_id, body.context, principal.agent_for(body.agent),
        principal.viewer(body.agent)))
    return ack


@router.post("/v1/sessions/{session_id}/turns/batch", response_model=TurnBatchResponse)
async def append_turns(session_id: str, body: TurnBatchRequest,
                       principal: Caller, shards: Shards) -> TurnBatchResponse:
    """Many turns of one session in order, acknowledged once all are durable."""
    scope = scope_for(principal, body.user_id)
    named = {t.agent for t in body.turns if t.agent}
    if len(named) > 1:
        raise InvalidInput(f"a batch is one agent's turns; it names {sorted(named)}")
    agent = principal.agent_for(next(iter(named), None))
    turns = [t.model_copy(update={"agent": agent}) for t in body.turns]
    acks = await resolve(shards.for_scope(scope).append_turns.remote(
        scope, session_id, turns, principal.viewer(agent)))
    return TurnBatchResponse(session_id=session_id, acks=acks)


@router.post("/v1/sessions/{session_id}/close", response_model=CloseAck)
async def close_session(session_id: str, body: UserRequest,
                        principal: Caller, shards: Shards) -> CloseAck:
    scope = scope_for(principal, body.user_id)
    ack: CloseAck = await resolve(shards.for_scope(scope).close.remote(
        scope, session_id, principal.viewer(body.agent)))
    return ack


@router.get("/v1/sessions/{session_id}/working-memory", response_model=WorkingMemoryView)
async def working_memory(session_id: str, user_id: str, principal: Caller,
                         agent: AgentParam, shards: Shards) -> WorkingMemoryView:
    """The session's working memory; a session of an agent is that agent's (or an
    admin's) to read."""
    scope = scope_for(principal, user_id)
    view: WorkingMemoryView = await resolve(shards.for_scope(scope).view.remote(
        scope, session_id, principal.viewer(agent)))
    return view


@router.patch("/v1/sessions/{session_id}/task-state", response_model=TaskState)
async def task_state(session_id: str, body: TaskStateRequest,
                     principal: Caller, shards: Shards) -> TaskState:
    scope = scope_for(principal, body.user_id)
    state = await resolve(shards.for_scope(scope).patch_task_state.remote(
        scope, session_id, body.patch, principal.viewer(body.agent)))
    return TaskState(session_id=session_id, task_state=state)


@router.get("/v1/jobs/{job_id}", response_model=JobRecord)
async def job(job_id: str, principal: Caller, redis: Redis, user_id: str | None = None
              ) -> JobRecord:
    """A queued job's status (``queued``, ``running``, ``done`` with what it wrote, or
    ``failed``), as ``close`` named it in ``extraction_job``; kept 7 days. Another
    tenant's job is not found, as an unknown one is; so is another user's when
    ``user_id`` is given (an MCP server bound to one user gives it)."""
    if not JOB_ID.fullmatch(job_id):
        raise InvalidInput(f"not a job id: {job_id[:40]!r} (expected <ms>-<seq>)")
    scope = scope_for(principal, user_id) if user_id is not None else None
    record = await asyncio.to_thread(redis.queues.job, job_id)
    if record is None or record.tenant != principal.tenant or (
            scope is not None and record.user_id != scope.user):
        raise NotFound(f"no job {job_id!r} (unknown, or expired after 7 days)")
    return record
