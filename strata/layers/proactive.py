"""Proactive recall: the agent brings up a related memory before the user asks ("你上次提到的
那个项目进展如何" — how is the project you mentioned going?), timed so that it does not
interrupt.

At a session's start (or on request) the agent asks for follow-ups: at most a few of the user's
open threads, each with why it is proposed and where it comes from:

- a plan the user mentioned (an episode of type ``plan``) once its time has come: older than
  ``min_age_s`` (so not in the session that made it) and younger than ``max_age_days``;
- what a closed session's task state left open (``open_questions``, ``next_steps``, ``todo``,
  ``pending``, ``blockers``).

Timing is rationed: a topic proposed once is not proposed again for ``cooldown_s``; at most
``per_session`` proposals in one session; the agent reports ``used`` (never proposed again)
or ``dismissed`` (quiet for ``dismissed_s``), and the kinds of topic this user used more often
than dismissed come first next time. The state (topics' quiet-until times, per-session counts,
outcomes per kind) lives in Redis beside the user's sessions and goes with a user delete.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from strata.layers.memory_models import check_session_id
from strata.models import Provenance, StoredRecord

__all__ = ["OPEN_KEYS", "FollowUp", "FollowUpFeedback", "FollowUpPolicy", "FollowUpRequest",
           "choose", "from_plans", "from_task_states"]

OPEN_KEYS = ("open_questions", "next_steps", "todo", "pending", "blockers")
FOREVER_S = 10 * 365 * 86400


class FollowUpPolicy(BaseModel):
    per_session: int = Field(default=2, ge=0, le=10)
    cooldown_s: float = Field(default=7 * 86400, ge=0)
    dismissed_s: float = Field(default=30 * 86400, ge=0)
    min_age_s: float = Field(default=12 * 3600, ge=0)
    max_age_days: float = Field(default=30, gt=0)


class FollowUp(BaseModel):
    topic: str  # what rationing counts: the plan's memory id, or task:<session id>:<key>
    kind: Literal["plan", "open_task"]
    text: str  # a line the agent may say, in the user's own words where there are any
    reason: str
    since: datetime
    provenance: Provenance = Field(default_factory=Provenance)


class FollowUpRequest(BaseModel):
    """Body of ``POST /v1/users/{user_id}/follow-ups``."""

    model_config = ConfigDict(extra="forbid")

    session_id: str | None = Field(default=None, description=(
        "the session that is starting: its proposals count against the per-session cap"))
    limit: int = Field(default=2, ge=1, le=10)

    _sid = field_validator("session_id")(check_session_id)


class FollowUpFeedback(BaseModel):
    """Body of ``POST /v1/users/{user_id}/follow-ups/{topic}/feedback``."""

    model_config = ConfigDict(extra="forbid")

    outcome: Literal["used", "dismissed"]


def from_plans(records: Sequence[StoredRecord], now: datetime,
               policy: FollowUpPolicy) -> list[FollowUp]:
    """Plans whose time has come, oldest first."""
    out = []
    for record in records:
        said = datetime.fromtimestamp(record.created_at, now.tzinfo)
        age = (now - said).total_seconds()
        if not policy.min_age_s <= age <= policy.max_age_days * 86400:
            continue
        payload = record.payload
        out.append(FollowUp(
            topic=record.id, kind="plan", since=said,
            text=f"Last time you mentioned: \u201c{record.text}\u201d. How did it go?",
            reason=f"a plan the user mentioned {_ago(age)}, not followed up since",
            provenance=Provenance.model_validate(payload.get("provenance") or {})))
    return sorted(out, key=lambda f: f.since)


def from_task_states(states: Sequence[tuple[str, Mapping[str, Any], datetime]],
                     now: datetime, policy: FollowUpPolicy) -> list[FollowUp]:
    """What closed sessions' task states left open: ``(session id, task state, closed at)``."""
    out = []
    for session_id, state, closed in states:
        age = (now - closed).total_seconds()
        if age > policy.max_age_days * 86400:
            continue
        for key in OPEN_KEYS:
            value = state.get(key)
            items = value if isinstance(value, list) else [value] if value else []
            for item in items:
                text = str(item).strip()
                if not text:
                    continue
                out.append(FollowUp(
                    topic=f"task:{session_id}:{key}:{_digest(text)}",
                    kind="open_task", since=closed,
                    text=f"Last session left this open: {text}",
                    reason=f"task state {key!r} of session {session_id}, closed {_ago(age)}",
                    provenance=Provenance(session_id=session_id)))
    return sorted(out, key=lambda f: f.since)


def choose(candidates: Sequence[FollowUp], quiet_until: Mapping[str, float], now: datetime,
           limit: int, left_in_session: int, outcomes: Mapping[str, tuple[int, int]]
           ) -> list[FollowUp]:
    """At most ``min(limit, left_in_session)`` candidates whose topic is not quiet; kinds the
    user used more than dismissed (``outcomes``: kind → (used, dismissed)) first."""
    stamp = now.timestamp()
    ready = [c for c in candidates if quiet_until.get(c.topic, 0.0) <= stamp]

    def preference(f: FollowUp) -> float:
        used, dismissed = outcomes.get(f.kind, (0, 0))
        return (used + 1) / (used + dismissed + 2)  # 0.5 with no history

    ready.sort(key=lambda f: -preference(f))  # stable: oldest first within a kind
    return ready[:max(0, min(limit, left_in_session))]


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def _ago(seconds: float) -> str:
    days = timedelta(seconds=seconds).days
    if days >= 1:
        return f"{days} day{'s' if days != 1 else ''} ago"
    hours = int(seconds // 3600)
    return f"{hours} hour{'s' if hours != 1 else ''} ago" if hours else "just now"
