"""Verifiable forgetting: deleted text leaves the files, within a documented bound.

A delete removes keys and rows at once, but both stores keep the old bytes on disk: Redis
in its append-only file (every command ever written, until the AOF is rewritten) and Milvus
in its segment files (a delete writes a tombstone; the row stays until a compaction).
``FilePurge`` follows every user or memory delete with, in the background, a compaction of
the vector collections deleted from (``Purging.purge_deleted``) and an AOF rewrite
(``BGREWRITEAOF``). Requests coalesce: one purge runs at a time, and requests arriving
meanwhile are served by one more purge after it, which starts after their deletes.

``FORGET_BOUND_S`` is the documented bound from the delete's reply to the text being gone
from the local files (embedded Redis under ``<data_dir>/redis``, milvus-lite at
``<data_dir>/milvus.db``). ``find_residue`` greps those files for a phrase; ``wait_forgotten``
polls it up to the bound. The server runs it on its own files after a delete
(``POST /v1/users/{user_id}/erasure``, ``strata forget --verify``) and says what it scanned: a
check that read no file is not a success.

The grep counts raw bytes. Two encodings can hide a copy from it: Redis 7 writes the AOF's
base as RDB, whose values may be LZF-compressed, and parquet pages may be snappy-compressed;
a phrase's first copy in a value is usually a literal, but a 0 there is strong evidence,
not proof. The live dataset is checked separately (``RedisStore.dump_values``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from strata.stores.ports import PurgeReport, Purging
from strata.stores.redis_ports import AppendOnlyFile

__all__ = ["FORGET_BOUND_S", "FilePurge", "ForgetCheck", "Residue", "data_files",
           "find_residue", "wait_forgotten"]

logger = logging.getLogger(__name__)

# From a delete's reply to the text gone from the local files. Measured (tests/integration/
# test_forgetting_on_disk.py): ~1-3 s on a small data dir; the bound leaves room for an
# AOF rewrite already running and a milvus-lite collection of ~100k rows to rewrite.
FORGET_BOUND_S = 30.0
_CHUNK = 1 << 20


class FilePurge:
    """Runs purges in a background thread of the process that deletes: at most one at a
    time, and every ``request`` is followed by a purge that starts after it."""

    def __init__(self, aof: AppendOnlyFile, vectors: Purging | None,
                 bound_s: float = FORGET_BOUND_S, idle_s: float = 60.0) -> None:
        self._aof = aof
        self._vectors = vectors
        self._bound_s = bound_s
        self._idle_s = idle_s
        self._lock = threading.Lock()
        self._wanted = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._thread: threading.Thread | None = None
        self.purges = 0

    def request(self) -> None:
        """A delete happened: purge soon (the caller does not wait)."""
        with self._lock:
            self._idle.clear()
            self._wanted.set()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="strata-file-purge",
                                                daemon=True)
                self._thread.start()

    def wait_idle(self, timeout_s: float) -> bool:
        """True once every requested purge has run (tests, shutdown)."""
        return self._idle.wait(timeout_s)

    def _run(self) -> None:
        while True:
            if not self._wanted.wait(self._idle_s):
                with self._lock:  # exit only if no request slipped in meanwhile
                    if not self._wanted.is_set():
                        self._thread = None
                        return
                continue
            self._wanted.clear()
            try:
                self.purge_now()
            except Exception:  # a background thread: log; the next delete retries
                logger.exception("purging deleted text from the files failed")
            with self._lock:
                if not self._wanted.is_set():
                    self._idle.set()

    def purge_now(self) -> PurgeReport | None:
        """Compact the vector store, then rewrite the AOF and wait for the rewrite."""
        started = time.monotonic()
        report = self._vectors.purge_deleted() if self._vectors is not None else None
        deadline = started + self._bound_s
        # a rewrite that forked before our deletes would keep their text: wait it out
        while self._aof.rewrite() == "in_progress" and time.monotonic() < deadline:
            time.sleep(0.05)
        while self._aof.rewrite_pending() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.purges += 1
        logger.info("deleted text purged from the files in %.2f s (%s)",
                    time.monotonic() - started, report)
        return report


class Residue(BaseModel):
    """A file that still holds the phrase, and how many times."""

    path: str  # relative to the data dir
    count: int


class ForgetCheck(BaseModel):
    """What ``wait_forgotten`` found: the files still holding the phrase when it stopped."""

    phrase_bytes: int
    remaining: list[Residue] = Field(default_factory=list)
    waited_s: float = 0.0
    bound_s: float = FORGET_BOUND_S
    roots: list[str] = Field(default_factory=list)
    files_scanned: int = 0  # in the last pass
    bytes_scanned: int = 0

    @property
    def forgotten(self) -> bool:
        """Nothing remains in files that were scanned: a scan of no file proves nothing."""
        return self.files_scanned > 0 and not self.remaining


def _files(roots: Sequence[Path]) -> Iterator[Path]:
    for root in roots:
        if root.is_file():
            yield root
        elif root.is_dir():
            yield from (p for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink())


def _count(path: Path, needle: bytes) -> int:
    """Occurrences of ``needle`` in the file, read in chunks. Each chunk is searched with
    the previous one's last ``len(needle) - 1`` bytes, so a copy across two chunks is found
    and none is counted twice."""
    found, tail = 0, b""
    try:
        with path.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                window = tail + chunk
                found += window.count(needle)
                keep = len(needle) - 1
                tail = window[-keep:] if keep else b""
    except OSError:  # removed while scanning (an old AOF or segment file): nothing left
        return 0
    return found


def data_files(data_dir: Path, roots: Sequence[str] = ("redis", "milvus.db")) -> list[Path]:
    """The files a scan of ``data_dir``'s ``roots`` reads (none: nothing can be verified)."""
    base = Path(data_dir)
    return list(_files([base / r for r in roots]))


def _scan(data_dir: Path, phrase: str, roots: Sequence[str]
          ) -> tuple[list[Residue], int, int]:
    """The residue, and how many files and bytes were read."""
    if not phrase:
        raise ValueError("an empty phrase matches everything")
    needle = phrase.encode("utf-8")
    base = Path(data_dir)
    out, files, size = [], 0, 0
    for path in data_files(base, roots):
        files += 1
        try:
            size += path.stat().st_size
        except OSError:  # removed meanwhile (an old AOF or segment file)
            continue
        count = _count(path, needle)
        if count:
            out.append(Residue(path=str(path.relative_to(base)), count=count))
    return out, files, size


def find_residue(data_dir: Path, phrase: str, roots: Sequence[str] = ("redis", "milvus.db")
                 ) -> list[Residue]:
    """The files under ``data_dir``'s ``roots`` that hold ``phrase`` (UTF-8 bytes, case
    sensitive), with their counts. ``roots=(".",)`` scans the whole data dir."""
    return _scan(data_dir, phrase, roots)[0]


def wait_forgotten(data_dir: Path, phrase: str, bound_s: float = FORGET_BOUND_S,
                   poll_s: float = 0.5, roots: Sequence[str] = ("redis", "milvus.db")
                   ) -> ForgetCheck:
    """Poll ``find_residue`` until nothing remains or ``bound_s`` has passed."""
    started = time.monotonic()
    while True:
        remaining, files, size = _scan(data_dir, phrase, roots)
        waited = time.monotonic() - started
        if not remaining or waited >= bound_s:
            return ForgetCheck(phrase_bytes=len(phrase.encode("utf-8")), remaining=remaining,
                               waited_s=round(waited, 2), bound_s=bound_s, roots=list(roots),
                               files_scanned=files, bytes_scanned=size)
        time.sleep(poll_s)
