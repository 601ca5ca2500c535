"""strata.tracing and actors.traced: spans with the tenant and user, never content; a
carrier continues a trace across a call; off → nothing recorded, nothing added."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from actors.traced import carrying, continues_trace, traced_methods
from strata import tracing
from strata.errors import InvalidInput
from strata.models import RecallRequest, Scope
from strata.settings import Settings
from strata.shard.service import SessionShardService

SCOPE = Scope(tenant="acme", user="u-42")
SECRET = "my sister Alice lives in Lyon"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracing.use_processor(SimpleSpanProcessor(exporter))
    yield exporter
    tracing.reset()


def _values(span: ReadableSpan) -> list[str]:
    """Every text a span would export: name, attributes, status, events."""
    texts = [span.name, str(span.status.description or "")]
    texts += [f"{k}={v}" for k, v in (span.attributes or {}).items()]
    texts += [e.name + str(dict(e.attributes or {})) for e in span.events]
    return texts


def test_off_by_default_nothing_is_recorded_or_carried() -> None:
    tracing.configure(Settings(), "test")  # STRATA_TRACING=none
    assert not tracing.enabled()
    with tracing.span("x", SCOPE) as span:
        span.set(count=1)
        assert tracing.carrier() == {}
    handle = object()
    assert carrying(handle, {"m"}) is handle  # no wrapper, no argument added


def test_a_span_carries_tenant_and_user(spans: InMemorySpanExporter) -> None:
    with tracing.span("ingress.recall", SCOPE, recipe="default") as span:
        span.set(count=3, degraded=False, layers=["facts", "episodes"])
        with tracing.span("hot_index.search", SCOPE):
            pass
    inner, outer = spans.get_finished_spans()
    assert outer.attributes == {"strata.tenant": "acme", "strata.user_id": "u-42",
                                "strata.recipe": "default", "strata.count": 3,
                                "strata.degraded": False,
                                "strata.layers": ("facts", "episodes")}
    assert inner.parent is not None and inner.parent.span_id == outer.context.span_id
    assert inner.context.trace_id == outer.context.trace_id


def test_content_cannot_become_an_attribute(spans: InMemorySpanExporter) -> None:
    with pytest.raises(ValueError, match="not a tracing attribute"), \
            tracing.span("x", query=SECRET):
        pass
    with tracing.span("x") as span, pytest.raises(ValueError):
        span.set(content=SECRET)
    tracing.reset()  # refused when off too: a test without tracing still catches it
    with pytest.raises(ValueError), tracing.span("x", text=SECRET):
        pass


def test_a_failure_is_recorded_by_type_not_message(spans: InMemorySpanExporter) -> None:
    with pytest.raises(InvalidInput), tracing.span("shard.append_turn", SCOPE):
        raise InvalidInput(f"turn refused: {SECRET}")
    (span,) = spans.get_finished_spans()
    assert span.status.description == "InvalidInput"
    assert span.attributes is not None and span.attributes["error.type"] == "InvalidInput"
    assert not span.events
    assert not any(SECRET in text for text in _values(span))


def test_a_carrier_continues_the_trace_in_another_hop(spans: InMemorySpanExporter) -> None:
    with tracing.span("ingress.recall", SCOPE):
        carrier = tracing.carrier()
    assert set(carrier) == {"traceparent"}
    (ingress,) = spans.get_finished_spans()
    other = InMemorySpanExporter()  # the other process: its own provider, the same trace
    tracing.use_processor(SimpleSpanProcessor(other), "shard")
    with tracing.span("shard.serve_recall", SCOPE, parent=carrier):
        pass
    (shard,) = other.get_finished_spans()
    assert shard.context.trace_id == ingress.context.trace_id
    assert shard.parent is not None and shard.parent.span_id == ingress.context.span_id
    assert shard.resource.attributes["strata.component"] == "shard"


class _Shard:
    def write(self, scope: Scope, n: int, **extra: Any) -> int:
        return n

    traced_write = continues_trace(write)


class _Method:
    def __init__(self) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def remote(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append((args, kwargs))


class _Handle:
    def __init__(self) -> None:
        self.traced_write, self.other = _Method(), _Method()


def test_the_actor_halves_carry_and_continue(spans: InMemorySpanExporter) -> None:
    import inspect

    # Ray checks a call's arguments against this signature: it names the carrier
    unwrapped = inspect.unwrap(_Shard.traced_write)  # what Ray reads
    assert list(inspect.signature(unwrapped).parameters) == ["self", "scope", "n", "trace",
                                                             "extra"]
    assert traced_methods(_Shard) == {"traced_write"}
    handle = _Handle()
    with tracing.span("ingress.turn", SCOPE):
        carrying(handle, {"traced_write"}).traced_write.remote(SCOPE, 2)
        carrying(handle, {"traced_write"}).other.remote(SCOPE)
    (args, kwargs), = handle.traced_write.calls
    assert args == (SCOPE, 2) and set(kwargs) == {"trace"}
    assert handle.other.calls == [((SCOPE,), {})]  # a method not traced: as called
    assert _Shard().traced_write(SCOPE, 2, trace=kwargs["trace"]) == 2
    ingress, shard = spans.get_finished_spans()  # the call ran after the block, here
    assert shard.name == "shard.write"  # the wrapped method's name
    assert shard.context.trace_id == ingress.context.trace_id
    assert shard.attributes == {"strata.tenant": "acme", "strata.user_id": "u-42"}


def test_a_turn_and_a_recall_in_the_shard_record_no_content(
        spans: InMemorySpanExporter, shard: SessionShardService) -> None:
    with tracing.span("ingress.turn", SCOPE):
        shard.append_turn(SCOPE, "s1", "user", f"remember: {SECRET}")
    with tracing.span("ingress.recall", SCOPE):
        shard.recall_memory(SCOPE, RecallRequest(user_id="u-42", query="where does Alice "
                                                 "live", session_id="s1"))
    finished = spans.get_finished_spans()
    names = {s.name for s in finished}
    assert {"ingress.recall", "hot_index.search", "shard.query_embedding",
            "redis.wal_append"} <= names
    for span in finished:
        assert not any(word in text for text in _values(span)
                       for word in ("Alice", "Lyon", "sister", "where does"))
        if not span.name.startswith("ingress."):
            assert span.parent is not None  # every hop inside its request's trace


def test_console_exporter_writes_one_json_span_a_line(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    tracing.configure(Settings(tracing="console", tracing_console_path=str(path)), "ingress")
    try:
        with tracing.span("a", SCOPE), tracing.span("b", SCOPE):
            pass
    finally:
        tracing.reset()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [s["name"] for s in lines] == ["b", "a"]
    assert lines[0]["context"]["trace_id"] == lines[1]["context"]["trace_id"]
    assert lines[0]["resource"]["attributes"]["strata.component"] == "ingress"


def test_otlp_sends_in_batches_to_the_endpoint() -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    tracing.configure(Settings(tracing="otlp", tracing_endpoint="http://127.0.0.1:9/v1/traces"),
                      "shard")
    try:
        assert tracing.enabled()
        provider = tracing._state.provider
        assert provider is not None
        (processor,) = provider._active_span_processor._span_processors
        assert isinstance(processor, BatchSpanProcessor)
        exporter = processor._batch_processor._exporter
        assert isinstance(exporter, OTLPSpanExporter)
        assert exporter._endpoint == "http://127.0.0.1:9/v1/traces"
    finally:
        tracing.reset()  # nothing was recorded: nothing is sent
