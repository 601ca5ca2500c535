"""A hot user's tables on local disk, so that the user's next first touch reads one file
instead of the vector store.

A cold user's first recall loads their memories from Milvus: on milvus-lite that assembles
and materialises every row one column at a time (~1.1-1.9 s for a 700-turn user, most of a
cold first touch). A shard that held the user before (evicted under the byte cap or the
TTL, or restarted) can instead read back what it held: ``HotSnapshots`` writes each idle
hot user's tables (``HotTable.state``: records by column, vectors, BM25 postings, token
vectors) to one file, and a later load restores them if the file is still current.

Current means that nothing wrote the user's long-term memory since the snapshot was taken.
Every durable write of a user's memories goes through the shard that owns the user (the
single writer: ``strata.stores.hot``), and that shard marks the user written *before* the
write (``SnapshotMarks.invalidate``): a per-user generation goes up and the snapshot's key
is deleted. A snapshot is sealed with the generation its tables reflect; sealing sets the
key only if the generation is still that one, so a write that raced the seal wins. A load
asks for the generation and the key first; no key, no snapshot.

Forgetting: the file is encrypted (AES-GCM) with a fresh random key per snapshot, kept only
in Redis beside the generation. The write that forgets a memory deletes the key before it
deletes the memory, so every copy of the snapshot that held it, on this node or on one the
user lived on before a ring change, is unreadable from then on (crypto-shredding); this
node's file is also unlinked at once, and a stale file is unlinked when its user next loads.

What it costs: a file of ~14 KB per memory (token vectors are 12.5 KB of it), written by the
shard's periodic sweep for users idle ``idle_s`` and at eviction; one Redis call per write
call of a user's memories; reading a 700-memory user back is ~10 MB from local disk.
"""

from __future__ import annotations

import hashlib
import logging
import marshal
import os
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import suppress
from pathlib import Path
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from strata.models import Collection
from strata.stores.hot_table import HotTable, TokenSpill
from strata.stores.keys import hot_snapshot
from strata.stores.redis.connection import RedisConnection, redis_errors

__all__ = ["HotSnapshots", "MemoryMarks", "RedisMarks", "SnapshotMarks"]

logger = logging.getLogger(__name__)
FORMAT = 2  # the file's layout; a file of another format is ignored (and unlinked)
_MAGIC = b"STRATAHOT"
_HEADER = len(_MAGIC) + 1 + 8 + 12  # magic, format, generation, nonce


class SnapshotMarks(Protocol):
    """Per user (scope key): a write generation and the current snapshot's key, shared by
    every process of the deployment (``RedisMarks``)."""

    def invalidate(self, keys: Iterable[str]) -> dict[str, int]:
        """Each user's generation + 1 and their snapshot key deleted: their new generation."""
        ...

    def current(self, key: str) -> tuple[int, bytes | None]:
        """The user's generation and their snapshot's key (None: no current snapshot)."""
        ...

    def seal(self, key: str, generation: int, secret: bytes) -> bool:
        """Set the snapshot key if the generation is still ``generation``."""
        ...


class MemoryMarks:
    """``SnapshotMarks`` in this process (tests, a single-process library use)."""

    def __init__(self) -> None:
        self._marks: dict[str, tuple[int, bytes | None]] = {}
        self._lock = threading.Lock()

    def invalidate(self, keys: Iterable[str]) -> dict[str, int]:
        with self._lock:
            out = {}
            for key in set(keys):
                generation = self._marks.get(key, (0, None))[0] + 1
                self._marks[key] = (generation, None)
                out[key] = generation
            return out

    def current(self, key: str) -> tuple[int, bytes | None]:
        with self._lock:
            return self._marks.get(key, (0, None))

    def seal(self, key: str, generation: int, secret: bytes) -> bool:
        with self._lock:
            if self._marks.get(key, (0, None))[0] != generation:
                return False
            self._marks[key] = (generation, secret)
            return True


_INVALIDATE = "redis.call('hdel', KEYS[1], 'k') return redis.call('hincrby', KEYS[1], 'g', 1)"
_SEAL = ("if tonumber(redis.call('hget', KEYS[1], 'g') or '0') == tonumber(ARGV[1]) then "
         "redis.call('hset', KEYS[1], 'k', ARGV[2]) return 1 end return 0")


class RedisMarks:
    """``SnapshotMarks`` in Redis: a hash ``hotsnap:{scope key}`` (``keys.hot_snapshot``) of
    ``g`` (the generation) and ``k`` (the snapshot's key, hex), changed by scripts."""

    def __init__(self, connection: RedisConnection) -> None:
        self._c = connection
        self._invalidate = connection.client.register_script(_INVALIDATE)
        self._seal = connection.client.register_script(_SEAL)

    def invalidate(self, keys: Iterable[str]) -> dict[str, int]:
        users = sorted(set(keys))
        with redis_errors("hot snapshot invalidation"):
            pipe = self._c.client.pipeline(transaction=False)
            for key in users:
                self._invalidate(keys=[self._c.key(hot_snapshot(key))], client=pipe)
            return {key: int(g) for key, g in zip(users, pipe.execute(), strict=True)}

    def current(self, key: str) -> tuple[int, bytes | None]:
        with redis_errors("hot snapshot read"):
            generation, secret = self._c.client.hmget(self._c.key(hot_snapshot(key)),
                                                      ["g", "k"])
        return int(generation or 0), bytes.fromhex(secret.decode()) if secret else None

    def seal(self, key: str, generation: int, secret: bytes) -> bool:
        with redis_errors("hot snapshot seal"):
            return bool(self._seal(keys=[self._c.key(hot_snapshot(key))],
                                   args=[generation, secret.hex()]))


