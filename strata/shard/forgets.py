"""Forgets said in conversation, undoable for a grace period, then final.

A user's "forget …" hides what it names at once (weight 0: recall, lists and exports leave it
out; ``ShardMemories._forget``) and keeps, in the user's forget log, each hidden memory's
weight before. Until ``Settings.forget_grace_s`` has passed the user (or the agent that
heard it) can list the request and undo it: the memories get their weights back and the
request leaves the log, so a late extraction writes what it said again. When the grace
period ends, the shard's sweep deletes the memories still hidden — with their source turns,
the way ``DELETE /v1/users/{user_id}/memories/{id}`` does (``ShardErasure.delete_memory``) —
and the file purge that follows removes the text from the stores' files. The request stays in
the log, emptied, so that what it named is not written back by a late job.
"""

from __future__ import annotations

import logging
import time

from strata.errors import Conflict, NotFound, StrataError
from strata.models import Scope, utcnow
from strata.shard.erasure import ShardErasure
from strata.shard.longterm import LazyLongTerm, ShardMemories
from strata.shard.models import ForgetView
from strata.stores.redis_ports import AuditLog, ForgetLog, ForgetRequest

__all__ = ["ShardForgets"]

logger = logging.getLogger(__name__)
DUE_PER_SWEEP = 100  # scheduled requests one sweep finalises (the rest wait for the next)


class ShardForgets:
    """List, undo and finalise the shard's users' conversational forgets."""

    def __init__(self, shard_id: int, memories: ShardMemories, erasure: ShardErasure,
                 longterm: LazyLongTerm, *, forgets: ForgetLog, audit: AuditLog) -> None:
        self._shard_id = shard_id
        self._memories = memories
        self._erasure = erasure
        self._longterm = longterm
        self._forgets = forgets
        self._audit = audit

    def _view(self, request: ForgetRequest, restored: int | None = None) -> ForgetView:
        final = request.purged_at is not None or not request.forgotten
        return ForgetView(forget_id=request.forget_id, turn_id=request.turn_id,
                          said_at=request.at, target=request.target,
                          agent=request.viewer or None, hidden=len(request.forgotten),
                          state="final" if final else "undoable",
                          undo_until=None if final else request.undo_until,
                          restored=restored)

    def _visible(self, scope: Scope, viewer: str | None) -> list[ForgetRequest]:
        """The user's requests the caller may see: an agent's view, only those said to it."""
        return [r for r in self._forgets.recent(scope) if viewer is None or r.viewer == viewer]

    def list_forgets(self, scope: Scope, viewer: str | None = None) -> list[ForgetView]:
        """The user's forget requests, newest first."""
        return [self._view(r) for r in reversed(self._visible(scope, viewer))]

    def undo_forget(self, scope: Scope, forget_id: str, viewer: str | None = None
                    ) -> ForgetView:
        """Give the memories a forget hid their weights back and drop the request (so what
        it named may be written again). A final one (deleted) is a ``Conflict``."""
        with self._memories.lock:
            request = next((r for r in self._visible(scope, viewer)
                            if r.forget_id == forget_id), None)
            if request is None:
                raise NotFound(f"no forget {forget_id!r} for this user")
            if request.purged_at is not None or not request.forgotten:
                raise Conflict(f"forget {forget_id!r} is final: what it named is deleted "
                               "(or it hid nothing) and cannot come back")
            restored = (self._longterm.get().restore(scope, request.forgotten)
                        if self._longterm.configured else 0)
            self._forgets.remove(scope, [request])
            self._forgets.unschedule(self._shard_id, scope, request.key)
            self._audit.append(scope, action="forget_undone", count=restored,
                               at=utcnow().isoformat())
        return self._view(request, restored=restored)

    def finalise_due(self, now: float | None = None) -> int:
        """Delete what the forgets past their grace period still hide; how many memories
        went. A failure leaves the request scheduled for the next sweep."""
        now = time.time() if now is None else now
        deleted = 0
        for scope, key in self._forgets.due(self._shard_id, now, DUE_PER_SWEEP):
            try:
                deleted += self._finalise(scope, key)
            except StrataError as exc:
                logger.warning("forget %s of %s not finalised yet: %s", key, scope.key,
                               exc.detail)
        return deleted

    def _finalise(self, scope: Scope, key: str) -> int:
        request = next((r for r in self._forgets.recent(scope) if r.key == key), None)
        if request is None or request.purged_at is not None or not self._longterm.configured:
            self._forgets.unschedule(self._shard_id, scope, key)
            return 0  # undone, or the user deleted since
        with self._memories.lock:
            hidden = self._longterm.get().still_forgotten(scope, list(request.forgotten))
        deleted = 0
        for memory_id in hidden:
            try:
                deleted += self._erasure.delete_memory(scope, memory_id)["deleted_versions"]
            except NotFound:
                continue  # went with an earlier one (the same words)
        self._forgets.add(scope, request.model_copy(update={"forgotten": {},
                                                            "purged_at": utcnow()}))
        self._forgets.unschedule(self._shard_id, scope, key)
        self._audit.append(scope, action="forget_final", count=deleted, at=utcnow().isoformat())
        return deleted
