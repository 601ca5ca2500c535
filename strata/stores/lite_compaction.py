"""Rewrite the milvus-lite data files that still hold deleted rows.

A Milvus delete only writes a tombstone: the row's text stays in its parquet segment until
a compaction rewrites it. milvus-lite (3.x, pure Python, in this process) compacts by
itself only when a partition holds four files of similar size, and its ``compact()`` RPC
is a no-op (``ManualCompaction`` in its gRPC servicer). So forgetting rewrites, under the
engine's own maintenance lock and with its own compaction step, exactly the files that
hold a row a tombstone covers; the old files are deleted by that step. The tombstones
themselves stay (no text in them) until the engine's own compaction collects them.

This reaches into milvus-lite's engine (private names): if a milvus-lite upgrade moves
them, ``compact_deleted`` raises ``LiteCompactionUnavailable`` and the caller reports that
the deleted text may remain on disk (``strata forget --verify`` then shows where).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import pyarrow.parquet as pq  # type: ignore[import-untyped]

__all__ = ["LiteCompactionUnavailable", "compact_deleted"]

logger = logging.getLogger(__name__)


class LiteCompactionUnavailable(RuntimeError):
    """This milvus-lite is not open in this process, or its engine has changed."""


def _engine_collection(db_path: str, name: str) -> Any:
    try:
        from milvus_lite.server_manager import (  # type: ignore[import-untyped]
            server_manager_instance,
        )
        entry = server_manager_instance._servers.get(os.path.abspath(db_path))
        if entry is None:
            raise LiteCompactionUnavailable(f"milvus-lite {db_path} is not open here")
        return entry[1].get_collection(name)
    except (ImportError, AttributeError) as exc:
        raise LiteCompactionUnavailable(f"milvus-lite engine not reachable: {exc}") from exc


def _holds_deleted(path: str, pk_name: str, deltas: Any) -> bool:
    table = pq.read_table(path, columns=[pk_name, "_seq"])
    pks = table.column(pk_name).to_pylist()
    seqs = table.column("_seq").to_pylist()
    return any(deltas.is_deleted(pk, seq) for pk, seq in zip(pks, seqs, strict=True))


def compact_deleted(db_path: str, name: str) -> int:
    """Rewrite the data files of collection ``name`` (an alias is resolved) that hold rows
    deleted since they were written; returns how many files were rewritten."""
    col = _engine_collection(db_path, name)
    try:
        col._wait_for_bg(timeout=60)  # an automatic compaction in flight finishes first
        rewritten = 0
        with col._maintenance_lock:
            manager, manifest, deltas = col._compaction_mgr, col._manifest, col._delta_index
            for partition in manifest.list_partitions():
                part_dir = os.path.join(col._data_dir, "partitions", partition)
                stale = [f for f in manifest.get_data_files(partition)
                         if _holds_deleted(os.path.join(part_dir, f), manager._pk_name, deltas)]
                if stale:
                    manager._compact_files(partition, part_dir, stale, manifest, deltas)
                    rewritten += len(stale)
            if rewritten:
                # tombstones are kept (they hold ids and sequence numbers, no text): dropping
                # them here could let a copy of a deleted row that this pass did not see be
                # read again; the engine's own compaction collects them later
                col._refresh_segment_cache()
                col._cleanup_orphan_index_files()
        return rewritten
    except AttributeError as exc:
        raise LiteCompactionUnavailable(f"milvus-lite engine changed: {exc}") from exc
