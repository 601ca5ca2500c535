"""A hot table's token vectors on local disk (``TokenSpill``): appended once, read back by
offset for a recall's candidates, zeroed when their row dies."""

from __future__ import annotations

import os
import tempfile
import threading
from typing import IO

__all__ = ["TokenSpill"]


class TokenSpill:
    """Packed token vectors kept in an anonymous local file instead of the heap.

    An episode's token vectors are ~12.5 KB for a LoCoMo turn (32 tokens x 384 int8 + a
    float16 scale each: already quantised), three quarters of what a hot memory costs, but a
    recall reads those of its late-interaction candidates only (tens of rows). So a table
    may append them to this file and keep an offset: a recall reads its candidates' bytes
    back with ``os.pread`` (from the page cache: the file was just written), the same bytes,
    so the scores are the same. The file is unlinked at creation (``TemporaryFile``): it
    vanishes with the table or the process, and holds nothing a restart could read.
    Append-only; a table that compacts writes a fresh one. Thread-safe."""

    def __init__(self, directory: str | None = None) -> None:
        self.directory = directory
        self._file: IO[bytes] | None = None
        self._lock = threading.Lock()
        self.disk_bytes = 0

    def append(self, blob: bytes) -> int:
        """Store ``blob``; its offset."""
        with self._lock:
            if self._file is None:
                self._file = tempfile.TemporaryFile(dir=self.directory)  # noqa: SIM115 (kept open)
            offset = self.disk_bytes
            os.pwrite(self._file.fileno(), blob, offset)
            self.disk_bytes += len(blob)
            return offset

    def erase(self, offset: int, length: int) -> None:
        """Overwrite a dead row's bytes with zeros: a deleted memory's token vectors do not
        wait for a compaction to leave the file."""
        with self._lock:
            if self._file is not None and length:
                os.pwrite(self._file.fileno(), bytes(length), offset)

    def read(self, offset: int, length: int) -> bytes:
        with self._lock:
            assert self._file is not None
            return os.pread(self._file.fileno(), length, offset)

    def fresh(self) -> TokenSpill:
        """An empty spill in the same directory (for a compacted table)."""
        return TokenSpill(self.directory)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __del__(self) -> None:
        self.close()
