"""The rolling summary's fit is linear (it runs on every turn that evicts one) and drops
exactly what the plain loop does: the least salient line, then the oldest, until it fits."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from strata.layers.summarize import RuleSummarizer, salient_score
from strata.tokens import count_pieces, count_tokens

LINES = st.lists(st.sampled_from([
    "user: The budget is 50000 yuan and the deadline is March 3rd.",
    "assistant: ok", "user: I moved to Lisbon last year.", "user: 我住在上海，预算3万。",
    "user: We like jazz music a lot", "assistant: Sounds good!",
    "user: My sister Anna works at Google since 2019", "user: haha",
    "user: wJalrXUtnFEMI/K7MDENG bPxRfiCY", "user: 12345678901234567890",
]), max_size=30)


def plain_fit(lines: list[str], budget: int) -> str:
    """The definition: drop the least salient (then oldest) line while over budget."""
    lines = list(lines)
    while lines and count_tokens("\n".join(lines)) > budget:
        scores = [salient_score(ln) for ln in lines]
        lines.pop(min(range(len(lines)), key=lambda i: (scores[i], i)))
    return "\n".join(lines)


@settings(max_examples=300, deadline=None)
@given(LINES, st.integers(min_value=0, max_value=200))
def test_the_fit_drops_what_the_plain_loop_drops(lines: list[str], budget: int) -> None:
    fitted = RuleSummarizer._fit(list(lines), budget)
    assert fitted == plain_fit(lines, budget)
    assert count_tokens(fitted) <= budget or not fitted


@given(st.lists(st.text(max_size=40), max_size=8))
def test_pieces_of_lines_joined_by_newlines_add_up(parts: list[str]) -> None:
    parts = [p.replace("\n", " ") for p in parts]
    assert count_pieces("\n".join(parts)) == sum(count_pieces(p) for p in parts)
