"""Named recall recipes: search configuration as data, so alternatives compare by name."""

from __future__ import annotations

from pydantic import BaseModel, Field

from strata.models import Layer, MemoryKind

__all__ = ["DEFAULT", "DENSE_ONLY", "HYBRID_RRF", "LEXICAL_ONLY", "POOLED", "RECIPES",
           "TURNS_ONLY", "RecallRecipe"]


class RecallRecipe(BaseModel):
    """Weights and knobs of one way of recalling (defaults from the seeds)."""

    model_config = {"frozen": True}

    name: str
    search: str = Field(default="hybrid", pattern="^(hybrid|dense|lexical)$")
    candidates_per_layer: int = 30
    layer_weights: dict[Layer, float] = Field(default_factory=lambda: {
        Layer.WORKING: 1.2, Layer.FACTS: 0.8, Layer.EPISODES: 0.8, Layer.PROCEDURES: 0.8,
        Layer.KNOWLEDGE: 1.0})
    w_similarity: float = 0.5
    w_decay: float = 0.2
    w_confidence: float = 0.2
    w_type: float = 0.1
    dense_share: float = 0.5  # similarity = dense_share·cosine + (1-dense_share)·lexical
    bm25_half: float = 10.0  # the BM25 score that counts as a half match
    # by a memory's kind, "knowledge" for a knowledge chunk
    type_priority: dict[str, float] = Field(default_factory=lambda: {
        MemoryKind.FACT: 1.0, MemoryKind.PROCEDURE: 0.9, Layer.KNOWLEDGE: 0.8,
        MemoryKind.EPISODE: 0.6})
    half_life_days: dict[Layer, float] = Field(default_factory=lambda: {
        Layer.FACTS: 30.0, Layer.EPISODES: 7.0})
    # time decay counts from when a memory happened (its event time), down to this floor
    decay_floor: float = Field(default=0.5, ge=0.0, le=1.0)
    threshold: float = 0.3
    # below this (the strongest of cosine, saturated BM25 and the mix) a candidate is
    # unrelated, whatever its recency
    min_similarity: float = 0.2
    # the floor of the relaxed pass for knowledge chunks (strata.recall.service.could_pass):
    # relaxing halves min_similarity, but never below this — MiniLM gives unrelated text
    # ("anything?" against a documentation chunk) a cosine of 0.0–0.13, a weak real match
    # 0.18 or more
    relaxed_floor: float = Field(default=0.15, ge=0.0, le=1.0)
    dedup_jaccard: float = 0.8
    # episodes at two granularities (strata.recall.granularity); exchange_weight 0: turns only
    exchange_weight: float = Field(default=0.7, ge=0.0, le=1.0)
    session_weight: float = Field(default=0.5, ge=0.0)
    neighbour_ratio: float = Field(default=0.8, ge=0.0)  # > 1: never merge neighbours
    speaker_boost: float = Field(default=0.2, ge=0.0)  # the turns of the person asked about
    # turns said on a date the query names, or (time_mentions) speaking of one ("last week",
    # said on 2 July, is in June; strata.recall.relative_dates); the boost chosen by
    # leave-one-conversation-out on LoCoMo dev (docs/benchmarks.md)
    time_boost: float = Field(default=0.4, ge=0.0)
    time_mentions: bool = True
    # a query that names a date also searches the turns said then, this many per date
    # (strata.recall.service): the time boost can only lift a turn that is a candidate;
    # chosen by leave-one-conversation-out on LoCoMo dev (docs/benchmarks.md)
    period_candidates: int = Field(default=30, ge=0)
    # a turn that holds the kind of answer the query asks for (a number, a time, a place, a
    # name, a person; strata.recall.answer_types); chosen by leave-one-conversation-out on
    # LoCoMo dev (docs/benchmarks.md)
    answer_boost: float = Field(default=0.15, ge=0.0)
    coverage_weight: float = Field(default=0.05, ge=0.0)  # the share of query terms matched
    # subtracted × the share of a turn's words that are in questions (it asks, not tells;
    # chosen by leave-one-conversation-out on LoCoMo dev, docs/benchmarks.md)
    question_penalty: float = Field(default=0.05, ge=0.0)
    # when both neighbours of a turn are close enough to merge, the one it is merged with:
    # 1 the one after it (what answered or followed it), -1 the one before, 0 the more
    # relevant (chosen by leave-one-conversation-out on LoCoMo dev, docs/benchmarks.md)
    neighbour_side: int = Field(default=1, ge=-1, le=1)
    # episodes: similarity = late_share·MaxSim + (1-late_share)·BM25 when the embedder gives
    # token vectors (strata.recall.late); 0: the pooled cosine with dense_share
    late_share: float = Field(default=0.8, ge=0.0, le=1.0)
    late_candidates: int = Field(default=20, ge=1)  # the turns re-scored token by token
    # the optional LLM path (strata.recall.expansion): a candidate found by a statement the
    # model wrote scores × this, and keeps its best score (1: as if the question had found
    # it, which floods the context with the model's guesses); chosen by
    # leave-one-conversation-out on LoCoMo dev with a local 1.5B model (docs/benchmarks.md)
    expansion_weight: float = Field(default=0.8, ge=0.0, le=1.0)
    # a scenario profile's layers: the only ones this recipe searches (working memory is
    # kept when the request has a session); None: whatever the route picks. A request that
    # names its layers is served as asked.
    layers: tuple[Layer, ...] | None = None
    description: str = ""


