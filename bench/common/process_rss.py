"""Resident memory of a server's process tree, grouped by role, and how it moved over time.

A role is what a process is for: the ``strata serve`` driver (the root), Ray's ``raylet``
and ``gcs_server``, each Ray worker by the title Ray gives it (``ray::SessionShard``,
``ray::ServeReplica:strata:Ingress``; the method it is running, ``.append_turn``, is cut off
so one actor keeps one role), ``redis-server``, milvus-lite's server, Ray's dashboard and
agents. Processes of one role are summed (two shards of one class are one role of two
processes). A Ray worker's actor name (``shard-0``) is added to its role when the caller
gives a pid → name map (``actor_names``).

psutil comes with Ray (``ray/thirdparty_files``) when it is not installed on its own.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["RoleSample", "actor_names", "first_last_mean", "process_role", "role_series",
           "sample_tree", "slope_per_min"]

MB = 2**20

# a command line containing the key is the role (Ray's python daemons)
_BY_CMDLINE = (("bin/ray start", "ray start (head)"),
               ("dashboard/agent.py", "dashboard agent"),
               ("dashboard/dashboard.py", "dashboard"),
               ("runtime_env/agent/main.py", "runtime env agent"),
               ("log_monitor.py", "log monitor"),
               ("autoscaler/_private/monitor.py", "autoscaler monitor"),
               ("ray.util.client.server", "ray client server"),
               ("multiprocessing.forkserver", "multiprocessing forkserver"),
               ("multiprocessing.resource_tracker", "multiprocessing resource tracker"))
_BY_NAME = {"raylet": "raylet", "gcs_server": "gcs_server", "redis-server": "redis-server",
            "milvus": "milvus-lite"}


def _psutil() -> ModuleType:
    try:
        return importlib.import_module("psutil")
    except ImportError:
        spec = importlib.util.find_spec("ray")
        if spec is None or spec.origin is None:
            raise
        sys.path.append(str(Path(spec.origin).parent / "thirdparty_files"))
        return importlib.import_module("psutil")


def process_role(name: str, cmdline: Sequence[str], is_root: bool = False,
                 actor_name: str | None = None) -> str:
    """The role of one process from its name and command line (see the module doc)."""
    if is_root:
        return "strata serve (driver)"
    title = " ".join(cmdline).strip()
    if title.startswith("ray::"):
        # Ray's title is ``ray::Class`` or ``ray::Class.method`` while a task runs
        role = "ray::" + title[5:].split()[0].split(".")[0] if title[5:].strip() else "ray::"
        return f"{role} {actor_name}" if actor_name else role
    base = name.split("/")[-1]
    if base.startswith("ray-dashboard-") or title.startswith("ray-dashboard-"):
        return "dashboard modules"  # the dashboard's module processes
    for key, role in _BY_NAME.items():  # first: raylet's arguments name the agents' scripts
        if base.startswith(key):
            return role
    for key, role in _BY_CMDLINE:
        if key in title:
            return role
    return base or "?"


def actor_names(dashboard_url: str, token: str | None = None,
                timeout_s: float = 10.0) -> dict[int, str]:
    """pid → name of the live named actors, from the Ray dashboard's state API; Serve's own
    actors are left out (their titles already name the deployment, and their names carry a
    suffix that changes when a replica restarts). ``token``: the cluster's Ray auth token,
    when it has one. Empty when the dashboard cannot tell."""
    import httpx

    try:
        resp = httpx.get(f"{dashboard_url.rstrip('/')}/api/v0/actors",
                         params={"limit": 1000}, timeout=timeout_s,
                         headers={"Authorization": f"Bearer {token}"} if token else None)
        rows = resp.json()["data"]["result"]["result"]
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return {}
    return {int(r["pid"]): str(r["name"]) for r in rows
            if r.get("state") == "ALIVE" and r.get("name") and r.get("pid")
            and not str(r["name"]).startswith("SERVE_")}


@dataclass
class RoleSample:
    """One sample: summed RSS (MB) and process count per role, at ``t_s``."""

    t_s: float
    rss_mb: dict[str, float] = field(default_factory=dict)
    procs: dict[str, int] = field(default_factory=dict)
    # (pid, role, MB, the start of the command line) of each process
    detail: list[tuple[int, str, float, str]] = field(default_factory=list)

    @property
    def total_mb(self) -> float:
        return sum(self.rss_mb.values())

    def as_json(self) -> dict[str, Any]:
        return {"t_s": round(self.t_s, 1), "total_mb": round(self.total_mb, 1),
                "rss_mb": {k: round(v, 1) for k, v in sorted(self.rss_mb.items())},
                "procs": dict(sorted(self.procs.items()))}

    def processes(self) -> list[dict[str, Any]]:
        return [{"pid": pid, "role": role, "rss_mb": round(mb, 1), "cmd": cmd}
                for pid, role, mb, cmd in sorted(self.detail, key=lambda d: -d[2])]


def sample_tree(root_pid: int, t_s: float,
                actor_names: Mapping[int, str] | None = None) -> RoleSample:
    """RSS of ``root_pid`` and every process below it, grouped by role."""
    psutil = _psutil()
    sample = RoleSample(t_s)
    try:
        root = psutil.Process(root_pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return sample
    for proc in procs:
        try:
            with proc.oneshot():
                rss = proc.memory_info().rss
                name, cmdline = proc.name(), proc.cmdline()
                role = process_role(name, cmdline, proc.pid == root_pid,
                                    (actor_names or {}).get(proc.pid))
        except psutil.Error:  # gone between listing and reading
            continue
        sample.rss_mb[role] = sample.rss_mb.get(role, 0.0) + rss / MB
        sample.procs[role] = sample.procs.get(role, 0) + 1
        sample.detail.append((proc.pid, role, rss / MB, f"{name}: {' '.join(cmdline)[:100]}"))
    return sample


def role_series(samples: Sequence[RoleSample]) -> dict[str, list[tuple[float, float]]]:
    """Per role (and ``total``), its ``(t_s, MB)`` points in time order."""
    out: dict[str, list[tuple[float, float]]] = {}
    for s in samples:
        for role, mb in s.rss_mb.items():
            out.setdefault(role, []).append((s.t_s, mb))
        out.setdefault("total", []).append((s.t_s, s.total_mb))
    return out


def slope_per_min(points: Sequence[tuple[float, float]]) -> float:
    """The least-squares slope of ``(seconds, value)`` points, per minute (0 below 2
    distinct times)."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return 0.0
    cov = sum((t - mean_t) * (v - mean_v) for t, v in points)
    return cov / var * 60.0


def first_last_mean(points: Sequence[tuple[float, float]],
                    span_s: float = 60.0) -> tuple[float, float]:
    """The mean value over the first ``span_s`` seconds and over the last ``span_s``."""
    if not points:
        return float("nan"), float("nan")
    start, end = points[0][0], points[-1][0]
    first = [v for t, v in points if t <= start + span_s]
    last = [v for t, v in points if t >= end - span_s]
    return sum(first) / len(first), sum(last) / len(last)
