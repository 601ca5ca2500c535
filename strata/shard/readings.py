"""What the learned intent detector reads in a user's turn, for ``ShardMemories``: a forget
the rules missed (or that a forget is of everything), and a change in a turn that states a
fact. A batch's turns are read ahead in one call of the model (its cost is mostly per call:
sklearn's checks and vectorisers), and each reading is kept for the turn's two questions.
``IntentHandler`` is what the sessions read and apply a turn's intents through."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from strata.extract.base import Candidate, Intent
from strata.extract.fact_rules import match_facts
from strata.extract.intent_model import (
    CombinedIntents,
    IntentDetector,
    IntentReading,
    Utterance,
    forget_target,
)
from strata.extract.rules import detect_intent, speaker_of
from strata.layers.forget_match import EVERYTHING, EXTENTS
from strata.models import MemoryKind, Provenance, Role, Scope, Turn
from strata.shard.models import IntentResult

__all__ = ["IntentHandler", "TurnReadings", "said_in"]

_KEPT = 512  # readings kept between batches (turns said one at a time)


class IntentHandler(Protocol):
    """Reads and applies new user turns' explicit intents (``ShardMemories``)."""

    def read_ahead(self, said: Sequence[Utterance]) -> None:
        """A batch's user turns, each with the user's turn before it, read in one pass
        before ``apply_intents`` takes them one by one."""

    def apply_intents(self, scope: Scope, turn: Turn, wal_from: str, wal_to: str,
                      previous: str | None = None) -> IntentResult:
        """One turn's intents applied; ``wal_from``/``wal_to``: the WAL range of the turn,
        ``previous``: the user's turn before."""


class TurnReadings:
    """The learned detector's readings of user turns (``detector`` None: rules only, so
    nothing is read). A reading is a function of the turn and the user's turn before it,
    so a kept one is never a wrong one."""

    def __init__(self, detector: Callable[[], IntentDetector] | None) -> None:
        self._detector = detector  # built lazily (~2 s of fitting, or a cache load)
        self._readings: dict[Utterance, IntentReading] = {}

    def read_ahead(self, said: Sequence[Utterance]) -> None:
        """Read a batch's user turns (each with the user's turn before it) in one call, for
        ``reading`` and ``change`` to find: a 100-turn batch read at once costs what a few
        turns read one by one do. Only the turns they would have the model read are read
        (those that could be a forget, and those stating a fact no rule reads an intent in);
        an LLM's or the rules' detector reads one turn at a time, as it comes."""
        if self._detector is None:
            return
        detector = self._detector()
        if not isinstance(detector, CombinedIntents):
            return
        wanted = list(dict.fromkeys(
            u for u in said if detector.could_forget(u)
            or (match_facts(u.text) and detect_intent(u.text) is Intent.NONE)))
        self._readings = dict(zip(wanted, detector.read(wanted), strict=True)) if wanted else {}

    def _read(self, detector: IntentDetector, said: Utterance) -> IntentReading:
        """The detector's reading of one turn: read ahead with its batch, else now."""
        reading = self._readings.get(said)
        if reading is None:
            reading = detector.read([said])[0]
            if len(self._readings) >= _KEPT:
                self._readings = {}
            self._readings[said] = reading  # the forget and the change reading share it
        return reading

    def change(self, turn: Turn, previous: str | None) -> bool:
        """Whether the learned detector reads a change in a turn that states a fact the
        rules can key (the model runs only then: ~6 % of ordinary turns)."""
        if self._detector is None or not match_facts(turn.content):
            return False
        detector = self._detector()
        return (isinstance(detector, CombinedIntents)
                and self._read(detector, Utterance(turn.content, previous)).intent == "change")

    def reading(self, turn: Turn, previous: str | None) -> IntentReading | None:
        """The learned detector's reading of a turn that could be a forget (None: no
        detector, or the model would not read a forget: not run, most turns)."""
        if self._detector is None:
            return None
        detector, said = self._detector(), Utterance(turn.content, previous)
        if isinstance(detector, CombinedIntents) and not detector.could_forget(said):
            return None
        return self._read(detector, said)

    @staticmethod
    def forget(turn: Turn, previous: str | None, ruled: Intent,
               reading: IntentReading | None) -> Candidate | None:
        """What the learned ``reading`` adds to the rules' (``ruled``): a forget they did
        not read (its target: ``forget_target``), or that a forget is of everything."""
        if reading is None or reading.intent != "forget":
            return None
        if reading.scope == "all":
            target: str | None = EVERYTHING
        elif ruled is Intent.FORGET:
            return None  # the rules' own target stands
        else:  # the model's span, else the turn without its framing, else the turn before
            target = reading.target or forget_target(turn.content, previous)
        if not target:
            return None
        return Candidate(kind=MemoryKind.FACT, text=target.strip(), intent=Intent.FORGET,
                         provenance=Provenance(session_id=turn.session_id,
                                               turn_ids=[turn.turn_id]),
                         event_time=turn.created_at, speaker=speaker_of(turn),
                         metadata={"extent": reading.scope} if reading.scope in EXTENTS
                         else {})  # kept for a late application (``write_longterm``)


def said_in(window: Sequence[Turn], new: Sequence[Turn]) -> list[Utterance]:
    """The user turns among ``new`` as their intents are read: each with the user's turn
    before it (the window's last, or the batch's)."""
    previous = next((t.content for t in reversed(window) if t.role is Role.USER), None)
    said = []
    for turn in new:
        if turn.role is Role.USER:
            said.append(Utterance(turn.content, previous))
            previous = turn.content
    return said
