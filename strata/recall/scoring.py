"""Fusion scoring: ``layer_weight × (w1·similarity + w2·time_decay + w3·confidence +
w4·type_priority)`` with decay ``exp(-λ·days)``, λ = ln 2 / half-life."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel, Field

from strata.models import Layer, Provenance, SearchHit, Source
from strata.recall.recipes import RecallRecipe

__all__ = ["ScoredItem", "collapse_copies", "decay_weight", "dedup", "normalised_text",
           "score_hits", "similarity"]


def decay_weight(days: float, half_life_days: float | None, floor: float = 0.0) -> float:
    """``floor + (1 - floor)·exp(-λ·days)``; 1.0 for layers that do not decay. The floor
    keeps an old memory rankable: recency orders similar memories, it does not erase a
    conversation imported with old dates."""
    if not half_life_days:
        return 1.0
    return floor + (1 - floor) * math.exp(-math.log(2) / half_life_days * max(0.0, days))


class ScoredItem(BaseModel):
    """A recall candidate with its score and the parts it was made of."""

    id: str
    layer: Layer
    kind: str
    text: str
    score: float = 0.0
    created_at: datetime | None = None  # when it happened: the label's date, what decay counts from
    confidence: float | None = None
    source: str | None = None
    provenance: Provenance = Field(default_factory=Provenance)
    parts: dict[str, float] = Field(default_factory=dict)
    access_count: int = 0
    context: str | None = None  # the project / business line it belongs to
    speaker: str | None = None  # who said it, in a multi-party conversation


def lexical_similarity(bm25: float, half: float) -> float:
    """BM25 mapped to 0–1 by saturation (``half`` scores 0.5), so a weak match stays weak
    whatever else ranks."""
    return bm25 / (bm25 + half) if bm25 > 0 else 0.0


def similarity(parts: dict[str, float], recipe: RecallRecipe) -> float:
    """How well a hit matches the query, 0–1: a precomputed ``similarity`` part (fused
    granularities), else the recipe's mix of the token-level similarity (when scored) or the
    dense cosine, and saturated BM25."""
    if "similarity" in parts:
        return parts["similarity"]
    lexical = lexical_similarity(parts.get("lexical", 0.0), recipe.bm25_half)
    if "late" in parts and recipe.late_share > 0:  # token-level (MaxSim) instead of pooled
        return recipe.late_share * max(0.0, parts["late"]) + (1 - recipe.late_share) * lexical
    dense = max(0.0, parts.get("dense", 0.0))
    return recipe.dense_share * dense + (1 - recipe.dense_share) * lexical


def score_hits(layer: Layer, kind: str, hits: Sequence[SearchHit], items: Sequence[ScoredItem],
               recipe: RecallRecipe, now: datetime) -> list[ScoredItem]:
    """Score one layer's hits (``items[i]`` describes ``hits[i]``)."""
    weight = recipe.layer_weights.get(layer, 1.0)
    out = []
    for hit, item in zip(hits, items, strict=True):
        dense = max(0.0, hit.parts.get("dense", 0.0))
        lexical = lexical_similarity(hit.parts.get("lexical", 0.0), recipe.bm25_half)
        match = similarity(hit.parts, recipe)
        when = item.created_at or now
        decay = decay_weight((now - when).total_seconds() / 86400,
                             recipe.half_life_days.get(layer), recipe.decay_floor)
        confidence = item.confidence if item.confidence is not None else 1.0
        if item.source == Source.INFERRED.value:
            confidence *= recipe.inferred_confidence
        type_priority = recipe.type_priority.get(kind, recipe.unknown_type_priority)
        memory_weight = hit.record.payload.get("weight", 1.0)
        score = weight * float(memory_weight) * (
            recipe.w_similarity * match + recipe.w_decay * decay
            + recipe.w_confidence * confidence + recipe.w_type * type_priority)
        extra = {k: round(hit.parts[k], 4) for k in ("turn", "exchange", "session", "speaker",
                                                   "time", "answer", "coverage", "late")
                 if k in hit.parts}
        out.append(item.model_copy(update={"score": score, "parts": {
            **extra, "similarity": round(match, 4), "dense": round(dense, 4),
            # the strongest single signal: what the relevance gate looks at
            "relevance": round(max(match, dense, lexical), 4),
            "lexical": round(lexical, 4), "time_decay": round(decay, 4),
            "confidence": round(confidence, 4), "type_priority": type_priority,
            "layer_weight": weight, "memory_weight": float(memory_weight)}}))
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
