"""Where a user's sessions live: the shard that owns the user."""

from __future__ import annotations

import bisect
import hashlib

from strata.errors import InvalidInput
from strata.models import Scope

__all__ = ["ShardRing"]


class ShardRing:
    """Consistent hashing of users onto shards (virtual nodes smooth the spread)."""

    def __init__(self, shards: int, vnodes: int = 64) -> None:
        if shards < 1:
            raise InvalidInput("a shard ring needs at least one shard")
        self.shards = shards
        points = sorted((self._hash(f"shard-{s}#{v}"), s) for s in range(shards)
                        for v in range(vnodes))
        self._keys = [p for p, _ in points]
        self._owners = [s for _, s in points]

    @staticmethod
    def _hash(value: str) -> int:
        return int.from_bytes(hashlib.blake2b(value.encode(), digest_size=8).digest(), "big")

    def shard_for(self, scope: Scope) -> int:
        index = bisect.bisect(self._keys, self._hash(scope.key)) % len(self._keys)
        return self._owners[index]
