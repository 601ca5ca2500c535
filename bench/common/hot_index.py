"""The shards' hot index, watched from outside: ``GET /v1/admin/hot-index`` (admin key).

Each shard reports ``users``, ``memories``, ``bytes``, ``max_bytes``, ``loads``,
``evictions`` (``strata.stores.hot.HotIndexStats``). ``HotIndexWatch`` samples them while a
benchmark touches users (between requests, none in flight), keeping each shard's peak and
every sample over the cap, so it can say whether the byte cap held once more users were
touched than fit. A shard may exceed its cap only while it holds a single user (the one
being served is never evicted).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

__all__ = ["HOT_INDEX_PATH", "HotIndexWatch", "fetch_shards"]

HOT_INDEX_PATH = "/v1/admin/hot-index"


def fetch_shards(base: str, headers: dict[str, str]) -> list[dict[str, Any]] | None:
    """Per-shard statistics, or None when the server has no such endpoint (or refuses)."""
    try:
        resp = httpx.get(f"{base}{HOT_INDEX_PATH}", headers=headers, timeout=60)
    except httpx.HTTPError:
        return None
    if resp.status_code != 200:
        return None
    data = resp.json()
    shards = data.get("shards", [data]) if isinstance(data, dict) else data
    return [s for s in shards if isinstance(s, dict) and "bytes" in s and "users" in s] or None


@dataclass
class _Peak:
    bytes: int = 0
    users: int = 0
    # samples over the cap while holding more than one user: (label, bytes, users)
    over_cap: list[tuple[str, int, int]] = field(default_factory=list)


@dataclass
class HotIndexWatch:
    """Samples of the hot index statistics; ``available`` is False without the endpoint."""

    base: str
    headers: dict[str, str]
    samples: int = 0
    available: bool = True
    peaks: dict[int, _Peak] = field(default_factory=dict)
    last: list[dict[str, Any]] = field(default_factory=list)

    def sample(self, label: str = "") -> list[dict[str, Any]] | None:
        """Read the statistics now (``label`` names the moment in the verdict)."""
        if not self.available:
            return None
        shards = fetch_shards(self.base, self.headers)
        if shards is None:
            self.available = False
            return None
        self.samples += 1
        self.last = shards
        for i, s in enumerate(shards):
            peak = self.peaks.setdefault(int(s.get("shard", i)), _Peak())
            nbytes, users = int(s["bytes"]), int(s["users"])
            peak.bytes, peak.users = max(peak.bytes, nbytes), max(peak.users, users)
            cap = int(s.get("max_bytes") or 0)
            if cap and nbytes > cap and users > 1:
                peak.over_cap.append((label, nbytes, users))
        return shards

    def summary(self, touched: int) -> dict[str, Any] | None:
        """The last sample's totals, bytes per hot user and memory, and the cap verdict."""
        if not self.available or not self.last:
            return None
        shards = self.last
        users = sum(int(s["users"]) for s in shards)
        memories = sum(int(s.get("memories", 0)) for s in shards)
        nbytes = sum(int(s["bytes"]) for s in shards)
        caps = {int(s.get("shard", i)): int(s.get("max_bytes") or 0)
                for i, s in enumerate(shards)}
        evictions = sum(int(s.get("evictions", 0)) for s in shards)
        return {
            "path": HOT_INDEX_PATH, "samples": self.samples, "shards": shards,
            "users_held": users, "users_touched": touched, "memories": memories,
            "bytes": nbytes, "bytes_per_user": nbytes / users if users else None,
            "bytes_per_memory": nbytes / memories if memories else None,
            "evictions": evictions,
            "peaks": {k: {"bytes": p.bytes, "users": p.users, "cap": caps.get(k),
                          "over_cap": [{"at": at, "bytes": b, "users": u}
                                       for at, b, u in p.over_cap]}
                      for k, p in self.peaks.items()},
            # more users touched than held: the cap (or the TTL) made room
            "cap_exercised": evictions > 0 or touched > users,
            "cap_held": all(not p.over_cap for p in self.peaks.values()),
        }
