"""Content terms of a text in either language: CJK characters and other-script words, without
function words. For decisions the packaged English model cannot make from cosines alone in
Chinese, where unrelated sentences score ~0.75 and rephrasings ~0.8 ("is this the same
event?", "does this forget request name that memory?")."""

from __future__ import annotations

import re

__all__ = ["coverage", "has_cjk", "ordered_terms", "overlap", "terms", "word_pattern"]

_CJK = re.compile(r"[\u4e00-\u9fff]")
_TERM = re.compile(r"[\u4e00-\u9fff]|[^\W\d_]{2,}|\d+")
_MERGE_MARK = re.compile(r" \(×\d+\)$")
_FUNCTION = set("的了是我你他她它们这那在和也都就还又吗呢吧啊呀件事个想") | {
    "the", "a", "an", "and", "or", "of", "to", "in", "on", "at", "for", "with", "is", "are",
    "was", "were", "be", "been", "it", "its", "this", "that", "those", "these", "my", "me",
    "you", "your", "we", "our", "they", "them", "thing", "stuff", "about", "what", "said",
    "told", "have", "has", "had", "do", "does", "did", "so", "just", "all", "any", "again"}


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


def word_pattern(word: str) -> str:
    """A regex of ``word`` as a word: not inside a longer word; a Chinese end needs no
    boundary (Chinese has no spaces, so "小明去了" holds 小明)."""
    left = "" if has_cjk(word[:1]) else r"(?<!\w)"
    right = "" if has_cjk(word[-1:]) else r"(?!\w)"
    return left + re.escape(word) + right


def ordered_terms(text: str) -> list[str]:
    """The content terms of ``text`` in the order they come (repeats kept)."""
    return [t for t in _TERM.findall(_MERGE_MARK.sub("", text.lower())) if t not in _FUNCTION]


def terms(text: str) -> set[str]:
    """The content terms of ``text`` (lower-cased; a merged episode's "(×3)" mark dropped)."""
    return {t for t in _TERM.findall(_MERGE_MARK.sub("", text.lower())) if t not in _FUNCTION}


def overlap(a: str, b: str) -> float:
    """Jaccard of the two texts' content terms."""
    left, right = terms(a), terms(b)
    return len(left & right) / max(1, len(left | right))


def coverage(target: str, text: str) -> float:
    """The share of ``target``'s content terms that ``text`` contains (0 when it has none)."""
    wanted = terms(target)
    return len(wanted & terms(text)) / len(wanted) if wanted else 0.0
