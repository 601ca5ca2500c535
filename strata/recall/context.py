"""The labelled context, fitted to a token budget, in a fixed order: working memory,
long-term memory, knowledge base (the model attends most to the start and the end)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from strata.models import Turn
from strata.recall.scoring import ScoredItem
from strata.tokens import count_tokens

__all__ = ["WORKING_SHARE", "ContextBuilder", "label"]

WORKING_SHARE = 0.6  # working memory may use at most this share of the budget
HEADERS = {"working": "## Working memory", "long_term": "## Long-term memory",
           "knowledge": "## Knowledge base"}


def _date(when: datetime | None) -> str:
    return when.strftime("%Y-%m-%d") if when else "undated"


def label(item: ScoredItem) -> str:
    """``[fact · 2026-11-30] text`` — the source and date of every line."""
    return f"[{item.kind} · {_date(item.created_at)}] {item.text}"


class ContextBuilder:
    """Adds lines block by block while the whole context stays within the budget."""

    def __init__(self, budget_tokens: int) -> None:
        self.budget = budget_tokens
        self._blocks: dict[str, list[str]] = {k: [] for k in HEADERS}
        self.included: list[ScoredItem] = []

    def tokens(self) -> int:
        return count_tokens(self.render())

    def _fits(self, block: str, line: str, limit: int) -> bool:
        trial = {k: list(v) for k, v in self._blocks.items()}
        trial[block].append(line)
        return count_tokens(_render(trial)) <= limit

    def add(self, block: str, line: str, item: ScoredItem | None = None,
            limit: int | None = None) -> bool:
        if not self._fits(block, line, min(self.budget, limit or self.budget)):
            return False
        self._blocks[block].append(line)
        if item is not None:
            self.included.append(item)
        return True

    def add_working(self, window: Sequence[Turn], summary: str, pinned: Sequence[Turn],
                    task_state: dict[str, Any]) -> None:
        """Newest turns first get the space; they are rendered in chronological order."""
        limit = int(self.budget * WORKING_SHARE)
        in_window = {t.turn_id for t in window}
        goal = {k: v for k, v in task_state.items() if v not in (None, [], {}, "")}
        if goal:
            self.add("working", f"[task state] {goal}", limit=limit)
        for turn in pinned:
            if turn.turn_id not in in_window:
                self.add("working", f"[pinned · {_date(turn.created_at)}] {turn.content}",
                         limit=limit)
        kept: list[tuple[Turn, str]] = []
        for turn in reversed(window):
            line = f"[{turn.role.value} · {_date(turn.created_at)}] {turn.content}"
            if not self._fits("working", line, limit):
                break
            self._blocks["working"].append(line)
            kept.append((turn, line))
        for _, line in kept:
            self._blocks["working"].remove(line)
        for turn, line in reversed(kept):
            self._blocks["working"].append(line)
            self.included.append(ScoredItem(
                id=turn.turn_id, layer="working", kind=turn.role.value, text=turn.content,
                score=0.0, created_at=turn.created_at))
        if summary:
            self.add("working", f"[summary] {summary}", limit=limit)

    def render(self) -> str:
        return _render(self._blocks)


def _render(blocks: dict[str, list[str]]) -> str:
    parts = [HEADERS[k] + "\n" + "\n".join(lines) for k, lines in blocks.items() if lines]
    return "\n\n".join(parts)
