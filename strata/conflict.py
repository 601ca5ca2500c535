"""The one place that decides what a new fact does to the facts already stored.

Rules:
- same key, same value → reinforce the current fact (no duplicate);
- explicit override ("之前说的不算", "forget what I said", "moved to") → the new value is
  current; the old versions are kept as ``superseded`` (valid_to, superseded_by);
- implicit change → keep both active, the newer ranked higher;
- a new value with confidence < 0.6 never overrides a more confident one → ``pending``;
- an inferred fact (the agent's guess) is never a stated one: whatever its intent, it waits
  in the observation area, and never overrides a stated value;
- inferred or low-confidence facts wait in the observation area until confirmed twice; a
  plain statement of the same value by the user confirms them at once (``confirmed``);
- a cold value said again is the current value again (it is reinforced and rewarmed);
- scope tags separate partial conflicts (Python in general, Java in project X);
- a value an admin set (``source: admin``) changes only by an admin: another value waits as
  ``pending`` beside it, whatever its intent.

The versions a decision sees are the writer's lane's (``FactStore.apply``): another agent's
private fact is never superseded nor confirmed by this one.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from pydantic import BaseModel, Field

from strata.extract.base import Candidate, Intent
from strata.models import MemoryItem, MemoryStatus, Source

LIVE = (MemoryStatus.ACTIVE, MemoryStatus.COLD)  # a cold value is current, only faded

__all__ = ["Action", "ConflictResolver", "Decision"]


class Action(str, Enum):
    INSERT = "insert"            # a new current fact
    SUPERSEDE = "supersede"      # new current fact; ``affected`` become superseded
    KEEP_BOTH = "keep_both"      # new current fact; ``affected`` stay active, ranked lower
    REINFORCE = "reinforce"      # same value again: bump ``affected[0]``
    PENDING = "pending"          # a weaker contradiction, stored as pending
    OBSERVE = "observe"          # low confidence: stored in the observation area
    PROMOTE = "promote"          # an observation confirmed enough times becomes active
    DUPLICATE = "duplicate"      # this very statement was applied before (a redelivery)


class Decision(BaseModel):
    action: Action
    affected: list[str] = Field(default_factory=list)
    # observations of the same value that this stated fact confirms (they are retired)
    confirmed: list[str] = Field(default_factory=list)
    reason: str


def _same_value(a: str | None, b: str | None) -> bool:
    return (a or "").strip().lower() == (b or "").strip().lower()


class ConflictResolver:
    """Decides, for one candidate fact and the stored versions of its key, what happens."""

    def __init__(self, override_min_confidence: float = 0.6, confirmations: int = 2) -> None:
        self.override_min_confidence = override_min_confidence
        self.confirmations = confirmations

    def decide(self, candidate: Candidate, versions: Sequence[MemoryItem]) -> Decision:
        """``versions``: every stored fact with the candidate's key (any status, any tags)."""
        tags = sorted(candidate.scope_tags)
        same_scope = [v for v in versions if sorted(v.scope_tags) == tags]
        current = [v for v in same_scope if v.status in LIVE]
        match = next((v for v in current if _same_value(v.value, candidate.value)), None)
        if match is not None:
            return Decision(action=Action.REINFORCE, affected=[match.id],
                            reason="the same value is already current")
        admins = [v for v in current if v.source is Source.ADMIN]
        if admins and candidate.source is not Source.ADMIN:
            return Decision(action=Action.PENDING, affected=[v.id for v in admins],
                            reason="an admin set this value; only an admin key changes it")
        inferred = candidate.source is Source.INFERRED
        weak = inferred or candidate.confidence < self.override_min_confidence
        if inferred or (weak and candidate.intent is not Intent.REMEMBER):
            return self._weak(candidate, same_scope, current)
        confirmed = [v.id for v in same_scope if v.status is MemoryStatus.OBSERVATION
                     and _same_value(v.value, candidate.value)]
        if candidate.intent in (Intent.OVERRIDE, Intent.REMEMBER) and current:
            return Decision(action=Action.SUPERSEDE, affected=[v.id for v in current],
                            confirmed=confirmed,
                            reason="explicit override replaces the current value")
        if current:
            return Decision(action=Action.KEEP_BOTH, affected=[v.id for v in current],
                            confirmed=confirmed,
                            reason="implicit change: both kept, the newer ranks higher")
        return Decision(action=Action.INSERT, confirmed=confirmed,
                        reason="a stated fact that confirms what was observed" if confirmed
                        else "a new fact")

    def _weak(self, candidate: Candidate, same_scope: Sequence[MemoryItem],
              current: Sequence[MemoryItem]) -> Decision:
        stated = [v for v in current if v.source is not Source.INFERRED]
        if candidate.source is Source.INFERRED and stated:
            return Decision(action=Action.PENDING, affected=[v.id for v in stated],
                            reason="an inferred value never overrides a stated one")
        observed = [v for v in same_scope if v.status is MemoryStatus.OBSERVATION
                    and _same_value(v.value, candidate.value)]
        if observed:
            seen = int(observed[0].metadata.get("mentions", 1)) + 1
            if seen >= 1 + self.confirmations:
                return Decision(action=Action.PROMOTE, affected=[observed[0].id],
                                reason=f"observed {seen} times: confirmed")
            return Decision(action=Action.REINFORCE, affected=[observed[0].id],
                            reason=f"observation seen {seen} times; not yet confirmed")
        stronger = [v for v in current if v.confidence > candidate.confidence]
        if stronger:
            return Decision(action=Action.PENDING, affected=[v.id for v in stronger],
                            reason="a low-confidence value does not override a confident one")
        return Decision(action=Action.OBSERVE, reason="low confidence or inferred: observe first")