class HotSnapshots:
    """The snapshot files of one shard's hot users, in ``directory`` (node-local).
    ``identity`` names what the vectors were made with (the embedding model and its
    dimension): a file made under another identity is not used. ``max_bytes``: the oldest
    files go when the directory holds more (``prune``, at most every ``prune_every_s``)."""

    def __init__(self, directory: str | Path, marks: SnapshotMarks, identity: str,
                 max_bytes: int = 4 * 2**30, prune_every_s: float = 300.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.marks = marks
        self._identity = identity.encode("utf-8")
        self._max_bytes = max_bytes
        self._prune_every = prune_every_s
        self._clock = clock
        self._pruned_at: float | None = None

    def prune(self) -> int:
        """Unlink the oldest snapshot files while the directory holds more than the cap,
        and temporary files a crash left (older than ``prune_every_s``); how many went.
        At most once every ``prune_every_s`` (it lists the directory)."""
        now = self._clock()
        if self._pruned_at is not None and now - self._pruned_at < self._prune_every:
            return 0
        self._pruned_at = now
        files, removed, wall = [], 0, time.time()
        with os.scandir(self.directory) as entries:
            for entry in entries:
                with suppress(FileNotFoundError):
                    stat = entry.stat()
                    if entry.name.endswith(".snap"):
                        files.append((stat.st_mtime, stat.st_size, entry.path))
                    elif entry.name.endswith(".tmp") and wall - stat.st_mtime > self._prune_every:
                        os.unlink(entry.path)
                        removed += 1
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files):  # the oldest first
            if total <= self._max_bytes:
                break
            with suppress(FileNotFoundError):
                os.unlink(path)
                removed += 1
            total -= size
        return removed

    def _path(self, key: str) -> Path:
        return self.directory / (hashlib.sha256(key.encode("utf-8")).hexdigest()[:40] + ".snap")

    def discard(self, keys: Iterable[str]) -> None:
        """Unlink the users' files on this node (their keys are gone already)."""
        for key in keys:
            with suppress(FileNotFoundError):
                self._path(key).unlink()

    def dump(self, tables: dict[Collection, HotTable]) -> bytes | None:
        """The tables' state as bytes (under the caller's lock: the tables may change after);
        None if a table cannot be written."""
        states = {}
        for collection, table in tables.items():
            state = table.state()
            if state is None:
                return None
            states[collection.value] = state
        return marshal.dumps(states)

    def write(self, key: str, generation: int, dumped: bytes) -> bool:
        """Encrypt and write ``dumped`` (``dump``'s bytes at ``generation``), then seal it;
        False (and no file) if the user was written meanwhile."""
        secret = AESGCM.generate_key(bit_length=256)
        nonce = secrets.token_bytes(12)
        header = _MAGIC + bytes([FORMAT]) + generation.to_bytes(8, "big") + nonce
        sealed = AESGCM(secret).encrypt(nonce, dumped, self._aad(key, header))
        path = self._path(key)
        fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(header + sealed)
            os.replace(tmp, path)
        except BaseException:
            with suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        if self.marks.seal(key, generation, secret):
            return True
        self.discard([key])
        return False

    def _aad(self, key: str, header: bytes) -> bytes:
        return header + b"\0" + key.encode("utf-8") + b"\0" + self._identity

    def read(self, key: str, spill: Callable[[Collection], TokenSpill | None]
             ) -> tuple[dict[Collection, HotTable] | None, int]:
        """(the user's tables from their current snapshot, or None; their generation now).
        ``spill(collection)``: where a restored table keeps its token vectors (as the index
        keeps them). A file that is stale, foreign or damaged is unlinked."""
        generation, secret = self.marks.current(key)
        path = self._path(key)
        if secret is None:
            self.discard([key])
            return None, generation
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            return None, generation
        header, sealed = blob[:_HEADER], memoryview(blob)[_HEADER:]
        stored = int.from_bytes(header[len(_MAGIC) + 1:len(_MAGIC) + 9], "big")
        if not header.startswith(_MAGIC) or header[len(_MAGIC)] != FORMAT \
                or stored != generation:
            self.discard([key])
            return None, generation
        try:
            states = marshal.loads(AESGCM(secret).decrypt(header[-12:], sealed,
                                                          self._aad(key, header)))
        except (InvalidTag, ValueError, EOFError, TypeError) as exc:
            logger.warning("hot snapshot of %s unusable (%s): loading from the store", key, exc)
            self.discard([key])
            return None, generation
        tables = {}
        for collection in Collection:
            state = states.get(collection.value)
            if state is None:
                continue
            tables[collection] = HotTable.from_state(state, spill(collection))
        return tables, generation
