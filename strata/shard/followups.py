"""Proactive recall in the user's shard: the follow-ups to propose now, and what the user
made of them (the choice itself is ``strata.layers.proactive``'s)."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

from strata.errors import NotFound
from strata.layers.proactive import (
    FOREVER_S,
    FollowUp,
    FollowUpPolicy,
    choose,
    from_plans,
    from_task_states,
)
from strata.models import Collection, MemoryStatus, RecordFilter, Scope, utcnow
from strata.settings import Settings
from strata.shard.longterm import LazyLongTerm
from strata.stores.keys import SessionRef
from strata.stores.redis_ports import FollowUpState, SessionIndex, SessionLog

__all__ = ["ShardFollowUps"]


class ShardFollowUps:
    """Open threads of a user — plan episodes and archived sessions' task state — proposed
    at most a few per session, each topic then quiet for the cooldown. ``lock``: the
    long-term memory's (the follow-up state is written under it)."""

    def __init__(self, settings: Settings, longterm: LazyLongTerm, lock: threading.RLock, *,
                 log: SessionLog, index: SessionIndex, state: FollowUpState) -> None:
        self._settings = settings
        self._log = log
        self._index = index
        self._state = state
        self._longterm = longterm
        self._lock = lock

    def _policy(self) -> FollowUpPolicy:
        return FollowUpPolicy(per_session=self._settings.followups_per_session,
                              cooldown_s=self._settings.followup_cooldown_s,
                              min_age_s=self._settings.followup_min_age_s)

    def _candidates(self, scope: Scope, now: datetime, policy: FollowUpPolicy,
                    viewer: str | None) -> list[FollowUp]:
        plans = self._longterm.get().vectors.query(Collection.EPISODES, scope, RecordFilter(
            statuses=[MemoryStatus.ACTIVE], payload_equals={"metadata.type": "plan"},
            visible_to=viewer), 200)
        states = []
        for ref, at in self._index.archived_of(scope):
            snap = self._log.snapshot(ref)
            owner = snap[0].get("agent") if snap is not None else None
            if viewer is not None and owner and owner != viewer:
                continue  # another agent's session: its open questions are not this one's
            if snap is not None and snap[0].get("task_state"):
                states.append((ref.session_id, snap[0]["task_state"],
                               datetime.fromtimestamp(at, now.tzinfo)))
        return [*from_plans(plans, now, policy), *from_task_states(states, now, policy)]

    def follow_ups(self, scope: Scope, session_id: str | None, limit: int,
                   viewer: str | None = None) -> list[FollowUp]:
        """At most ``limit`` follow-ups for the user now (fewer once the session had its
        share); each proposed topic is then quiet for the cooldown."""
        policy, now = self._policy(), utcnow()
        ref = SessionRef(scope, session_id) if session_id else None
        with self._lock:
            quiet, outcomes, made = self._state.state(scope, ref)
            left = policy.per_session - made if ref else policy.per_session
            chosen = choose(self._candidates(scope, now, policy, viewer), quiet, now, limit,
                            left, outcomes)
            self._state.proposed(scope, ref, [f.topic for f in chosen],
                                 now.timestamp() + policy.cooldown_s,
                                 int(self._settings.session_ttl_s * 4))
        return chosen

    def follow_up_feedback(self, scope: Scope, topic: str, outcome: str) -> dict[str, Any]:
        """``used``: never proposed again; ``dismissed``: quiet for 30 days. Either way the
        kind's record shapes the next choice."""
        policy, now = self._policy(), utcnow()
        quiet, _, _ = self._state.state(scope, None)
        if topic not in quiet:
            raise NotFound(f"follow-up {topic!r} was never proposed to this user")
        kind = "open_task" if topic.startswith("task:") else "plan"
        until = now.timestamp() + (FOREVER_S if outcome == "used" else policy.dismissed_s)
        self._state.outcome(scope, topic, kind, outcome, until)
        return {"topic": topic, "outcome": outcome,
                "quiet_until": datetime.fromtimestamp(until, now.tzinfo).isoformat()}
