"""OpenTelemetry tracing of a turn and a recall, off by default (``STRATA_TRACING``).

Each process that serves a hop calls ``configure(settings, component)`` once at its entry
(the ingress replica, a session shard, an extraction consumer); until then, and with
``STRATA_TRACING=none``, every function here is a no-op that never imports OpenTelemetry.

    with span("shard.serve_recall", scope, parent=carrier) as s:   # one hop
        s.set(count=len(items))
    carrier()          # the current span as a W3C ``traceparent`` dict, for the next hop

Spans carry identifiers and counts only — the tenant, the user id, the session id, the
request id, a recipe name, layer names, a count — never content: no turn text, no query, no
memory. ``span`` and ``Span.set`` refuse any attribute outside ``ATTRIBUTES`` (a programming
error, raised whether tracing is on or not), and a failure is recorded by its exception's
type, not its message (a message may quote what the user sent).

The provider is this module's own (not OpenTelemetry's global one): Strata's spans go where
its settings say, whatever else the process traces.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Literal, Protocol

from strata.models import Scope

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.trace import Span as OtelSpan
    from opentelemetry.trace import Tracer

__all__ = ["ATTRIBUTES", "Carrier", "Span", "TracingOptions", "annotate", "carrier",
           "configure", "enabled", "reset", "span", "use_processor"]

logger = logging.getLogger(__name__)

Carrier = dict[str, str]
"""A W3C trace context (``traceparent``, maybe ``tracestate``): empty when not tracing."""

# what a span may carry, as OpenTelemetry names it: identifiers and counts, never content
ATTRIBUTES: Mapping[str, str] = {
    "tenant": "strata.tenant",
    "user_id": "strata.user_id",
    "session_id": "strata.session_id",
    "request_id": "strata.request_id",
    "recipe": "strata.recipe",
    "layers": "strata.layers",
    "count": "strata.count",
    "degraded": "strata.degraded",
    "http_method": "http.request.method",
    "http_route": "http.route",
    "http_status": "http.response.status_code",
}
AttributeValue = str | int | float | bool | Sequence[str]


class TracingOptions(Protocol):
    """The settings tracing reads (``strata.settings.Settings`` has them: STRATA_TRACING…)."""

    @property
    def tracing(self) -> Literal["none", "console", "otlp"]: ...
    @property
    def tracing_endpoint(self) -> str: ...
    @property
    def tracing_console_path(self) -> str: ...
    @property
    def tracing_sample_ratio(self) -> float: ...


@dataclass
class _State:
    tracer: Tracer | None = None
    provider: TracerProvider | None = None


_state = _State()


def enabled() -> bool:
    """Whether this process records spans."""
    return _state.tracer is not None


def configure(settings: TracingOptions, component: str) -> None:
    """Trace this process as ``settings`` say (once; later calls change nothing).

    ``component`` names the process's part in the resource (``strata.component``):
    ingress, shard, extractor.
    """
    if settings.tracing == "none" or _state.tracer is not None:
        return
    try:
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError as exc:
        raise RuntimeError(f"STRATA_TRACING={settings.tracing} needs the tracing extra: "
                           "pip install 'strata-memory[tracing]'") from exc

    processor: SpanProcessor
    if settings.tracing == "console":  # synchronous: a developer's, or a test's, reading
        processor = SimpleSpanProcessor(_console_exporter(settings.tracing_console_path))
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        processor = BatchSpanProcessor(OTLPSpanExporter(endpoint=settings.tracing_endpoint))
    use_processor(processor, component, settings.tracing_sample_ratio)
    logger.info("tracing %s spans to %s", component, settings.tracing)


def _console_exporter(path: str) -> Any:
    """One JSON span per line, to ``path`` (appended: every process may share one file;
    a line is one write) or to stderr."""
    import sys

    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    out: IO[str] = open(path, "a", buffering=1) if path else sys.stderr  # noqa: SIM115
    return ConsoleSpanExporter(out=out, formatter=lambda s: s.to_json(indent=None) + "\n")


def use_processor(processor: SpanProcessor, component: str = "test",
                  sample_ratio: float = 1.0) -> None:
    """Trace this process into ``processor`` (``configure``'s end; tests pass an in-memory
    exporter's). Replaces what was configured before."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    reset()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "strata", "strata.component": component}),
        sampler=ParentBased(TraceIdRatioBased(sample_ratio)))
    provider.add_span_processor(processor)
    _state.provider, _state.tracer = provider, provider.get_tracer("strata")


def reset() -> None:
    """Stop tracing in this process (its spans flushed first)."""
    if _state.provider is not None:
        _state.provider.shutdown()
    _state.provider, _state.tracer = None, None


class Span:
    """The span a ``span`` block opened (a no-op one when not tracing)."""

    def __init__(self, otel: OtelSpan | None = None) -> None:
        self._otel = otel

    def set(self, **attributes: AttributeValue | None) -> None:
        """Add attributes (names from ``ATTRIBUTES``; a ``None`` value is left out)."""
        named = _named(attributes)
        if self._otel is not None and named:
            self._otel.set_attributes(named)

    def rename(self, name: str) -> None:
        if self._otel is not None:
            self._otel.update_name(name)


_NO_SPAN = Span()


@contextmanager
def span(name: str, scope: Scope | None = None, parent: Carrier | None = None,
         **attributes: AttributeValue | None) -> Iterator[Span]:
    """A span around the block, the current one inside it: a child of ``parent`` (a
    carrier from another process) when given, else of the current span. ``scope`` gives
    the tenant and user id; ``attributes`` are names of ``ATTRIBUTES``."""
    if scope is not None:
        attributes = {"tenant": scope.tenant, "user_id": scope.user, **attributes}
    named = _named(attributes)
    tracer = _state.tracer
    if tracer is None:
        yield _NO_SPAN
        return
    from opentelemetry.trace import Status, StatusCode

    context = _propagator().extract(parent) if parent else None
    with tracer.start_as_current_span(name, context=context, attributes=named,
                                      record_exception=False,
                                      set_status_on_exception=False) as otel:
        try:
            yield Span(otel)
        except BaseException as exc:  # by type only: a message may quote content
            otel.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            otel.set_attribute("error.type", type(exc).__name__)
            raise


def annotate(**attributes: AttributeValue | None) -> None:
    """Add attributes to the current span (the request's, in a FastAPI dependency)."""
    named = _named(attributes)
    if _state.tracer is None or not named:
        return
    from opentelemetry import trace

    trace.get_current_span().set_attributes(named)


def carrier() -> Carrier:
    """The current span's context as W3C headers, for a call to another process; ``{}``
    when not tracing."""
    if _state.tracer is None:
        return {}
    out: Carrier = {}
    _propagator().inject(out)
    return out


def _propagator() -> Any:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator()


def _named(attributes: Mapping[str, AttributeValue | None]) -> dict[str, AttributeValue]:
    unknown = set(attributes) - set(ATTRIBUTES)
    if unknown:
        raise ValueError(f"not a tracing attribute: {sorted(unknown)} (spans carry "
                         f"identifiers and counts only: {sorted(ATTRIBUTES)})")
    return {ATTRIBUTES[k]: (list(v) if isinstance(v, list | tuple) else v)
            for k, v in attributes.items() if v is not None}
