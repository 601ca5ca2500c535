"""CPU seconds of a process tree, read from ``/proc`` (Linux): for a whole tree at once
(``tree_cpu_seconds``, how busy a server still is), or per process and grouped by role
(``cpu_snapshot`` / ``cpu_delta``, what a phase of a benchmark cost each part of the app).

A Ray worker's role comes from the title Ray gives it (``ray::SessionShard.append_turn``,
``ray::ServeReplica:strata:Recall``): a Serve replica is its deployment, the shards,
extractors, store owner and Serve proxy are one role each, the rest of Ray is one role.
"""

from __future__ import annotations

import contextlib
import os
from collections import defaultdict
from pathlib import Path

__all__ = ["CpuSnapshot", "cpu_delta", "cpu_role", "cpu_snapshot", "process_tree",
           "tree_cpu_seconds"]

_TICK = os.sysconf("SC_CLK_TCK")
CpuSnapshot = dict[int, tuple[float, str]]  # pid → (CPU seconds, role)


def _stat_fields(stat: str) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command name (which may hold spaces)."""
    return stat[stat.rindex(")") + 2:].split()


def _proc_table() -> dict[int, tuple[int, float, str]]:
    """pid → (ppid, cpu seconds, process title) for every readable process."""
    table: dict[int, tuple[int, float, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                title = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = _stat_fields(stat)
        table[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK,
                             title)
    return table


def _descendants(root: int, table: dict[int, tuple[int, float, str]]) -> list[int]:
    children: dict[int, list[int]] = defaultdict(list)
    for pid, (ppid, _, _) in table.items():
        children[ppid].append(pid)
    out, stack = [], [root]
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(children.get(pid, ()))
    return out


def process_tree(root: int) -> list[int]:
    """``root`` and every process below it (Ray's workers are the raylet's children)."""
    return _descendants(root, _proc_table())


def tree_cpu_seconds(pids: list[int]) -> float:
    """User plus system CPU seconds of these processes (those gone are left out)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = _stat_fields(Path(f"/proc/{pid}/stat").read_text())
            total += int(fields[11]) + int(fields[12])  # utime + stime, in ticks
    return total / _TICK


def cpu_role(title: str) -> str:
    """The role of one process of an in-process Strata app, from its title."""
    if title.startswith("ray::"):
        name = title[5:].split(".")[0].split(" ")[0]
        if name.startswith("ServeReplica:"):
            return name.split(":")[-1]
        if "Extract" in name:
            return "extractor"
        return {"StoreOwnerService": "StoreOwner", "SessionShard": "shards",
                "ProxyActor": "Serve proxy"}.get(name, "ray / serve system")
    head = title.split(" ")[0]
    if "redis-server" in head:
        return "redis"
    return "ray / serve system"


def cpu_snapshot(root: int | None = None) -> CpuSnapshot:
    """CPU seconds and role of ``root`` (default: this process, the load generator) and of
    all its descendants (a local Ray started here: this run's whole cluster)."""
    me = os.getpid() if root is None else root
    table = _proc_table()
    return {pid: (table[pid][1], "load generator (driver)" if pid == me
                  else cpu_role(table[pid][2]))
            for pid in _descendants(me, table) if pid in table}


def cpu_delta(before: CpuSnapshot, after: CpuSnapshot) -> dict[str, float]:
    """CPU seconds spent per role between two snapshots (processes started since count
    from zero)."""
    groups: dict[str, float] = defaultdict(float)
    for pid, (cpu, name) in after.items():
        groups[name] += cpu - before.get(pid, (0.0, name))[0]
    return dict(groups)
