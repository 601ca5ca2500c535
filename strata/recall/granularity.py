"""Two granularities of one conversation, fused into turn-level recall items.

The episodes layer holds turn-level episodes and exchanges (two neighbouring user turns,
``strata.extract.exchanges``). A query is matched against both. Each turn is then scored by

    turn = (1 - w)·own similarity + w·best similarity of an exchange it belongs to
    final = (turn + s·best turn of its session) / (1 + s)

(w = ``exchange_weight``, s = ``session_weight``): a turn that only makes sense with its
neighbour is found through the exchange, and a session that is about the query lifts its
turns. In a multi-party conversation (turns with ``metadata.speaker``), the turns of the one
person the query names get ``speaker_boost``. A turn found only through an exchange is
fetched and its own dense similarity computed from its stored vector. Last, a turn whose
exchange partner is nearly as relevant (``neighbour_ratio``) is merged with it into one item
naming both turns, so the context shows the pair once instead of spending two items on it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from strata.models import SearchHit, StoredRecord
from strata.recall.recipes import RecallRecipe
from strata.recall.scoring import similarity

__all__ = ["fuse_granularities"]


@dataclass
class _Unit:
    record: StoredRecord
    own: float
    parts: dict[str, float]
    pair: float = 0.0
    final: float = 0.0
    partners: dict[str, int] = field(default_factory=dict)  # exchange partner id → -1 before,
    #                                                          +1 after this turn


def _session(record: StoredRecord) -> str:
    return str((record.payload.get("provenance") or {}).get("session_id") or "")


def _members(record: StoredRecord) -> list[str]:
    return [str(m) for m in (record.payload.get("metadata") or {}).get("members", [])]


def _speaker(record: StoredRecord) -> str:
    return str((record.payload.get("metadata") or {}).get("speaker") or "")


def _named_speaker(query: str, units: Iterable[_Unit]) -> str | None:
    """The one speaker of these turns the query names (multi-party conversations)."""
    speakers = {_speaker(u.record) for u in units} - {""}
    named = {s for s in speakers
             if re.search(rf"(?<!\w){re.escape(s)}(?!\w)", query, re.IGNORECASE)}
    return named.pop() if len(named) == 1 else None


def fuse_granularities(turn_hits: Sequence[SearchHit], exchange_hits: Sequence[SearchHit],
                       fetch: Callable[[list[str]], list[StoredRecord]],
                       vector: Sequence[float], query: str,
                       recipe: RecallRecipe) -> list[SearchHit]:
    """Turn-level hits (some merged with their neighbour), best first."""
    units = {h.record.id: _Unit(h.record, similarity(h.parts, recipe), dict(h.parts))
             for h in turn_hits}
    exchanges = [(h, similarity(h.parts, recipe), _members(h.record)) for h in exchange_hits]
    missing = sorted({m for _, _, ms in exchanges for m in ms} - units.keys())
    if missing:
        qvec = np.asarray(vector, dtype=np.float32)
        for record in fetch(missing):
            if record.vector is None or float(record.payload.get("weight", 1.0)) <= 0:
                continue
            vec = np.asarray(record.vector, dtype=np.float32)
            cosine = float(vec @ qvec / ((np.linalg.norm(vec) * np.linalg.norm(qvec)) or 1.0))
            parts = {"dense": cosine}
            units[record.id] = _Unit(record, similarity(parts, recipe), parts)
    standalone: list[_Unit] = []
    for hit, score, members in exchanges:
        present = [m for m in members if m in units]
        for m in present:
            units[m].pair = max(units[m].pair, score)
        if len(present) == 2:
            first, second = present
            units[first].partners[second] = 1
            units[second].partners[first] = -1
        elif not present:  # its turns have no episodes of their own (short turns)
            standalone.append(_Unit(hit.record, score, dict(hit.parts), pair=score))
    w, s = recipe.exchange_weight, recipe.session_weight
    everything = [*units.values(), *standalone]
    asked_about = _named_speaker(query, units.values())
    best: dict[str, float] = {}
    for unit in everything:
        turn = (1 - w) * unit.own + w * unit.pair
        if asked_about and _speaker(unit.record) == asked_about:
            turn += recipe.speaker_boost
            unit.parts["speaker"] = recipe.speaker_boost
        unit.final = turn
        best[_session(unit.record)] = max(best.get(_session(unit.record), 0.0), turn)
    for unit in everything:
        unit.final = (unit.final + s * best[_session(unit.record)]) / (1 + s)
    out: list[SearchHit] = []
    consumed: set[str] = set()
    for unit in sorted(everything, key=lambda u: u.final, reverse=True):
        if unit.record.id in consumed:
            continue
        consumed.add(unit.record.id)
        record = unit.record
        partner = max((units[p] for p in unit.partners if p not in consumed),
                      key=lambda u: u.final, default=None)
        if partner is not None and partner.final >= recipe.neighbour_ratio * unit.final:
            consumed.add(partner.record.id)
            record = _merge(unit.record, partner.record, unit.partners[partner.record.id])
        parts = {**unit.parts, "similarity": unit.final, "turn": unit.own,
                 "exchange": unit.pair, "session": best[_session(unit.record)]}
        out.append(SearchHit(record=record, score=unit.final, parts=parts))
    return out


def _merge(primary: StoredRecord, partner: StoredRecord, partner_side: int) -> StoredRecord:
    """One record for two neighbouring turns, in conversation order, under the primary id."""
    first, second = (primary, partner) if partner_side > 0 else (partner, primary)
    turns = [t for r in (first, second)
             for t in (r.payload.get("provenance") or {}).get("turn_ids", [])]
    provenance = {**(primary.payload.get("provenance") or {}), "turn_ids": turns}
    return primary.model_copy(update={"text": f"{first.text}\n{second.text}",
                                      "payload": {**primary.payload, "provenance": provenance,
                                                  "merged_with": partner.id}})
