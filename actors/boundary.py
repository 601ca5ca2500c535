"""The one place Ray's failures become Strata's errors (like httpx's ``map_exceptions``).

Around any call into an actor or a Serve deployment (awaited or ``.result()``):

- a ``StrataError`` raised on the other side comes out as itself;
- the other side being gone or unreachable — a dead or restarting actor, a deployment with
  no replica to take the call, a replica's queue full — comes out as the caller's
  ``unavailable(exc)``, a ``BackendUnavailable`` it chose (503, or a degraded answer);
- anything else (a bug on either side) passes unchanged, and the API answers it as 500.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ray.exceptions import RayActorError, RayTaskError
from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError

from strata.errors import StrataError

__all__ = ["UNREACHABLE", "strata_errors"]

# the failures that say "the other side cannot answer now", not "it answered with an error"
UNREACHABLE: tuple[type[Exception], ...] = (RayActorError, DeploymentUnavailableError,
                                            BackPressureError)


@contextmanager
def strata_errors(unavailable: Callable[[Exception], StrataError]) -> Iterator[None]:
    """Map what a call into Ray raised: a Strata error inside comes out as itself, an
    unreachable callee as ``unavailable(exc)``; any other failure passes unchanged."""
    try:
        yield
    except RayTaskError as exc:
        if isinstance(exc.cause, StrataError):
            raise exc.cause from None
        raise
    except UNREACHABLE as exc:
        raise unavailable(exc) from exc
