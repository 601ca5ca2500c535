"""A trace carried across an actor call (``strata.tracing``), in two halves:

- the callee's method is ``continues_trace(method)``: it takes one more keyword argument,
  ``trace`` (a W3C carrier), and runs inside a span that continues the caller's trace,
  named ``<component>.<method>`` and carrying the call's ``Scope`` (its first argument);
- the caller's handle is ``carrying(handle, methods)``: a call of one of ``methods`` adds
  ``trace=carrier()``. With tracing off the handle is returned as it is, and nothing is
  added to any call.

The routes keep calling ``handle.method.remote(...)`` as before; only the directory that
hands the handle out and the actor class that defines the method know about tracing.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Collection
from typing import Any, ParamSpec, TypeVar

from strata import tracing
from strata.models import Scope

__all__ = ["carrying", "continues_trace", "traced_methods"]

P = ParamSpec("P")
R = TypeVar("R")
_TRACED = "__strata_continues_trace__"


def continues_trace(method: Callable[P, R], component: str = "shard") -> Callable[P, R]:
    """``method`` with a keyword-only ``trace`` carrier. Ray checks a call's arguments
    against the signature it reads (``__signature__``, which names the carrier) after
    ``inspect.unwrap``: so the wrapper keeps ``method``'s name and doc, not ``__wrapped__``."""
    name = f"{component}.{method.__name__}"

    @functools.wraps(method)
    def traced(*args: Any, trace: tracing.Carrier | None = None, **kwargs: Any) -> Any:
        scope = next((a for a in args[1:2] if isinstance(a, Scope)), None)
        with tracing.span(name, scope, parent=trace):
            return method(*args, **kwargs)

    signature = inspect.signature(method)
    params = list(signature.parameters.values())
    at = next((i for i, p in enumerate(params) if p.kind is p.VAR_KEYWORD), len(params))
    params.insert(at, inspect.Parameter("trace", inspect.Parameter.KEYWORD_ONLY, default=None))
    traced.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    del traced.__wrapped__
    setattr(traced, _TRACED, True)
    return traced  # type: ignore[return-value]


def traced_methods(cls: type) -> frozenset[str]:
    """The names of ``cls``'s methods that take a ``trace`` carrier."""
    return frozenset(name for name in dir(cls) if getattr(getattr(cls, name), _TRACED, False))


def carrying(handle: Any, methods: Collection[str]) -> Any:
    """``handle``, adding the current trace to calls of ``methods`` (when tracing)."""
    return _Carrying(handle, methods) if tracing.enabled() else handle


class _Carrying:
    def __init__(self, handle: Any, methods: Collection[str]) -> None:
        self._handle = handle
        self._methods = methods

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._handle, name)
        return _CarryingMethod(method) if name in self._methods else method


class _CarryingMethod:
    def __init__(self, method: Any) -> None:
        self._method = method

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        trace = tracing.carrier()
        return self._method.remote(*args, **({"trace": trace} if trace else {}), **kwargs)
