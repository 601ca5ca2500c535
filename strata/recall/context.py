"""The labelled context, fitted to a token budget, in a fixed order: working memory,
long-term memory, knowledge base (the model attends most to the start and the end).

Working-memory turns are stored verbatim in the session (the agent's own conversation), but
rendered into a recalled context redacted, like long-term memories: a recalled context is
handed to other prompts, logs and tools, so an API key, a card number or a password a user
typed does not travel with it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from strata.extract.pii import redact
from strata.models import Layer, Turn
from strata.recall.recipes import DEFAULT, RecallRecipe
from strata.recall.relative_dates import short_date
from strata.recall.scoring import ScoredItem
from strata.tokens import count_tokens

__all__ = ["ContextBuilder", "correction_label", "heading",
           "label", "line_cost"]

HEADERS = {"working": "## Working memory", "long_term": "## Long-term memory",
           "knowledge": "## Knowledge base"}


def _date(when: datetime | None) -> str:
    """``3 Mar 2026`` (``relative_dates.short_date``), or ``undated``."""
    return short_date(when) if when else "undated"


def heading(item: ScoredItem) -> str:
    """``[fact 30 Nov 2026] `` — the source and date every line starts with; what the agent
    inferred says so (``[fact · inferred 30 Nov 2026]``), never passing for what the user
    stated."""
    inferred = " · inferred" if item.source == "inferred" else ""
    context = f" · {item.context}" if item.context else ""
    return f"[{item.kind}{inferred}{context} {_date(item.created_at)}] "


def label(item: ScoredItem) -> str:
    """``[fact 30 Nov 2026] text``: the item's line in the context."""
    return heading(item) + item.text


def _trimmed(text: str, tokens: int) -> str:
    """``text`` cut at a word to at most ``tokens`` (with an ellipsis when cut)."""
    if count_tokens(text) <= tokens:
        return text
    low, high = 0, len(text)
    while low < high:  # the longest prefix that fits
        mid = (low + high + 1) // 2
        if count_tokens(text[:mid] + "…") <= tokens:
            low = mid
        else:
            high = mid - 1
    cut = text[:low]
    if " " in cut[len(cut) // 2:]:
        cut = cut[:cut.rindex(" ")]
    return cut.rstrip(" ,;，；") + "…" if cut else ""


def correction_label(correction: ScoredItem) -> str:
    """The line under a knowledge chunk this user corrected: what the user said instead."""
    return f"[the user's correction {_date(correction.created_at)}] {correction.text}"


def line_cost(line: str) -> int:
    """The tokens one line adds to a block."""
    return count_tokens("\n" + line)


class ContextBuilder:
    """Adds lines block by block while the whole context stays within the budget (working
    memory within the recipe's ``working_share`` of it, its summary within ``summary_share``
    of that)."""

    def __init__(self, budget_tokens: int, recipe: RecallRecipe = DEFAULT) -> None:
        self.budget = budget_tokens
        self._working_share, self._summary_share = recipe.working_share, recipe.summary_share
        self._blocks: dict[str, list[str]] = {k: [] for k in HEADERS}
        self.included: list[ScoredItem] = []
        # the tokens of the rendered context, counted part by part (each line and header
        # with its separator): never below the count of the whole, so the budget holds, and
        # one line is counted per candidate instead of the whole context again
        self._used = 0

    def tokens(self) -> int:
        """The tokens the budget was held to: the parts' counts, never below the whole's."""
        return self._used

    def _header(self, block: str) -> int:
        """The tokens the block's header still costs (none once the block has a line)."""
        return 0 if self._blocks[block] else count_tokens("\n\n" + HEADERS[block])

    def _cost(self, block: str, line: str) -> int:
        return self._header(block) + line_cost(line)

    def room(self, blocks: Collection[str]) -> int:
        """The tokens left for lines in ``blocks`` (their headers paid)."""
        return self.budget - self._used - sum(self._header(b) for b in set(blocks))

    def _fits(self, block: str, line: str, limit: int) -> bool:
        return self._used + self._cost(block, line) <= limit

    def _append(self, block: str, line: str) -> None:
        self._used += self._cost(block, line)
        self._blocks[block].append(line)

    def add(self, block: str, line: str, item: ScoredItem | None = None,
            limit: int | None = None) -> bool:
        if not self._fits(block, line, min(self.budget, limit or self.budget)):
            return False
        self._append(block, line)
        if item is not None:
            self.included.append(item)
        return True

    def add_working(self, window: Sequence[Turn], summary: str, pinned: Sequence[Turn],
                    task_state: dict[str, Any]) -> None:
        """Newest turns first get the space; they are rendered in chronological order."""
        limit = int(self.budget * self._working_share)
        in_window = {t.turn_id for t in window}
        goal = {k: v for k, v in task_state.items() if v not in (None, [], {}, "")}
        if goal:
            self.add("working", f"[task state] {redact(str(goal))}", limit=limit)
        for turn in pinned:
            if turn.turn_id not in in_window:
                self.add("working", f"[pinned {_date(turn.created_at)}] "
                         f"{redact(turn.content)}", limit=limit)
        if summary:  # what the window no longer holds: kept, trimmed to its share
            line = _trimmed(f"[summary] {redact(summary)}", int(limit * self._summary_share))
            if line:
                self.add("working", line, limit=limit)
        kept: list[tuple[Turn, str, str]] = []
        used = self._used
        for turn in reversed(window):
            text = redact(turn.content)
            line = f"[{turn.role.value} {_date(turn.created_at)}] {text}"
            if not self._fits("working", line, limit):
                break
            self._append("working", line)
            kept.append((turn, line, text))
        for _, line, _ in kept:
            self._blocks["working"].remove(line)
        self._used = used
        for turn, line, text in reversed(kept):
            self._append("working", line)
            self.included.append(ScoredItem(
                id=turn.turn_id, layer=Layer.WORKING, kind=turn.role.value, text=text,
                score=0.0, created_at=turn.created_at))

    def render(self) -> str:
        return _render(self._blocks)


def _render(blocks: dict[str, list[str]]) -> str:
    parts = [HEADERS[k] + "\n" + "\n".join(lines) for k, lines in blocks.items() if lines]
    return "\n\n".join(parts)
