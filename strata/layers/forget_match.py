"""What a "forget" request names: the test ``LongTermMemory.forget_matching`` applies to the
stored memories, and ``LongTermMemory.unforgotten`` to candidates not written yet."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone

from strata.extract.base import Candidate
from strata.extract.terms import coverage, has_cjk
from strata.models import is_visible
from strata.stores.redis_ports import ForgetRequest

__all__ = ["FORGET_COVERAGE", "FORGET_SIMILARITY", "names", "said_before"]

FORGET_SIMILARITY = 0.55
FORGET_COVERAGE = 0.5  # the share of a forget target's content terms a memory must hold


def names(target: str, words: Sequence[str | None], dense: float) -> bool:
    """Whether a memory (its text, key and value: ``words``) is what a "forget" names: it
    holds most of the target's content terms or — outside Chinese, where the packaged model's
    cosines are trustworthy — it is close in meaning (``dense``) and shares a term ("forget
    the Tokyo trip")."""
    covered = coverage(target, " ".join(filter(None, words)).replace(".", " ").replace("_", " "))
    close = not has_cjk(target) and covered > 0 and dense >= FORGET_SIMILARITY
    return covered >= FORGET_COVERAGE or close


def _utc(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


def said_before(cand: Candidate, request: ForgetRequest) -> bool:
    """Whether ``request`` may forget ``cand``: said after it, by the same person (when the
    conversation names its speakers), to an agent that sees it."""
    if cand.said_at is None or _utc(cand.said_at) >= _utc(request.at):
        return False
    if request.speaker and cand.speaker and cand.speaker != request.speaker:
        return False
    return is_visible({"agent": cand.agent, "visibility": cand.visibility,
                       "shared_with": cand.shared_with}, request.viewer)