HYBRID_RRF = RecallRecipe(name="hybrid")
DENSE_ONLY = RecallRecipe(name="dense", search="dense", dense_share=1.0, late_share=0.0)
LEXICAL_ONLY = RecallRecipe(name="lexical", search="lexical", dense_share=0.0, late_share=0.0)
TURNS_ONLY = RecallRecipe(name="turns", exchange_weight=0.0, session_weight=0.0,
                          neighbour_ratio=2.0, coverage_weight=0.0, late_share=0.0)
POOLED = RecallRecipe(name="pooled", late_share=0.0)  # the default without late interaction
# Scenario profiles (seed 002's last section: the hard part is the layer weights of the
# business scenario; some need no long-term episodes at all). Chosen per request (``recipe``),
# per API key or per tenant (STRATA_API_KEYS' "recipe", STRATA_TENANT_RECIPES).
QA = RecallRecipe(
    name="qa", layers=(Layer.WORKING, Layer.PROCEDURES, Layer.KNOWLEDGE),
    description="one-shot Q&A: the conversation, the agent's procedures and the knowledge "
                "base; nothing from the user's past")
ADVISOR = RecallRecipe(
    name="advisor", layer_weights={Layer.WORKING: 1.2, Layer.FACTS: 1.1, Layer.EPISODES: 0.7,
                                   Layer.PROCEDURES: 0.8, Layer.KNOWLEDGE: 0.8},
    half_life_days={Layer.FACTS: 90.0, Layer.EPISODES: 14.0},
    description="a long-running advisor: what the user stated (facts) ahead of what happened "
                "(episodes), both remembered longer")
SUPPORT = RecallRecipe(
    name="support", layer_weights={Layer.WORKING: 1.2, Layer.FACTS: 0.7, Layer.EPISODES: 0.6,
                                   Layer.PROCEDURES: 1.0, Layer.KNOWLEDGE: 1.3},
    description="a support desk: the knowledge base and procedures first, the user's "
                "memories as background")
DEFAULT = HYBRID_RRF
RECIPES: dict[str, RecallRecipe] = {r.name: r for r in (
    HYBRID_RRF, DENSE_ONLY, LEXICAL_ONLY, TURNS_ONLY, POOLED, QA, ADVISOR, SUPPORT)}
