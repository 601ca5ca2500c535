"""Excerpts: the budget shared among the items a recall chose, so ``top_k`` items fit
instead of fewer whole ones.

Items are placed in rank order. Each goes in whole while the items after it can still have
their minimum; otherwise it is cut to what is left for it. A cut item keeps the sentences
that hold the most of the query's terms (ties: in order), shown in their own order with "…"
where sentences were left out; its label stays, and an item of two turns keeps at least the
best sentence of each turn, so it still shows every turn it names. When even the minimums do
not fit, the lowest-ranked items are left out.

Without excerpts, 565 of LoCoMo dev's 760 contexts held fewer than 10 items at 500 tokens: a
long item was passed over and the evidence ranked below it never reached the context. With
them, recall@10 0.797 → 0.816 while the share of the answers' words the context holds stays
level (0.731 → 0.728): the context covers more turns in fewer words each
(``docs/benchmarks.md``, "Excerpts").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

__all__ = ["Excerpt", "share_budget"]

# a sentence: a bracketed aside ("[shares a photo: …]") or a run up to ., ! or ? before a
# space (not the point of 3.5) or up to a CJK stop
_SENTENCE = re.compile(r"\[[^\]\n]*\]"
                       r"|(?:[^\[\n.!?。！？；]|[.!?](?!\s|$))+(?:[.!?]+(?=\s|$)|[。！？；]+)?"
                       r"|[.!?。！？；]+")
_SPEAKER = re.compile(r"^[^:：\n\[]{1,40}[:：]\s*")  # "Melanie: " before a turn's words
GAP = "…"

Cost = Callable[[str], int]  # the tokens a line costs in the context


@dataclass
class _Line:
    prefix: str
    sentences: list[str]


class Excerpt:
    """One chosen item's line (``head`` + text), which can be cut to its sentences that
    matter most to the query."""

    def __init__(self, head: str, text: str, terms: set[str],
                 terms_of: Callable[[str], Sequence[str]], cuttable: bool = True) -> None:
        self.whole = f"{head}{text}"
        self._head = head
        self._lines: list[_Line] = []
        for raw in text.split("\n"):
            speaker = _SPEAKER.match(raw)
            prefix = speaker.group(0) if speaker else ""
            body = raw[len(prefix):]
            sentences = [s.strip() for s in _SENTENCE.findall(body) if s.strip()]
            self._lines.append(_Line(prefix, sentences or [body]))
        self._terms, self._terms_of = terms, terms_of
        self.cuttable = cuttable and sum(len(ln.sentences) for ln in self._lines) > len(
            self._lines)

    @cached_property
    def _order(self) -> list[tuple[int, int]]:
        """(turn, sentence) best first: the most query terms, then in order (scored only
        when the item is cut)."""
        scored = [(-len(self._terms & set(self._terms_of(s))), li, si)
                  for li, line in enumerate(self._lines) for si, s in enumerate(line.sentences)]
        return [(li, si) for *_, li, si in sorted(scored)]

    @cached_property
    def _minimum(self) -> set[tuple[int, int]]:
        """The best sentence of each turn."""
        return {next(k for k in self._order if k[0] == li) for li in range(len(self._lines))}

    def render(self, keep: set[tuple[int, int]]) -> str:
        """The line with only the ``keep`` sentences (``GAP`` where others were left out)."""
        out = []
        for li, line in enumerate(self._lines):
            parts: list[str] = []
            for si, sentence in enumerate(line.sentences):
                if (li, si) in keep:
                    parts.append(sentence)
                elif not parts or parts[-1] != GAP:
                    parts.append(GAP)
            if any(p != GAP for p in parts):
                out.append(line.prefix + " ".join(parts))
        return self._head + "\n".join(out)

    def fit(self, limit: int, cost: Cost) -> str:
        """The longest cut within ``limit`` tokens that keeps the best sentences (never less
        than the minimum: the best sentence of each turn); the whole line if it fits."""
        if not self.cuttable or cost(self.whole) <= limit:
            return self.whole
        keep = set(self._minimum)
        for key in self._order:
            if key in keep:
                continue
            if cost(self.render(keep | {key})) <= limit:
                keep.add(key)
        return self.render(keep)


def share_budget(excerpts: Sequence[Excerpt], room: int, cost: Cost,
                 count: int) -> list[str | None]:
    """The line of each of the first ``count`` items (``None``: left out) within ``room``
    tokens: each item whole while the items after it can still have their minimums, else cut
    to what is left for it; the lowest-ranked items left out when even the minimums do not
    fit."""
    excerpts = list(excerpts[:count])
    chosen = len(excerpts)
    if sum(cost(e.whole) for e in excerpts) <= room:
        return [e.whole for e in excerpts]
    minimums = [cost(e.fit(0, cost)) for e in excerpts]
    while excerpts and sum(minimums) > room:
        excerpts.pop()
        minimums.pop()
    lines: list[str | None] = []
    left = room
    for i, excerpt in enumerate(excerpts):
        line = excerpt.fit(left - sum(minimums[i + 1:]), cost)
        lines.append(line)
        left -= cost(line)
    return lines + [None] * (chosen - len(lines))
