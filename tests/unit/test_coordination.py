"""Cluster-wide coordination in a real Redis: one lock holder at a time, replicas' metrics
summed (what an asyncio lock or a per-process registry cannot do across replicas)."""

from __future__ import annotations

import threading
import time

import pytest

from serve_app import metrics
from strata.errors import Conflict
from strata.stores.coordination import ClusterLock, MetricsBoard
from strata.stores.redis_server import EmbeddedRedis


def test_one_holder_at_a_time_across_lock_objects(redis_server: EmbeddedRedis) -> None:
    # two ClusterLock objects stand for two replicas: they share nothing but Redis
    first, second = (ClusterLock(redis_server.url, "t:lock1:") for _ in range(2))
    events: list[str] = []
    entered = threading.Event()

    def hold_first() -> None:
        with first.hold("import:acme"):
            entered.set()
            events.append("first in")
            time.sleep(0.5)
            events.append("first out")

    thread = threading.Thread(target=hold_first)
    thread.start()
    entered.wait(5)
    with second.hold("import:acme"):
        events.append("second in")
    thread.join()
    assert events == ["first in", "first out", "second in"]
    with second.hold("import:other"):  # another name is another lock
        pass


def test_a_held_lock_is_renewed_and_a_waiter_gives_up(redis_server: EmbeddedRedis) -> None:
    holder = ClusterLock(redis_server.url, "t:lock2:", ttl_s=0.3)
    other = ClusterLock(redis_server.url, "t:lock2:", ttl_s=0.3)
    with holder.hold("import:acme"):
        time.sleep(1.0)  # three TTLs: held only because the holder renews it
        with pytest.raises(Conflict), other.hold("import:acme", wait_s=0.3):
            pass
    with other.hold("import:acme", wait_s=1.0):  # released on exit
        pass


def test_a_crashed_holder_frees_the_lock_after_its_ttl(redis_server: EmbeddedRedis) -> None:
    crashed = ClusterLock(redis_server.url, "t:lock3:", ttl_s=0.5)
    crashed._r.set("t:lock3:lock:import:acme", "someone-gone", px=500)
    started = time.monotonic()
    with crashed.hold("import:acme", wait_s=5):
        assert time.monotonic() - started >= 0.3


def test_metrics_of_two_replicas_are_summed(redis_server: EmbeddedRedis) -> None:
    board = MetricsBoard(redis_server.url, "t:metrics1:")
    metrics.observe_request("/v1/recall", "POST", 200, 0.05)
    mine = metrics.local_samples()
    board.publish("replica-a", mine)
    board.publish("replica-b", mine)  # a second replica with the same counts
    text = metrics.render(board.gather()).decode()
    single = metrics.render().decode()

    def count(exposition: str) -> float:
        line = next(x for x in exposition.splitlines() if x.startswith(
            'strata_requests_total{method="POST",route="/v1/recall",status="200"}'))
        return float(line.rsplit(" ", 1)[1])

    assert count(text) == 2 * count(single)
    assert "# TYPE strata_request_seconds histogram" in text
    assert "strata_queue_backlog" in text  # the scraping replica's gauges come along


def test_a_silent_replica_leaves_the_sums(redis_server: EmbeddedRedis) -> None:
    board = MetricsBoard(redis_server.url, "t:metrics2:", keep_s=0.2)
    board.publish("gone", [("strata_x", "counter", "x", [("strata_x_total", {}, 5.0)])])
    time.sleep(0.3)
    board.publish("alive", [("strata_x", "counter", "x", [("strata_x_total", {}, 1.0)])])
    assert board.gather() == [("strata_x", "counter", "x", [("strata_x_total", {}, 1.0)])]
