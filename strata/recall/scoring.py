"""The fusion stage: ``layer_weight × (w1·similarity + w2·time_decay + w3·confidence +
w4·type_priority)`` with decay ``exp(-λ·days)``, λ = ln 2 / half-life; and the typed score
breakdown every candidate carries (``ScoreBreakdown``, by stage: ``strata.recall.stages``)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from strata.models import Layer, Provenance, SearchHit, Source, TurnScore
from strata.recall.recipes import RecallRecipe
from strata.recall.stages import Stage

__all__ = ["ScoreBreakdown", "ScoredItem", "collapse_copies", "decay_weight",
           "dedup", "lexical_similarity", "normalised_text", "score_hits", "similarity"]


def decay_weight(days: float, half_life_days: float | None, floor: float = 0.0) -> float:
    """``floor + (1 - floor)·exp(-λ·days)``; 1.0 for layers that do not decay. The floor
    keeps an old memory rankable: recency orders similar memories, it does not erase a
    conversation imported with old dates."""
    if not half_life_days:
        return 1.0
    return floor + (1 - floor) * math.exp(-math.log(2) / half_life_days * max(0.0, days))


@dataclass(frozen=True, slots=True)
class ScoreBreakdown:
    """How a candidate's score was made, stage by stage (``strata.recall.stages``): the raw
    signals its search gave (``dense`` cosine, ``lexical`` BM25 saturated to 0–1), the
    similarity the fusion weighed (a ranked turn's score, else the recipe's mix), the fusion's
    other signals and weights, the episodes' ranking of a turn (``turn``), and which of the
    LLM's statements found it (``statement``, 1-based; expansion). ``relevance`` is the
    strongest single signal, what selection's similarity threshold reads (4 decimals). The
    defaults are a candidate no search scored (working memory's turns, the fallback)."""

    similarity: float = 0.0
    dense: float = 0.0
    lexical: float = 0.0
    relevance: float = 0.0
    time_decay: float = 1.0
    confidence: float = 1.0
    type_priority: float = 0.0
    layer_weight: float = 1.0
    memory_weight: float = 1.0
    turn: TurnScore | None = None
    statement: int | None = None

    def parts(self) -> dict[str, float]:
        """The breakdown as the flat ``parts`` of a recall's debug output (4 decimals)."""
        out: dict[str, float] = {}
        if self.turn is not None:
            t = self.turn
            out.update({"turn": t.own, "exchange": t.exchange, "session": t.session,
                        "coverage": t.coverage})
            for stage, key in _BOOST_PARTS.items():
                value = t.term(stage)
                if value is not None:
                    out[key] = value
            if t.late is not None:
                out["late"] = t.late
        out = {k: round(v, 4) for k, v in out.items()}
        out.update({"similarity": round(self.similarity, 4), "dense": round(self.dense, 4),
                    "relevance": self.relevance, "lexical": round(self.lexical, 4),
                    "time_decay": round(self.time_decay, 4),
                    "confidence": round(self.confidence, 4),
                    "type_priority": self.type_priority, "layer_weight": self.layer_weight,
                    "memory_weight": self.memory_weight})
        if self.statement is not None:
            out["statement"] = float(self.statement)
        return out

    def by_stage(self, recipe: RecallRecipe) -> dict[str, Any]:
        """What each stage contributed, by stage name, in the order they ran (a recall's
        debug output): the search's raw signals, each episode-ranking term, late
        interaction's MaxSim, the merged partner, and the fusion's weighted terms."""
        out: dict[str, Any] = {Stage.SEARCH.value: {"dense": round(self.dense, 4),
                                                    "lexical": round(self.lexical, 4)}}
        t = self.turn
        if t is not None:
            if recipe.runs(Stage.EXCHANGES):
                out[Stage.EXCHANGES.value] = {"turn": round(t.own, 4),
                                              "exchange": round(t.exchange, 4)}
            out.update({stage: round(value, 4) + 0.0 for stage, value in t.terms})  # no -0.0
            if t.late is not None:
                out[Stage.LATE_INTERACTION.value] = round(t.late, 4)
            if t.merged_with is not None:
                out[Stage.MERGE.value] = t.merged_with
        weight = self.layer_weight * self.memory_weight
        out[Stage.FUSION.value] = {
            "similarity": round(weight * recipe.w_similarity * self.similarity, 4),
            "time_decay": round(weight * recipe.w_decay * self.time_decay, 4),
            "confidence": round(weight * recipe.w_confidence * self.confidence, 4),
            "type_priority": round(weight * recipe.w_type * self.type_priority, 4),
            "layer_weight": self.layer_weight, "memory_weight": self.memory_weight}
        if self.statement is not None:
            out[Stage.EXPANSION.value] = {"statement": self.statement}
        return out


# the boosts' keys in the flat ``parts``
_BOOST_PARTS = {Stage.SPEAKER_BOOST: "speaker", Stage.TIME_BOOST: "time",
                Stage.ANSWER_BOOST: "answer", Stage.ENTITIES: "entity"}


class ScoredItem(BaseModel):
    """A recall candidate with its score and how it was made (``breakdown``)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    layer: Layer
    kind: str
    text: str
    score: float = 0.0
    created_at: datetime | None = None  # when it happened: the label's date, what decay counts from
    confidence: float | None = None
    source: str | None = None
    provenance: Provenance = Field(default_factory=Provenance)
    breakdown: ScoreBreakdown = Field(default_factory=ScoreBreakdown)
    access_count: int = 0
    context: str | None = None  # the project / business line it belongs to
    speaker: str | None = None  # who said it, in a multi-party conversation

    @property
    def parts(self) -> dict[str, float]:
        """The breakdown flat, as a recall's debug output shows it."""
        return self.breakdown.parts()


def lexical_similarity(bm25: float, half: float) -> float:
    """BM25 mapped to 0–1 by saturation (``half`` scores 0.5), so a weak match stays weak
    whatever else ranks."""
    return bm25 / (bm25 + half) if bm25 > 0 else 0.0


def similarity(dense: float, bm25: float, recipe: RecallRecipe,
               late: float | None = None) -> float:
    """How well a text matches the query, 0–1, from its raw cosine and BM25: the recipe's
    mix of the token-level similarity (MaxSim, when late interaction scored it) or the
    cosine, and saturated BM25."""
    lexical = lexical_similarity(bm25, recipe.bm25_half)
    if late is not None:  # token-level (MaxSim) instead of pooled
        return recipe.late_share * max(0.0, late) + (1 - recipe.late_share) * lexical
    return recipe.dense_share * max(0.0, dense) + (1 - recipe.dense_share) * lexical


def score_hits(layer: Layer, kind: str, hits: Sequence[SearchHit], items: Sequence[ScoredItem],
               recipe: RecallRecipe, now: datetime) -> list[ScoredItem]:
    """The fusion stage: score one layer's hits (``items[i]`` describes ``hits[i]``),
    ``layer_weight × memory_weight × (w_similarity·similarity + w_decay·decay +
    w_confidence·confidence + w_type·type_priority)``; a ranked turn's similarity is its
    ranking's score."""
    weight = recipe.layer_weights.get(layer, 1.0)
    out = []
    for hit, item in zip(hits, items, strict=True):
        raw_dense, bm25 = hit.parts.get("dense", 0.0), hit.parts.get("lexical", 0.0)
        dense = max(0.0, raw_dense)
        lexical = lexical_similarity(bm25, recipe.bm25_half)
        match = hit.turn.score if hit.turn is not None else similarity(raw_dense, bm25, recipe)
        when = item.created_at or now
        decay = decay_weight((now - when).total_seconds() / 86400,
                             recipe.half_life_days.get(layer), recipe.decay_floor)
        confidence = item.confidence if item.confidence is not None else 1.0
        if item.source == Source.INFERRED.value:
            confidence *= recipe.inferred_confidence
        type_priority = recipe.type_priority.get(kind, recipe.unknown_type_priority)
        memory_weight = float(hit.record.payload.get("weight", 1.0))
        score = weight * memory_weight * (
            recipe.w_similarity * match + recipe.w_decay * decay
            + recipe.w_confidence * confidence + recipe.w_type * type_priority)
        out.append(item.model_copy(update={"score": score, "breakdown": ScoreBreakdown(
            similarity=match, dense=dense, lexical=lexical,
            # the strongest single signal: what the relevance gate looks at
            relevance=round(max(match, dense, lexical), 4), time_decay=decay,
            confidence=confidence, type_priority=type_priority, layer_weight=weight,
            memory_weight=memory_weight, turn=hit.turn)}))
    return out


def _words(text: str) -> set[str]:
    return set(re.findall(r"[\w\u4e00-\u9fff]", text.lower())) if re.search(
        r"[\u4e00-\u9fff]", text) else set(re.findall(r"\w+", text.lower()))


def dedup(items: Sequence[ScoredItem], threshold: float) -> list[ScoredItem]:
    """Drop near-duplicates (Jaccard of words ≥ threshold), keeping the higher score."""
    kept: list[tuple[ScoredItem, set[str]]] = []
    for item in sorted(items, key=lambda i: i.score, reverse=True):
        words = _words(item.text)
        if any(len(words & w) / max(1, len(words | w)) >= threshold for _, w in kept):
            continue
        kept.append((item, words))
    return [i for i, _ in kept]


def normalised_text(text: str) -> str:
    """The text as copies are compared: case and runs of whitespace do not count."""
    return " ".join(text.lower().split())


def collapse_copies(items: Sequence[ScoredItem]) -> list[ScoredItem]:
    """One item per knowledge text: the same chunk imported under several documents is kept
    once, the best scored, its kind naming every document that holds it
    (``kb:ops/exports+handbook/copy``). Other layers pass through."""
    best: dict[str, ScoredItem] = {}
    holders: dict[str, list[str]] = {}
    out: list[ScoredItem | str] = []
    for item in sorted(items, key=lambda i: i.score, reverse=True):
        if item.layer != Layer.KNOWLEDGE:
            out.append(item)
            continue
        key = normalised_text(item.text)
        if key not in best:
            best[key] = item
            out.append(key)
        holders.setdefault(key, [])
        if item.kind not in holders[key]:
            holders[key].append(item.kind)
    return [x if isinstance(x, ScoredItem) else best[x].model_copy(update={
        "kind": "kb:" + "+".join(k.removeprefix("kb:") for k in holders[x])}) for x in out]
