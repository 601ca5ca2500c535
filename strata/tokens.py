"""An offline token counter, validated against a real tokenizer.

tiktoken fetches its vocabularies at run time, which fails offline, so Strata estimates.
The text is cut roughly where a subword tokenizer cuts it, and each piece counts one token:
a CJK character; a run of at most ``LETTERS_PER_TOKEN`` letters (a new piece where the case
changes, so ``wJalrXU`` is ``w Jalr XU``); at most ``DIGITS_PER_TOKEN`` digits; any other
visible character (punctuation, symbols). The count is never below the usual measure of one
token per 4 characters, spaces included.

``tests/unit/test_tokens.py`` checks the estimate against the packaged MiniLM's WordPiece
tokenizer over a bilingual sample: never below it by more than a small margin (WordPiece
cuts finer than GPT-style BPE, so it is the stricter reference) and not far above it.
"""

from __future__ import annotations

import re

__all__ = ["DIGITS_PER_TOKEN", "LETTERS_PER_TOKEN", "count_pieces", "count_tokens"]

LETTERS_PER_TOKEN = 8
DIGITS_PER_TOKEN = 2

# one match per token; a single pass (count_tokens runs per candidate per recall)
_PIECE = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
    rf"|[A-Z]{{2,{LETTERS_PER_TOKEN}}}(?![a-z])|[A-Z]?[a-z]{{1,{LETTERS_PER_TOKEN}}}|[A-Z]"
    rf"|\d{{1,{DIGITS_PER_TOKEN}}}|[^\sA-Za-z\d]")


def count_pieces(text: str) -> int:
    """The subword pieces of ``text`` (no pieces span whitespace, so texts joined by spaces
    or newlines have the sum of their pieces)."""
    return len(_PIECE.findall(text))


def count_tokens(text: str) -> int:
    """Estimated tokens of ``text``, upper-leaning so budgets hold. Parts joined by
    whitespace count at least as much together as the whole does."""
    if not text:
        return 0
    return max(count_pieces(text), -(-len(text) // 4))
