"""What a "forget" request names: the test ``LongTermMemory.forget_matching`` applies to the
stored memories, and ``LongTermMemory.unforgotten`` to candidates not written yet."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from strata.extract.base import Candidate
from strata.extract.terms import coverage, has_cjk
from strata.models import Provenance, StoredRecord, as_utc, is_visible
from strata.stores.redis_ports import ForgetRequest

__all__ = ["EVERYTHING", "FORGET_COVERAGE", "FORGET_SIMILARITY", "names", "said_before",
           "said_earlier", "stored_before"]

FORGET_SIMILARITY = 0.55
EVERYTHING = "*"  # the target of "forget everything you know about me" / "全部忘掉"
FORGET_COVERAGE = 0.5  # the share of a forget target's content terms a memory must hold


def names(target: str, words: Sequence[str | None], dense: float) -> bool:
    """Whether a memory (its text, key and value: ``words``) is what a "forget" names: it
    holds most of the target's content terms or — outside Chinese, where the packaged model's
    cosines are trustworthy — it is close in meaning (``dense``) and shares a term ("forget
    the Tokyo trip")."""
    covered = coverage(target, " ".join(filter(None, words)).replace(".", " ").replace("_", " "))
    close = not has_cjk(target) and covered > 0 and dense >= FORGET_SIMILARITY
    return covered >= FORGET_COVERAGE or close


def _turn_number(turn_id: str, session: str | None) -> int | None:
    """The place of a turn in its session when the server named it (``<session>:<n>``)."""
    prefix, _, n = turn_id.rpartition(":")
    return int(n) if session and prefix == session and n.isdigit() else None


def said_earlier(provenance: Provenance, said_at: datetime, request: ForgetRequest) -> bool:
    """Whether what ``provenance``'s turns said (the latest at ``said_at``) was said before
    ``request``. At the same time (a client that stamps a session's turns alike), the
    server's turn numbers decide when both are of one session; otherwise it counts as
    earlier (what may have been said before a forget is forgotten). Never what the forget
    turn alone says ("forget my old address, the new one is …"); an exchange of it and the
    turn before it holds that turn's words."""
    others = [t for t in provenance.turn_ids if t != request.turn_id]
    if not others:
        return False
    said, asked = as_utc(said_at), as_utc(request.at)
    if said != asked:
        return said < asked
    session = provenance.session_id
    mine = [_turn_number(t, session) for t in others]
    theirs = _turn_number(request.turn_id, session)
    if theirs is None or None in mine:
        return True
    return max(n for n in mine if n is not None) < theirs


def said_before(cand: Candidate, request: ForgetRequest) -> bool:
    """Whether ``request`` may forget ``cand``: said after it, by the same person (when the
    conversation names its speakers), to an agent that sees it."""
    if cand.said_at is None or not said_earlier(cand.provenance, cand.said_at, request):
        return False
    if request.speaker and cand.speaker and cand.speaker != request.speaker:
        return False
    return is_visible({"agent": cand.agent, "visibility": cand.visibility,
                       "shared_with": cand.shared_with}, request.viewer)


def stored_before(record: StoredRecord, request: ForgetRequest) -> bool:
    """Whether a stored memory was said before ``request`` (``said_earlier`` on its
    ``metadata.said_at``; one written before memories kept it counts as earlier)."""
    said = (record.payload.get("metadata") or {}).get("said_at")
    if not said:
        return True
    provenance = Provenance.model_validate(record.payload.get("provenance") or {})
    return said_earlier(provenance, datetime.fromisoformat(said), request)
