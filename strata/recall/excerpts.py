"""Excerpts: the budget shared among the items a recall chose, so ``top_k`` items fit
instead of fewer whole ones.

Items are taken in rank order while their minimums fit: one that cannot fit even cut (or
that cannot be cut: a knowledge chunk with the user's correction under it), and one whose
turns a taken item already shows, is passed over for the next. Each taken item then goes in
whole while the items after it can still have their minimum; otherwise it is cut to what is
left for it. A cut item keeps the sentences that hold the most of the query's terms (ties: in
order), shown in their own order with "…" where sentences were left out; its label stays, and
an item of two turns keeps at least the best sentence of each turn, so it still shows every
turn it names.

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

from strata.tokens import count_pieces

__all__ = ["Excerpt", "share_budget"]

# a sentence: a bracketed aside ("[shares a photo: …]", to the line's end if unclosed) or a
# run up to ., ! or ? before a space (not the point of 3.5) or up to a CJK stop
_SENTENCE = re.compile(r"\[[^\]\n]*\]?"
                       r"|(?:[^\[\n.!?。！？；]|[.!?](?!\s|$))+(?:[.!?]+(?=\s|$)|[。！？；]+)?"
                       r"|[.!?。！？；]+")
# "Melanie: " before a turn's words: one to four words of letters, no digits
_SPEAKER = re.compile(r"^[^\W\d_][\w.'’-]*(?: [^\W\d_][\w.'’-]*){0,3}[:：]\s*")
GAP = "…"

Cost = Callable[[str], int]  # the tokens a line costs in the context


@dataclass
class _Line:
    prefix: str
    sentences: list[str]


class Excerpt:
    """One chosen item's line (``head`` + text), which can be cut to its sentences that
    matter most to the query. ``turns``: the item names several turns, one per line, and a
    cut keeps a sentence of each; ``sources``: what it was said in (an item whose sources
    a placed item already covers is left out)."""

    def __init__(self, head: str, text: str, terms: set[str],
                 terms_of: Callable[[str], Sequence[str]], cuttable: bool = True,
                 turns: bool = False, sources: frozenset[object] = frozenset()) -> None:
        self.whole = f"{head}{text}"
        self.sources = sources
        self._head = head
        self._lines: list[_Line] = []
        for raw in text.split("\n"):
            speaker = _SPEAKER.match(raw)
            prefix = speaker.group(0) if speaker else ""
            body = raw[len(prefix):]
            sentences = [s.strip() for s in _SENTENCE.findall(body) if s.strip()]
            self._lines.append(_Line(prefix, sentences or [body]))
        self._terms, self._terms_of = terms, terms_of
        self._turns = turns
        self.cuttable = cuttable and sum(len(ln.sentences) for ln in self._lines) > (
            len(self._lines) if turns else 1)

    @cached_property
    def _order(self) -> list[tuple[int, int]]:
        """(line, sentence) best first: the most query terms, then in order (scored only
        when the item is cut)."""
        scored = [(-len(self._terms & set(self._terms_of(s))), li, si)
                  for li, line in enumerate(self._lines) for si, s in enumerate(line.sentences)]
        return [(li, si) for *_, li, si in sorted(scored)]

    @cached_property
    def _minimum(self) -> set[tuple[int, int]]:
        """The best sentence of each turn (of the whole item when it is not several)."""
        if not self._turns:
            return {self._order[0]}
        return {next(k for k in self._order if k[0] == li) for li in range(len(self._lines))}

    def render(self, keep: set[tuple[int, int]]) -> str:
        """The line with only the ``keep`` sentences (``GAP`` where others were left out)."""
        out = []
        for li, line in enumerate(self._lines):
            parts: list[str] = []
            kept = False
            for si, sentence in enumerate(line.sentences):
                if (li, si) in keep:
                    parts.append(sentence)
                    kept = True
                elif not parts or parts[-1] != GAP:
                    parts.append(GAP)
            if kept:
                out.append(line.prefix + " ".join(parts))
        return self._head + "\n".join(out)

    def minimum(self, cost: Cost) -> int:
        """The tokens of the shortest cut (the whole line if it cannot be cut)."""
        return cost(self.fit(0, cost))

    def fit(self, limit: int, cost: Cost) -> str:
        """The longest cut within ``limit`` tokens that keeps the best sentences (never less
        than the minimum); the whole line if it fits. Linear in the sentences: one that
        alone has more pieces than the room left is not tried."""
        if not self.cuttable or cost(self.whole) <= limit:
            return self.whole
        keep = set(self._minimum)
        used = cost(self.render(keep))
        for key in self._order:
            if key in keep:
                continue
            li, si = key
            if count_pieces(self._lines[li].sentences[si]) - 1 > limit - used:
                continue  # adding it adds its pieces, less at most the gap it fills
            trial = cost(self.render(keep | {key}))
            if trial <= limit:
                keep.add(key)
                used = trial
        return self.render(keep)


def _take(excerpts: Sequence[Excerpt], room: int, count: int,
          size: Callable[[int], int]) -> list[int]:
    """The items taken in rank order while their sizes fit ``room`` (one that does not,
    or whose sources a taken item covers, is passed over), at most ``count``."""
    taken: list[int] = []
    used = 0
    covered: set[object] = set()
    for i, excerpt in enumerate(excerpts):
        if len(taken) == count:
            break
        if excerpt.sources and excerpt.sources <= covered:
            continue  # says again what a better item from the same turns said
        if used + (n := size(i)) > room:
            continue
        taken.append(i)
        used += n
        covered |= excerpt.sources
    return taken


def share_budget(excerpts: Sequence[Excerpt], room: int, cost: Cost,
                 count: int) -> list[str | None]:
    """The line of each item (``None``: left out), at most ``count`` of them, within
    ``room`` tokens. The items are taken in rank order while their minimums fit (one that
    cannot fit even cut, or whose sources a taken item covers, is passed over); then each
    taken item goes whole while the items after it can still have their minimums, else cut
    to what is left for it."""
    lines: list[str | None] = [None] * len(excerpts)
    whole = _take(excerpts, room, count, lambda i: cost(excerpts[i].whole))
    if whole == _take(excerpts, room, count, lambda i: 0):
        for i in whole:  # the common case: the best items fit whole, nothing is cut
            lines[i] = excerpts[i].whole
        return lines
    least: dict[int, int] = {}

    def minimum(i: int) -> int:
        if i not in least:
            least[i] = excerpts[i].minimum(cost)
        return least[i]

    taken = _take(excerpts, room, count, minimum)
    minimums = [minimum(i) for i in taken]
    left = room
    for n, i in enumerate(taken):
        line = excerpts[i].fit(left - sum(minimums[n + 1:]), cost)
        lines[i] = line
        left -= cost(line)
    return lines
