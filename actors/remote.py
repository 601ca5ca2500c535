"""Ray's actor API where its type stubs fall short, typed once here.

- ``actor_class(cls, **options)`` is ``ray.remote(**options)(cls)``: the stubs' overloads of
  ``ray.remote`` know the task options only, so an actor option (``max_concurrency``) matches
  none of them.
- ``named_actor(name, namespace)`` is ``ray.get_actor``, as ``Any`` like Strata's other
  handles: Ray types a looked-up handle's methods as ``Never`` (it cannot know the class),
  which makes mypy skip every line after a call through it as unreachable.
- ``alive_nodes()`` is ``ray.nodes()`` (untyped) without the dead ones.
"""

from __future__ import annotations

from typing import Any, TypedDict, TypeVar, Unpack

import ray
from ray.actor import ActorClass

__all__ = ["ActorOptions", "actor_class", "alive_nodes", "named_actor"]

T = TypeVar("T")


class ActorOptions(TypedDict, total=False):
    """The ``ray.remote`` options Strata's actor classes set."""

    num_cpus: float
    max_restarts: int
    max_task_retries: int
    max_concurrency: int


def actor_class(cls: type[T], **options: Unpack[ActorOptions]) -> ActorClass[T]:
    """``cls`` as a Ray actor class with ``options`` (what ``@ray.remote(...)`` does)."""
    given: dict[str, Any] = {**options}
    return ray.remote(**given)(cls)


def named_actor(name: str, namespace: str | None) -> Any:
    """The named actor's handle; ``ValueError`` when none runs under that name."""
    return ray.get_actor(name, namespace=namespace)


def alive_nodes() -> list[dict[str, Any]]:
    """The cluster's live nodes as ``ray.nodes()`` describes them (``NodeID``, ``Resources``)."""
    nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]  # untyped in Ray
    return [node for node in nodes if node.get("Alive")]
