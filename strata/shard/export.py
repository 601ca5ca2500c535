"""``ShardExport``: the read behind an export (and the erasure check) of one user — every
long-term memory of the scope, every status, as the durable store holds it once the shard
has written its pending reinforcements (access counts).

The ingress streams an export user by user, one call to each user's shard, so one user's
memories are in memory at a time; ``strata.layers.transfer.read_rows`` pages through each
collection (``PAGE`` rows a query). The format is ``strata.portability``'s.
"""

from __future__ import annotations

from strata.layers.records import from_record
from strata.layers.transfer import read_rows
from strata.models import LONG_TERM, MemoryItem, Scope
from strata.shard.longterm import LazyLongTerm, ShardMemories
from strata.stores.hot import HotIndexStore
from strata.stores.ports import VectorStore

__all__ = ["ShardExport"]


class ShardExport:
    """A user's memories out of the shard that owns the user."""

    def __init__(self, longterm: LazyLongTerm, memories: ShardMemories) -> None:
        self._longterm = longterm
        self._memories = memories

    def _durable(self) -> VectorStore:
        """The store under the hot index (what an export reads: every status, every row)."""
        vectors = self._longterm.get().vectors
        return vectors.inner if isinstance(vectors, HotIndexStore) else vectors

    def export_memories(self, scope: Scope, viewer: str | None = None) -> list[MemoryItem]:
        """Every memory of ``scope`` that ``viewer`` may see (``Principal.viewer``; None:
        all), facts then episodes then procedures, each collection by creation time."""
        vectors = self._durable()
        self._memories.persist_hot()  # the access counts recalls gathered, written first
        return [item for layer in LONG_TERM
                for item in map(from_record, read_rows(vectors, layer.collection, scope))
                if item.visible_to(viewer)]
