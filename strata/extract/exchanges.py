"""Exchange memories: two neighbouring user turns of one session, kept together.

A single turn often makes sense only with the one before it ("Yes, last Friday!" answers
"Did you go to the support group?"). Besides its turn-level episodes, every batch of turns
yields one exchange per pair of consecutive *user* turns of a session (assistant turns in
between are skipped: the assistant's words are never stored). Recall matches a query against
both granularities and shows turns, merging a turn with its neighbour when both are relevant
(``strata.recall.granularity``). Exchanges go through the same write filters as every other
candidate, so a turn with an ID number or a password never reaches one.
"""

from __future__ import annotations

from collections.abc import Sequence

from strata.extract.base import Candidate
from strata.models import MemoryKind, Provenance, Role, Turn

__all__ = ["EXCHANGE", "exchange_candidates"]

EXCHANGE = "exchange"  # the episode type of exchange memories


def exchange_candidates(turns: Sequence[Turn]) -> list[Candidate]:
    """One candidate per pair of consecutive user turns of the same session."""
    out: list[Candidate] = []
    previous: dict[str, Turn] = {}
    for turn in turns:
        if turn.role is not Role.USER or not turn.content.strip():
            continue
        before = previous.get(turn.session_id)
        previous[turn.session_id] = turn
        if before is None:
            continue
        parts = [before.content.strip(), turn.content.strip()]
        out.append(Candidate(
            kind=MemoryKind.EPISODE, text="\n".join(parts), confidence=0.7,
            episode_type=EXCHANGE, parts=parts, event_time=turn.created_at,
            provenance=Provenance(session_id=turn.session_id,
                                  turn_ids=[before.turn_id, turn.turn_id])))
    return out
