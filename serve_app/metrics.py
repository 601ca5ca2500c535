"""Prometheus metrics: each ingress replica counts in its own registry and publishes the
counts to Redis (``MetricsBoard``); a scrape of any replica answers the cluster's sums."""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import Metric

from strata.stores.coordination import MetricSamples
from strata.stores.keys import QUEUE_HIGH, QUEUE_LOW
from strata.stores.redis_ports import WriteQueues

__all__ = ["REGISTRY", "local_samples", "observe_rate_limited", "observe_recall",
           "observe_request", "render", "update_backlog"]

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
RATE_LIMITED = Counter("strata_rate_limited_total",
                       "requests refused 429 by a rate limit, by the key's tenant and the "
                       "limit that refused (key or tenant)", ["tenant", "limit"],
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


def observe_rate_limited(tenant: str, limit: str) -> None:
    RATE_LIMITED.labels(tenant, limit).inc()


def observe_recall(timings_ms: dict[str, float], degraded: bool) -> None:
    for layer, ms in timings_ms.items():
        RECALL_LAYER.labels(layer).observe(ms / 1000)
    if degraded:
        RECALL_DEGRADED.inc()


def update_backlog(queues: WriteQueues, group: str = "extractors") -> None:
    """Queue depth and extraction lag, read from Redis at scrape time."""
    now_ms = time.time() * 1000
    for queue in (QUEUE_HIGH, QUEUE_LOW):
        depth = queues.depth(queue, group)
        BACKLOG.labels(queue).set(depth.backlog)
        oldest = queues.oldest_ids(queue, 1)
        LAG.labels(queue).set(max(0.0, (now_ms - int(oldest[0].split("-")[0])) / 1000)
                              if oldest else 0.0)


def update_flush(stats: dict[str, float]) -> None:
    FLUSH.set(stats.get("last_flush_s", 0.0))
    FLUSHES.set(stats.get("flushes", 0.0))


def local_samples() -> MetricSamples:
    """This replica's counters and histograms (cumulative), to be summed across replicas.

    Gauges are left out: they are read from Redis or the store owner at scrape time.
    """
    return [(family.name, family.type, family.documentation,
             [(s.name, dict(s.labels), s.value) for s in family.samples
              if not s.name.endswith("_created")])
            for family in REGISTRY.collect() if family.type in ("counter", "histogram")]


class _Summed:
    """A collector that yields the cluster's sums, then this replica's gauges."""

    def __init__(self, summed: MetricSamples) -> None:
        self._summed = summed

    def collect(self) -> Iterator[Metric]:
        for name, kind, doc, samples in self._summed:
            family = Metric(name, doc, kind)
            for sample, labels, value in samples:
                family.add_sample(sample, labels, value)
            yield family
        for family in REGISTRY.collect():
            if family.type == "gauge":
                yield family


def render(summed: MetricSamples | None = None) -> bytes:
    """The exposition: the cluster's sums when given, else this replica's own registry."""
    if summed is None:
        return generate_latest(REGISTRY)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Summed(summed))
    return generate_latest(registry)
