"""The pure parts of bench/soak.py: the open-loop schedule, the operation mix, the slope and
first/last-minute figures of an RSS series, and the roles of a server's processes."""

from __future__ import annotations

import itertools
import os

import pytest

from bench.common.process_rss import (
    RoleSample,
    first_last_mean,
    process_role,
    role_series,
    sample_tree,
    slope_per_min,
)
from bench.common.soak_report import Window, memory_summary
from bench.common.soak_workload import MIX, SoakWorkload, choose_ops
from bench.soak import issue_times


def test_schedule_issues_at_fixed_times_whatever_the_answers() -> None:
    times = issue_times(20, 600)
    assert len(times) == 12_000
    assert times[0] == 0.0
    assert times[-1] == pytest.approx(599.95)
    gaps = {round(b - a, 9) for a, b in itertools.pairwise(times)}
    assert gaps == {0.05}
    assert issue_times(2.5, 4) == pytest.approx([0.0, 0.4, 0.8, 1.2, 1.6, 2.0, 2.4, 2.8,
                                                 3.2, 3.6])
    assert issue_times(0, 60) == [] and issue_times(5, 0) == []


def test_operation_mix_follows_its_weights_and_seed() -> None:
    ops = choose_ops(20_000, MIX, seed=3)
    for kind, share in MIX.items():
        assert ops.count(kind) / len(ops) == pytest.approx(share, abs=0.015)
    assert choose_ops(50, MIX, seed=3) == ops[:50]
    assert choose_ops(50, MIX, seed=4) != ops[:50]


def test_slope_is_per_minute_and_least_squares() -> None:
    assert slope_per_min([(0, 100.0), (60, 110.0), (120, 120.0)]) == pytest.approx(10.0)
    # noise around a flat line: the fit, not the last minus the first
    assert slope_per_min([(0, 100.0), (30, 104.0), (60, 96.0), (90, 100.0)]) == \
        pytest.approx(-1.6)
    assert slope_per_min([(10, 5.0)]) == 0.0
    assert slope_per_min([(10, 5.0), (10, 9.0)]) == 0.0


