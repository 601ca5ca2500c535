"""Reactivation: a cold memory the user mentions again is current again.

A fact or an episode nobody recalled for long goes cold (``strata.layers.decay``): recall
leaves it out unless asked for cold memories, so the stale does not crowd the current. When
the user speaks of it again — asks about it, updates it, complains about it again, in any
words — it matters again: the session's extraction sets it active, with the mention as its
last access, so the decay sweep does not put it back at once (a fact said again with the
same value is rewarmed by the conflict resolver already; this covers every other mention).

What counts as a mention (``mentions``): the turn holds the memory's own words — the share
of the memory's content units (``forget_match.units``: terms, Chinese by character bigrams)
the turn holds, or all of a fact's value ("Patel" for ``health.dentist = Dr. Patel``) — or,
outside Chinese, where the packaged model's cosines mean something, it is close in meaning.
The score weighs the two (``MentionPolicy``); a turn said to one agent wakes only what that
agent may see, and a forgotten memory (weight 0) is never woken.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from strata.extract.base import Candidate
from strata.extract.exchanges import EXCHANGE
from strata.extract.terms import has_cjk
from strata.layers.decay import DECAYING
from strata.layers.forget_match import share, unit_cosine, units
from strata.models import MemoryKind, MemoryStatus, RecordFilter, Scope, StoredRecord, is_visible
from strata.stores.ports import Embedder, VectorStore, cosine

__all__ = ["MentionPolicy", "Said", "mention_score", "mentions", "reactivate", "spoken_turns"]

COLD_SCAN = 2_000  # cold memories of one user looked at per job, per layer

# Chosen on the development writer of the mention corpus (tests/data/mentions, w17) by
# ``bench/mentions.py --tune`` for precision first (a wrong wake brings back what had faded):
# en P 1.00 / R 0.23, zh P 0.83 / R 0.13 there — most mentions are paraphrases this score
# cannot see, so only the clear ones wake a memory. A proper-name rule was tried and
# dropped (en P 0.68: "my sister got a Corolla too"). Held-out figures: docs/benchmarks.md.
MENTION_FLOOR = 0.5
MENTION_FLOOR_ZH = 0.6
MENTION_DENSE_WEIGHT = 0.5


@dataclass(frozen=True)
class MentionPolicy:
    """How much of a memory a turn must hold to mention it (a floor per language: outside
    Chinese the score mixes cosine and overlap, in Chinese overlap alone)."""

    floor: float = MENTION_FLOOR
    floor_zh: float = MENTION_FLOOR_ZH
    dense_weight: float = MENTION_DENSE_WEIGHT


@dataclass(frozen=True)
class Said:
    """A user turn of the session, and the agent it was said to (None: no agent named)."""

    text: str
    agent: str | None = None


def spoken_turns(candidates: Sequence[Candidate]) -> list[Said]:
    """The user turns an extraction job's candidates come from, once each: a turn's own
    episode, and the turns of an exchange (a short turn has no episode of its own)."""
    out: dict[tuple[str, str | None], Said] = {}
    for cand in candidates:
        if cand.kind is not MemoryKind.EPISODE:
            continue
        texts = cand.parts if cand.episode_type == EXCHANGE else [cand.text]
        for text in texts:
            out.setdefault((text, cand.agent), Said(text, cand.agent))
    return list(out.values())


def mention_score(turn: str, memory: str, value: str | None, dense: float,
                  policy: MentionPolicy) -> float:
    """How clearly ``turn`` speaks of the memory (its text; a fact's value): the largest of
    the share of the memory's units the turn holds, the share of the value's, and the cosine
    of the two unit sets — outside Chinese averaged (``dense_weight``) with the cosine of
    their embeddings (``dense``)."""
    held, spoken = units(memory), units(turn)
    lexical = max(share(held, spoken), share(units(value or ""), spoken),
                  unit_cosine(held, spoken))
    if has_cjk(turn) or has_cjk(memory):
        return lexical
    return policy.dense_weight * max(dense, 0.0) + (1 - policy.dense_weight) * lexical


def mentions(turn: str, memory: str, value: str | None, dense: float,
             policy: MentionPolicy | None = None) -> bool:
    """Whether ``turn`` mentions the memory (see the module)."""
    policy = policy or MentionPolicy()
    chinese = has_cjk(turn) or has_cjk(memory)
    return mention_score(turn, memory, value, dense, policy) >= (
        policy.floor_zh if chinese else policy.floor)


def _woken(row: StoredRecord, said: Sequence[Said], vectors: Sequence[Sequence[float]],
           policy: MentionPolicy) -> bool:
    if float(row.payload.get("weight", 1.0)) <= 0:  # forgotten (or hidden by a forget)
        return False
    value = row.payload.get("value")
    for turn, vector in zip(said, vectors, strict=True):
        if not is_visible(row.payload, turn.agent or ""):
            continue
        dense = cosine(row.vector, vector) if row.vector else 0.0
        if mentions(turn.text, row.text, value if isinstance(value, str) else None, dense,
                    policy):
            return True
    return False


def reactivate(vectors: VectorStore, embedder: Embedder, scope: Scope, said: Sequence[Said],
               now: datetime, policy: MentionPolicy | None = None) -> int:
    """Set active every cold fact and episode of ``scope`` that a turn of ``said`` mentions,
    its last access now and its access count one more; returns how many. Reads the user's
    cold memories first: a user with none costs one filtered query per layer and no
    embedding."""
    policy = policy or MentionPolicy()
    said = [s for s in said if s.text.strip()]
    if not said:
        return 0
    cold = {layer: [r.id for r in vectors.query(
        layer.collection, scope, RecordFilter(statuses=[MemoryStatus.COLD]), COLD_SCAN)]
        for layer in DECAYING}
    if not any(cold.values()):
        return 0
    turn_vectors = [v.tolist() for v in embedder.encode([s.text for s in said])]
    woken = 0
    for layer, ids in cold.items():
        rows = vectors.get(layer.collection, scope, ids) if ids else []
        back = []
        for row in rows:
            if row.status is MemoryStatus.COLD and _woken(row, said, turn_vectors, policy):
                back.append(row.model_copy(update={"status": MemoryStatus.ACTIVE, "payload": {
                    **row.payload, "last_access_at": now.isoformat(),
                    "access_count": int(row.payload.get("access_count", 0)) + 1}}))
        if back:
            vectors.upsert(layer.collection, scope, back)
            woken += len(back)
    return woken
