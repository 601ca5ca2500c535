"""Issue #40 through the live app: every answer carries one ``X-Request-ID`` (the client's
when valid, else a new one), and with ``STRATA_TRACING=console`` a recall's spans in the
ingress replica and in the user's shard — two processes, one spans file — share one trace,
and no span holds what was said or asked."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from live import live_app

AUTH = {"Authorization": "Bearer key-acme"}
KEYS = {"key-acme": {"tenant": "acme", "role": "admin"}}
SAID = "my sister Margarethe moved to Trondheim"
ASKED = "where did Margarethe move"


@pytest.fixture(scope="module")
def app(ray_session: None, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[tuple[httpx.Client, Path]]:
    tmp = tmp_path_factory.mktemp("tracing")
    spans = tmp / "spans.jsonl"
    with live_app(tmp, embedder="hash", extractor="rules", api_keys=KEYS, tracing="console",
                  tracing_console_path=str(spans)) as (url, _), \
            httpx.Client(base_url=url, timeout=60, headers=AUTH) as client:
        yield client, spans


def _ids(resp: httpx.Response) -> list[str]:
    return resp.headers.get_list("x-request-id")


def test_every_answer_carries_one_request_id(app: tuple[httpx.Client, Path]) -> None:
    client, _ = app
    answers = [client.get("/healthz"), client.get("/v1/nowhere"),
               client.post("/v1/recall", json={"user_id": "u"}),  # 422
               client.get("/v1/users/u/memories", headers={"Authorization": "Bearer no"})]
    assert [r.status_code for r in answers] == [200, 404, 422, 401]
    ids = [_ids(r) for r in answers]
    assert all(len(i) == 1 for i in ids), ids
    assert len({i[0] for i in ids}) == 4  # a new one each


def test_a_valid_id_is_echoed_an_invalid_one_replaced(app: tuple[httpx.Client, Path]) -> None:
    client, _ = app
    assert _ids(client.get("/healthz", headers={"X-Request-ID": "agent-run-7.3"})) == [
        "agent-run-7.3"]
    for bad in ("x" * 200, "two words", "<script>"):
        (given,) = _ids(client.get("/healthz", headers={"X-Request-ID": bad}))
        assert given != bad and len(given) <= 64


def _spans(path: Path, want: Any, timeout_s: float = 20) -> list[dict[str, Any]]:
    """The spans written so far, once ``want(spans)`` holds (a span is written as it
    ends; the request's own ends just after its answer is sent)."""
    deadline = time.monotonic() + timeout_s
    while True:
        lines = path.read_text().splitlines() if path.exists() else []
        spans = [json.loads(line) for line in lines if line.strip()]
        if want(spans) or time.monotonic() > deadline:
            return spans
        time.sleep(0.2)


def test_a_recall_is_one_trace_across_ingress_and_shard(app: tuple[httpx.Client, Path]
                                                        ) -> None:
    client, path = app
    turn = client.post("/v1/sessions/trace-s/turns", json={
        "user_id": "tracy", "role": "user", "content": SAID},
        headers={"X-Request-ID": "turn-req-1"})
    assert turn.status_code == 200, turn.text
    recall = client.post("/v1/recall", json={"user_id": "tracy", "query": ASKED,
                                              "session_id": "trace-s"},
                         headers={"X-Request-ID": "recall-req-1"})
    assert recall.status_code == 200, recall.text
    assert _ids(recall) == ["recall-req-1"]

    def request_span(spans: list[dict[str, Any]], request_id: str) -> dict[str, Any] | None:
        return next((s for s in spans
                     if s["attributes"].get("strata.request_id") == request_id), None)

    spans = _spans(path, lambda s: request_span(s, "recall-req-1") is not None)
    root = request_span(spans, "recall-req-1")
    assert root is not None, [s["name"] for s in spans]
    assert root["name"] == "HTTP POST /v1/recall"
    assert root["attributes"]["strata.tenant"] == "acme"
    trace = root["context"]["trace_id"]
    in_trace = {s["name"]: s for s in spans if s["context"]["trace_id"] == trace}
    assert {"ingress.recall", "shard.serve_recall", "hot_index.search"} <= set(in_trace)
    shard = in_trace["shard.serve_recall"]
    assert shard["resource"]["attributes"]["strata.component"] == "shard"
    assert in_trace["ingress.recall"]["resource"]["attributes"]["strata.component"] == (
        "ingress")
    assert shard["attributes"]["strata.user_id"] == "tracy"
    assert shard["attributes"]["strata.tenant"] == "acme"
    assert shard["parent_id"] == in_trace["ingress.recall"]["context"]["span_id"]

    turn_root = request_span(spans, "turn-req-1")
    assert turn_root is not None
    turn_trace = {s["name"] for s in spans
                  if s["context"]["trace_id"] == turn_root["context"]["trace_id"]}
    assert {"shard.append_turn", "redis.wal_append"} <= turn_trace
    text = path.read_text()
    for word in ("Margarethe", "Trondheim", "sister", "where did"):
        assert word not in text