def test_first_and_last_minute_means() -> None:
    points = [(float(t), float(t // 10)) for t in range(0, 610, 10)]
    first, last = first_last_mean(points)
    assert first == pytest.approx(3.0)  # t = 0..60
    assert last == pytest.approx(57.0)  # t = 540..600
    assert first_last_mean([]) != first_last_mean([])  # nan, nan


@pytest.mark.parametrize(("name", "cmdline", "root", "actor", "role"), [
    ("strata", ["/v/bin/python", "/v/bin/strata", "serve"], True, None, "strata serve (driver)"),
    ("raylet", ["/v/ray/raylet/raylet", "--agent_command=/v/ray/dashboard/agent.py"], False,
     None, "raylet"),
    ("ray", ["/v/bin/python3", "/v/bin/ray", "start", "--head"], False, None, "ray start (head)"),
    ("python3", ["/v/bin/python3", "-m", "ray.util.client.server", "--address=x"], False, None,
     "ray client server"),
    ("gcs_server", ["/v/ray/gcs/gcs_server", "--x"], False, None, "gcs_server"),
    ("redis-server", ["redis-server 127.0.0.1:6399"], False, None, "redis-server"),
    ("ray::SessionSh", ["ray::SessionShard.append_turn", ""], False, None, "ray::SessionShard"),
    ("ray::SessionSh", ["ray::SessionShard"], False, "shard-1", "ray::SessionShard shard-1"),
    ("ray::ServeRepl", ["ray::ServeReplica:strata:Ingress.handle_request"], False, None,
     "ray::ServeReplica:strata:Ingress"),
    ("ray::IDLE", ["ray::IDLE"], False, None, "ray::IDLE"),
    ("python", ["/v/bin/python", "-u", "/v/ray/dashboard/agent.py", "--x"], False, None,
     "dashboard agent"),
    ("python", ["/v/bin/python", "/v/ray/dashboard/dashboard.py"], False, None, "dashboard"),
    ("python", ["/v/bin/python", "-u", "/v/ray/_private/log_monitor.py"], False, None,
     "log monitor"),
    ("ray-dashboard-N", ["ray-dashboard-NodeHead-0 (/v/bin/python -c ...)"], False, None,
     "dashboard modules"),
    ("milvus", ["/v/milvus_lite/lib/milvus", "/tmp/x.db"], False, None, "milvus-lite"),
])
def test_process_roles(name: str, cmdline: list[str], root: bool, actor: str | None,
                       role: str) -> None:
    assert process_role(name, cmdline, root, actor) == role


def test_roles_are_summed_and_summarised_per_role() -> None:
    samples = [RoleSample(t, {"raylet": 50.0, "ray::SessionShard": 200.0 + t / 6},
                          {"raylet": 1, "ray::SessionShard": 2}) for t in range(0, 310, 10)]
    series = role_series(samples)
    assert series["total"][0] == (0, 250.0)
    summary = memory_summary(samples)
    assert summary["ray::SessionShard"]["before_load_mb"] == 200.0  # t = 0: before the load
    # the minute from the first sample under load: t = 10..70, mean t 40
    assert summary["ray::SessionShard"]["first_min_mb"] == pytest.approx(206.7)
    assert summary["raylet"]["change_mb"] == 0.0
    assert summary["raylet"]["slope_mb_per_min"] == 0.0
    assert summary["ray::SessionShard"]["slope_mb_per_min"] == pytest.approx(10.0)
    assert summary["ray::SessionShard"]["last_min_mb"] == pytest.approx(245.0)  # t 240..300
    assert summary["ray::SessionShard"]["change_mb"] == pytest.approx(38.3)
    assert summary["total"]["slope_after_first_min"] == pytest.approx(10.0)
    assert summary["total"]["slope_second_half"] == pytest.approx(10.0)


def test_second_half_slope_shows_a_level_being_approached() -> None:
    # +20 MB/min for 5 minutes, then flat for 5
    samples = [RoleSample(t, {"ray::SessionShard": 200 + min(t, 300) / 3})
               for t in range(0, 610, 10)]
    m = memory_summary(samples)["ray::SessionShard"]
    assert m["slope_after_first_min"] > 5
    assert m["slope_second_half"] == pytest.approx(0.0, abs=0.5)


def test_sampling_this_process_tree_finds_this_process() -> None:
    sample = sample_tree(os.getpid(), 0.0)
    # the root is the driver role (a suite's fixtures may have started children too)
    assert sample.procs.get("strata serve (driver)") == 1
    assert sample.total_mb > 1


def test_window_counts_errors_by_status_and_latency_of_successes_only() -> None:
    w = Window()
    w.record("turn", "ok", 0.010)
    w.record("recall", "ok", 0.030)
    w.record("recall", "503", 2.0, "busy")
    w.record("turn", "ReadTimeout", 0.0, "timed out")
    row = w.as_json()
    assert row["done"] == 4 and row["ok"] == 2
    assert row["errors"] == {"503": 1, "ReadTimeout": 1}
    assert row["p50_ms"] == pytest.approx(20.0)
    assert row["by_kind"] == {"turn": 2, "recall": 2}


def test_workload_closes_a_session_once_its_turns_are_back() -> None:
    wl = SoakWorkload("http://x", n_users=1, tag="t", seed=1)
    user = wl.users[0]
    first = [wl.request("turn") for _ in range(user.turns_left)]
    assert {r[2].split("/")[-2] for r in first} == {"s1"}
    # s1 is finished but its last turn is still out: the next turn goes to s2, no close yet
    for r in first[:-1]:
        wl.finished(r[0], r[2], r[3])
    for _ in range(2):  # the second: s1 is due for closing but still has a turn out
        kind, _, url, _ = wl.request("turn")
        assert (kind, url.split("/")[-2]) == ("turn", "s2")
    assert wl.closed == 0
    wl.finished(first[-1][0], first[-1][2], first[-1][3])
    kind, _, url, body = wl.request("turn")
    assert (kind, url) == ("close", "http://x/v1/sessions/s1/close")
    assert body == {"user_id": user.user_id} and wl.closed == 1
    assert wl.request("turn")[2].endswith("/v1/sessions/s2/turns")


def test_workload_forgets_what_it_remembered() -> None:
    wl = SoakWorkload("http://x", n_users=1, tag="t", seed=1)
    user = wl.users[0]
    assert wl.request("forget")[0] == "list"  # nothing remembered yet
    kind, _, url, body = wl.request("remember")
    assert kind == "remember" and body is not None and body["kind"] == "fact"
    assert body["key"] and body["value"]
    wl.answered("remember", url, {"memory": {"id": "m1"}})
    kind, method, url, _ = wl.request("forget")
    assert (kind, method) == ("forget", "DELETE")
    assert url.endswith(f"/v1/users/{user.user_id}/memories/m1")
    assert user.memories == []


def test_workload_erases_a_user_after_its_sessions_once_nothing_of_it_is_out() -> None:
    wl = SoakWorkload("http://x", n_users=1, tag="t", seed=1, churn_sessions=1)
    user = wl.users[0]
    for r in [wl.request("turn") for _ in range(user.turns_left + 1)]:  # s1 done, one in s2
        wl.finished(r[0], r[2], r[3])
    remember = wl.request("remember")
    close = wl.request("turn")
    assert close[0] == "close" and wl.closed == 1
    turn = wl.request("turn")  # the remember and the close are still out
    assert turn[0] == "turn"
    for r in (close, turn):
        wl.finished(r[0], r[2], r[3])
    another = wl.request("turn")  # ... the remember still is
    assert another[0] == "turn"
    for r in (another, remember):
        wl.finished(r[0], r[2], r[3])
    wl.answered(remember[0], remember[2], {"memory": {"id": "m1"}})
    kind, method, url, _ = wl.request("turn")  # nothing out: the user goes
    assert (kind, method, url) == ("erase", "DELETE", f"http://x/v1/users/{user.user_id}")
    assert user.erasing and user.memories == [] and wl.erased == 1
    wl.finished(kind, url, None)
    assert not user.erasing and wl.request("turn")[0] == "turn"  # starts again, empty
