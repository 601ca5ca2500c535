"""Prometheus metrics of the ingress replica (one registry per replica process)."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from strata.stores.redis import QUEUE_HIGH, QUEUE_LOW, RedisStore

__all__ = ["REGISTRY", "observe_recall", "observe_request", "render", "update_backlog"]

REGISTRY = CollectorRegistry()
REQUESTS = Counter("strata_requests_total", "HTTP requests", ["route", "method", "status"],
                   registry=REGISTRY)
ERRORS = Counter("strata_request_errors_total", "HTTP requests answered 4xx/5xx",
                 ["route", "status"], registry=REGISTRY)
LATENCY = Histogram("strata_request_seconds", "HTTP request latency", ["route"],
                    registry=REGISTRY)
RECALL_LAYER = Histogram("strata_recall_layer_seconds", "recall latency per layer", ["layer"],
                         registry=REGISTRY)
RECALL_DEGRADED = Counter("strata_recall_degraded_total", "recalls answered degraded",
                          registry=REGISTRY)
BACKLOG = Gauge("strata_queue_backlog", "entries not yet acknowledged", ["queue"],
                registry=REGISTRY)
LAG = Gauge("strata_extraction_lag_seconds", "age of the oldest unacknowledged entry",
            ["queue"], registry=REGISTRY)
FLUSH = Gauge("strata_vector_flush_seconds", "duration of the last vector-store flush",
              registry=REGISTRY)
FLUSHES = Gauge("strata_vector_flushes", "vector-store flushes since the owner started",
                registry=REGISTRY)


def observe_request(route: str, method: str, status: int, seconds: float) -> None:
    REQUESTS.labels(route, method, str(status)).inc()
    LATENCY.labels(route).observe(seconds)
    if status >= 400:
        ERRORS.labels(route, str(status)).inc()


def observe_recall(timings_ms: dict[str, float], degraded: bool) -> None:
    for layer, ms in timings_ms.items():
        RECALL_LAYER.labels(layer).observe(ms / 1000)
    if degraded:
        RECALL_DEGRADED.inc()


def update_backlog(redis: RedisStore, group: str = "extractors") -> None:
    """Queue depth and extraction lag, read from Redis at scrape time."""
    now_ms = time.time() * 1000
    for queue in (QUEUE_HIGH, QUEUE_LOW):
        depth = redis.queue_depth(queue, group)
        BACKLOG.labels(queue).set(depth.backlog)
        oldest = redis.scan_queue_ids(queue, 1)
        LAG.labels(queue).set(max(0.0, (now_ms - int(oldest[0].split("-")[0])) / 1000)
                              if oldest else 0.0)


def update_flush(stats: dict[str, float]) -> None:
    FLUSH.set(stats.get("last_flush_s", 0.0))
    FLUSHES.set(stats.get("flushes", 0.0))


def render() -> bytes:
    return generate_latest(REGISTRY)
