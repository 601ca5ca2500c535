"""The query without the names of the people speaking in the user's conversations: what
the personal layers' dense search embeds (``strata.shard.recall``)."""

from __future__ import annotations

import re
from collections.abc import Collection

from strata.stores.lexical import tokenize

__all__ = ["without_speakers"]


_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def without_speakers(query: str, speakers: Collection[str]) -> str | None:
    """The query without the names of the people speaking in the conversation (and their
    possessive), for its dense search; None when it names none of them (or is nothing but
    names). Every turn of a multi-party conversation starts with its speaker's name and many
    address the other one, so a name in the query pulls its embedding toward greetings
    rather than toward what was said: on LoCoMo dev, the 30 nearest turns by MiniLM hold
    0.698 of the evidence with the names, 0.794 without (``docs/benchmarks.md``). Who is
    asked about still counts: the lexical search, late interaction and the speaker boost see
    the whole query."""
    text = query
    for name in speakers:  # a name as a word; a Chinese one wherever it is, if not one hanzi
        if len(name) < 2:
            continue
        left = "" if _CJK.match(name[0]) else r"(?<!\w)"
        right = "" if _CJK.match(name[-1]) else r"(?:['’]s)?(?!\w)"
        text = re.sub(left + re.escape(name) + right, " ", text, flags=re.IGNORECASE)
    text = re.sub(r"\s+", " ", text).strip()
    return text if text != query.strip() and tokenize(text) else None
