"""milvus-lite's engine seen from inside the process that holds it: the background work a
flush starts (segment compaction, index builds), how many segments and unflushed rows a
collection has, and releasing a database file's server.

milvus-lite 3.2 has no public API for any of this but releasing a server
(``server_manager_instance.release_server``): pymilvus's ``MilvusClient`` reports row counts
and index descriptions, not segments, the unflushed memtable or the background worker. So
this module, and only this one, reaches into milvus-lite's internals
(``server_manager_instance._servers``, a Collection's ``_wait_for_bg``, ``_bg_executor``,
``_segments_snapshot`` and ``_memtable``). Each helper answers None (or a note) instead of
failing the benchmark when those have moved. milvus-lite is imported on first use.
"""

from __future__ import annotations

import os
import time
from typing import Any

__all__ = ["bg_marker", "drain_all", "engine_collection", "memtable_rows", "release",
           "segment_count", "wait_background"]


def engine_collection(path: str, name: str) -> Any:
    """The in-process milvus-lite Collection behind ``path`` (None if the internals moved)."""
    try:
        from milvus_lite import server_manager_instance as mgr  # type: ignore[import-untyped]

        _server, db, _port = mgr._servers[os.path.abspath(path)]
        return db.get_collection(name)
    except Exception:
        return None


def memtable_rows(col: Any) -> int | None:
    """Rows not flushed to a segment yet."""
    try:
        return int(col._memtable.size()) if col is not None else None
    except Exception:
        return None


def segment_count(col: Any) -> int | None:
    try:
        return len(col._segments_snapshot()) if col is not None else None
    except Exception:
        return None


def wait_background(col: Any, fallback_s: float = 3.0, timeout_s: float = 600) -> float:
    """Wait for milvus-lite's post-flush compaction + index build; returns the seconds
    waited (``fallback_s`` of sleep when the internals moved)."""
    started = time.perf_counter()
    try:
        col._wait_for_bg(timeout=timeout_s)
    except Exception:
        time.sleep(fallback_s)
    return time.perf_counter() - started


def bg_marker(col: Any) -> Any | None:
    """A future that completes once milvus-lite's (single-threaded) bg worker is idle."""
    try:
        return col._bg_executor.submit(lambda: None)
    except Exception:
        return None


def release(path: str) -> None:
    """Stop the server (and drop the file lock) milvus-lite keeps for ``path`` in this
    process."""
    try:
        from milvus_lite import server_manager_instance as mgr

        mgr.release_server(path)
    except Exception:
        pass


def drain_all(timeout_s: float = 900) -> dict[str, dict[str, Any]]:
    """Wait for the background work of every collection of every database this process
    holds; per collection its rows, segments, unflushed rows and the seconds waited."""
    try:
        from milvus_lite import server_manager_instance as mgr
    except Exception as exc:  # internals moved: report, don't fail the run
        return {"error": {"detail": repr(exc)}}
    out: dict[str, dict[str, Any]] = {}
    for _path, (_server, db, _port) in list(mgr._servers.items()):
        for name in db.list_collections():
            try:
                col = db.get_collection(name)
                started = time.perf_counter()
                col._wait_for_bg(timeout=timeout_s)
                out[name] = {"rows": int(col.num_entities),
                             "segments": len(col._segments_snapshot()),
                             "memtable": int(col._memtable.size()),
                             "bg_wait_s": round(time.perf_counter() - started, 2)}
            except Exception as exc:  # report, don't fail the run
                out[name] = {"error": repr(exc)}
    return out
