"""The one place Ray's failures become Strata's errors (like httpx's ``map_exceptions``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ray.exceptions import RayActorError, RayTaskError

from strata.errors import StrataError

__all__ = ["strata_errors"]


@contextmanager
def strata_errors(unavailable: Callable[[RayActorError], StrataError]) -> Iterator[None]:
    """Around a call into an actor: a Strata error raised inside comes out as itself, a
    dead or restarting actor as ``unavailable(exc)``; any other failure passes unchanged."""
    try:
        yield
    except RayTaskError as exc:
        if isinstance(exc.cause, StrataError):
            raise exc.cause from None
        raise
    except RayActorError as exc:
        raise unavailable(exc) from exc
