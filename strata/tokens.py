"""An offline token counter.

tiktoken fetches its vocabularies at run time, which fails offline, so Strata uses a
documented estimate calibrated on GPT-style BPE: each CJK character ≈ 1 token, and
other text ≈ 1 token per 4 characters (never fewer than one per word).
"""

from __future__ import annotations

import math
import re

__all__ = ["count_tokens"]

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_WORD = re.compile(r"[^\s]+")


def count_tokens(text: str) -> int:
    """Estimated tokens of ``text`` (an upper-leaning estimate, so budgets hold)."""
    if not text:
        return 0
    cjk = len(_CJK.findall(text))
    rest = _CJK.sub(" ", text)
    words = len(_WORD.findall(rest))
    chars = len(rest.replace(" ", ""))
    return cjk + max(words, math.ceil(chars / 4))
