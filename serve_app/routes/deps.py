"""The FastAPI dependencies every route takes what it needs from: who calls, in which scope,
and the one small service of the replica it uses.

``Caller`` is the principal of the request's API key (401 without a known key); ``UserScope``
the scope of the path's ``user_id`` for that caller — the tenant comes from the key, never
from the request; ``AgentParam`` the ``agent`` query parameter, checked. The services come
from the replica's one ``Replica`` container (``serve_app.replica``), built once when Serve
starts the replica: ``Shards``, ``Embedding``, ``Knowledge``, ``Export``, … A test hands a
route another service with ``app.dependency_overrides[<provider>]``.
"""

from __future__ import annotations

from typing import Annotated, Any, cast

from fastapi import Depends, Request
from ray import serve

from actors.directory import ShardDirectory
from serve_app.clients import EmbedderClient, VectorStores
from serve_app.knowledge_access import KnowledgeAccess
from serve_app.replica import Replica
from serve_app.services import MetricsPublisher, RecallAftermath, UserExport
from strata import tracing
from strata.auth import Principal, authenticate, scope_for
from strata.errors import InvalidInput
from strata.models import Scope, check_agent
from strata.settings import Settings
from strata.stores.redis import RedisStore

__all__ = [
    "Aftermath",
    "AgentParam",
    "Caller",
    "Embedding",
    "Export",
    "Knowledge",
    "Metrics",
    "Redis",
    "ReplicaSettings",
    "Shards",
    "UserScope",
    "Vectors",
    "caller",
    "principal_of",
    "replica",
]


def replica() -> Replica:
    """The clients of the replica serving this request (Serve's servable object is the
    ingress deployment's instance, which builds them once; the middleware reaches it
    here too)."""
    serving: Any = serve.get_replica_context().servable_object
    return cast(Replica, serving.replica)


ReplicaDep = Annotated[Replica, Depends(replica)]


def principal_of(request: Request, settings: Settings) -> Principal:
    """The caller of a request, by its API key (``Unauthorized`` without a known one)."""
    return authenticate(request.headers.get("authorization"), settings.api_keys)


def caller(request: Request, clients: ReplicaDep) -> Principal:
    """The principal of the request's API key (its tenant named on the request's span)."""
    principal = principal_of(request, clients.settings)
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


# -- the replica's services, one each -------------------------------------------------------
def settings(clients: ReplicaDep) -> Settings:
    return clients.settings


def shards(clients: ReplicaDep) -> ShardDirectory:
    return clients.shards


def redis(clients: ReplicaDep) -> RedisStore:
    return clients.redis


def embedding(clients: ReplicaDep) -> EmbedderClient:
    return clients.embedder


def vectors(clients: ReplicaDep) -> VectorStores:
    return clients.vectors


def knowledge(clients: ReplicaDep) -> KnowledgeAccess:
    return clients.knowledge


def aftermath(clients: ReplicaDep) -> RecallAftermath:
    return clients.aftermath


def export(clients: ReplicaDep) -> UserExport:
    return clients.export


def metrics_publisher(clients: ReplicaDep) -> MetricsPublisher:
    return clients.metrics


ReplicaSettings = Annotated[Settings, Depends(settings)]
Shards = Annotated[ShardDirectory, Depends(shards)]
Redis = Annotated[RedisStore, Depends(redis)]
Embedding = Annotated[EmbedderClient, Depends(embedding)]
Vectors = Annotated[VectorStores, Depends(vectors)]
Knowledge = Annotated[KnowledgeAccess, Depends(knowledge)]
Aftermath = Annotated[RecallAftermath, Depends(aftermath)]
Export = Annotated[UserExport, Depends(export)]
Metrics = Annotated[MetricsPublisher, Depends(metrics_publisher)]
