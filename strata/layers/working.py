"""Working memory of one session: a verbatim window, a rolling summary, pinned turns and a
JSON task state, all plain data so a snapshot is just ``model_dump``.

Rules: the last N turns (default 8, 6–10) stay verbatim; older turns are
folded into a summary that keeps numbers, dates, names and preferences; turns the user
stresses ("记住", "重要", "remember", "important") are pinned and never summarized away;
raw turns are held to ≈1.5k tokens and the summary to ≈800.
"""

from __future__ import annotations

import copy
import re
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from strata.errors import InvalidInput
from strata.layers.summarize import Summarizer
from strata.models import Role, Turn, utcnow
from strata.tokens import count_tokens

__all__ = ["ContextAside", "SessionState", "WorkingMemory", "WorkingMemoryConfig", "is_pinned",
           "merge_patch"]

MAX_SET_ASIDE = 8  # contexts a session keeps aside (the least recently left go first)

_PIN = re.compile(
    r"记住|记得|别忘|不要忘|重要|务必|一定要|\bremember\b|\bimportant\b|\bdon'?t forget\b|"
    r"\bmake sure\b|\bnote that\b|\bkeep in mind\b", re.I)


def is_pinned(role: Role, content: str) -> bool:
    """A user turn that asks to be remembered or says it matters is pinned."""
    return role is Role.USER and bool(_PIN.search(content))


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 JSON merge patch: objects merge recursively, ``null`` deletes a key."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class WorkingMemoryConfig(BaseModel):
    """Budgets of one session's working memory (the window is 6–10 turns, 8 by default)."""

    window_turns: int = Field(default=8, ge=6, le=10)
    raw_token_budget: int = Field(default=1500, ge=100)
    summary_token_budget: int = Field(default=800, ge=50)
    pinned_token_budget: int = Field(default=400, ge=0)
    task_state_max_bytes: int = Field(default=16 * 1024, ge=256)


def _task_state() -> dict[str, Any]:
    return {"goal": None, "done_steps": [], "open_questions": []}


class ContextAside(BaseModel):
    """The working memory of a context the session left (restored when it comes back)."""

    window: list[Turn] = Field(default_factory=list)
    summary: str = ""
    pinned: list[Turn] = Field(default_factory=list)
    task_state: dict[str, Any] = Field(default_factory=_task_state)


class SessionState(BaseModel):
    """Everything a session's working memory is; snapshots are this, serialized."""

    tenant: str
    user_id: str
    session_id: str
    window: list[Turn] = Field(default_factory=list)
    summary: str = ""
    summarized_turn_ids: list[str] = Field(default_factory=list)
    pinned: list[Turn] = Field(default_factory=list)
    task_state: dict[str, Any] = Field(default_factory=_task_state)
    turn_count: int = 0
    # the project / business line now, and the working memory of those it left ("": none)
    context: str | None = None
    set_aside: dict[str, ContextAside] = Field(default_factory=dict)
    agent: str | None = None  # the agent whose session this is (its first turn's)
    recent_turn_ids: list[str] = Field(default_factory=list)
    created_at: datetime = Field(default_factory=utcnow)
    last_active_at: datetime = Field(default_factory=utcnow)
    closed: bool = False
    wal_id: str = "0"
    extracted_upto: str = "0"


class WorkingMemory:
    """The rules applied to one ``SessionState``."""

    RECENT_IDS = 64  # turn ids remembered for idempotent retries

    def __init__(self, state: SessionState, config: WorkingMemoryConfig,
                 summarizer: Summarizer) -> None:
        self.state = state
        self._config = config
        self._summarizer = summarizer

    def has_turn(self, turn_id: str) -> bool:
        return turn_id in self.state.recent_turn_ids

    def append(self, turn: Turn, received_at: datetime | None = None) -> None:
        """Add a turn; evict the oldest into the summary when the window overflows. A turn
        of another context than the session's switches context first (``switch_context``)."""
        state = self.state
        if turn.context is not None and turn.context != state.context:
            self.switch_context(turn.context)
        if state.agent is None and turn.agent is not None:
            state.agent = turn.agent
        state.window.append(turn)
        state.turn_count += 1
        state.recent_turn_ids = [*state.recent_turn_ids, turn.turn_id][-self.RECENT_IDS:]
        state.last_active_at = received_at or utcnow()
        if turn.pinned:
            state.pinned.append(turn)
            self._fit_pinned()
        evicted: list[Turn] = []
        while len(state.window) > self._config.window_turns or (
            len(state.window) > 1 and self._window_tokens() > self._config.raw_token_budget
        ):
            evicted.append(state.window.pop(0))
        if evicted:
            state.summary = self._summarizer.summarize(
                state.summary, evicted, self._config.summary_token_budget)
            state.summarized_turn_ids.extend(t.turn_id for t in evicted)

    def switch_context(self, context: str | None) -> None:
        """The session moves to another project / business line: the working memory of the
        one it leaves (window, summary, pinned turns, task state) is set aside, not mixed
        in, and the new one's comes back if the session was there before (else it starts
        empty). Long-term memories are not touched: recall ranks them by context."""
        state = self.state
        left = ContextAside(window=state.window, summary=state.summary, pinned=state.pinned,
                            task_state=state.task_state)
        state.set_aside.pop(state.context or "", None)
        if left.window or left.summary or left.pinned or left.task_state != _task_state():
            state.set_aside[state.context or ""] = left
        while len(state.set_aside) > MAX_SET_ASIDE:
            state.set_aside.pop(next(iter(state.set_aside)))
        back = state.set_aside.pop(context or "", None) or ContextAside()
        state.window, state.summary = back.window, back.summary
        state.pinned, state.task_state = back.pinned, back.task_state
        state.context = context

    def _window_tokens(self) -> int:
        return sum(count_tokens(t.content) for t in self.state.window)

    def _fit_pinned(self) -> None:
        """Pinned turns are kept newest-first within their own budget."""
        pinned = self.state.pinned
        while len(pinned) > 1 and sum(count_tokens(t.content) for t in pinned) > (
                self._config.pinned_token_budget):
            pinned.pop(0)

    def patch_task_state(self, patch: dict[str, Any],
                         received_at: datetime | None = None) -> dict[str, Any]:
        """Apply a JSON merge patch to the task state; refuse one that makes it too big."""
        merged: dict[str, Any] = merge_patch(self.state.task_state, patch)
        size = len(SessionState.model_construct(task_state=merged).model_dump_json(
            include={"task_state"}).encode())
        if size > self._config.task_state_max_bytes:
            raise InvalidInput(f"task state would be {size} bytes; the limit is "
                               f"{self._config.task_state_max_bytes}")
        self.state.task_state = merged
        self.state.last_active_at = received_at or utcnow()
        return merged

    def tokens(self) -> int:
        """Tokens of the whole working memory (window + summary + pinned outside the window)."""
        in_window = {t.turn_id for t in self.state.window}
        pinned = sum(count_tokens(t.content) for t in self.state.pinned
                     if t.turn_id not in in_window)
        return self._window_tokens() + count_tokens(self.state.summary) + pinned
