"""``RedisEntityEditStore``: the ``EntityEditStore`` of a deployment — one
``entity-edits:{scope}`` hash per user (``strata.stores.keys``), a field per lane holding
that lane's ``EntityEdits`` as JSON. No expiry: edits last as long as the user."""

from __future__ import annotations

from strata.entities.overlay import EntityEdits
from strata.models import Scope
from strata.stores import keys
from strata.stores.redis.connection import RedisConnection, redis_errors

__all__ = ["RedisEntityEditStore"]


class RedisEntityEditStore:
    """Each user's entity edits in Redis, under the connection's prefix."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn
        self._r = conn.client

    def _key(self, scope: Scope) -> str:
        return self._conn.key(keys.entity_edits(scope))

    def load(self, scope: Scope, lane: str) -> EntityEdits:
        with redis_errors("entity edits read"):
            raw = self._r.hget(self._key(scope), lane)
        return EntityEdits.model_validate_json(raw) if raw is not None else EntityEdits()

    def save(self, scope: Scope, lane: str, edits: EntityEdits) -> None:
        with redis_errors("entity edits write"):
            if edits.empty():
                self._r.hdel(self._key(scope), lane)
            else:
                self._r.hset(self._key(scope), lane, edits.model_dump_json())

    def lanes(self, scope: Scope) -> dict[str, EntityEdits]:
        with redis_errors("entity edits read"):
            raw = self._r.hgetall(self._key(scope))
        return {lane.decode(): EntityEdits.model_validate_json(value)
                for lane, value in sorted(raw.items())}

    def delete(self, scope: Scope) -> bool:
        with redis_errors("entity edits delete"):
            return bool(self._r.delete(self._key(scope)))
