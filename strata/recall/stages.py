"""Recall's stages, by name: the list a recipe runs, and the parameters each one owns.

A recall is a pipeline of named stages. ``RecallRecipe.stages`` lists the ones it runs, in
this order (the default runs them all); a stage is switched off by leaving it out of that
tuple, never by a zero weight, and re-weighted through the parameters it owns (``STAGES``
says which fields of the recipe those are; the generated table,
docs/ranking-parameters.md, shows each parameter's stage)::

    candidates        search → said_then → entities → exchanges → keywords
    episode ranking   coverage → speaker_boost → time_boost → answer_boost
                      → question_penalty → session
    late_interaction  (the shortlist re-scored token by token, ranked again)
    merge             (a turn and its close exchange partner become one item)
    fusion            (layer weight × weighted similarity, decay, confidence, type)
    expansion         (the optional LLM's statements searched too)
    assembly          select → project → assembly

Each phase that runs where its data is holds its stages' steps in one table, run in the
recipe's order by ``strata.recall.pipeline.Phase``: the candidates
(``strata.recall.candidates.CANDIDATES``), the episodes' ranking after the formula
(``strata.recall.granularity.RANKING``: late interaction, merge); the formula's terms are
``granularity.TERMS``. ``StageInfo.module`` names the module whose table runs the stage.

Every candidate carries a typed score breakdown (``strata.recall.scoring.ScoreBreakdown``,
and ``strata.models.TurnScore`` for a ranked turn) whose ``by_stage()`` names the stages and
what each contributed; a recall with ``debug`` returns it per candidate, beside the stage
list of its recipe.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["DEFAULT_STAGES", "EPISODE_RANKING", "ORDER", "REQUIRED", "STAGES", "TURN_TERMS",
           "Stage", "StageInfo", "check_stages"]


class Stage(StrEnum):
    """A stage of recall, in the order a recall runs them."""

    SEARCH = "search"
    SAID_THEN = "said_then"
    ENTITIES = "entities"
    EXCHANGES = "exchanges"
    KEYWORDS = "keywords"
    COVERAGE = "coverage"
    SPEAKER_BOOST = "speaker_boost"
    TIME_BOOST = "time_boost"
    ANSWER_BOOST = "answer_boost"
    QUESTION_PENALTY = "question_penalty"
    SESSION = "session"
    LATE_INTERACTION = "late_interaction"
    MERGE = "merge"
    FUSION = "fusion"
    EXPANSION = "expansion"
    SELECT = "select"
    PROJECT = "project"
    ASSEMBLY = "assembly"


@dataclass(frozen=True)
class StageInfo:
    """What a stage does, where it runs, and the recipe fields it owns."""

    phase: str
    module: str
    parameters: tuple[str, ...]
    what: str


STAGES: dict[Stage, StageInfo] = {
    Stage.SEARCH: StageInfo(
        "candidates", "strata.recall.candidates", ("search", "candidates_per_layer"),
        "each routed layer's own search (hybrid, dense or lexical)"),
    Stage.SAID_THEN: StageInfo(
        "candidates", "strata.recall.candidates", ("period_candidates", "max_dates"),
        "episodes: the best turns said on each date the query names"),
    Stage.ENTITIES: StageInfo(
        "candidates", "strata.recall.candidates", (
            "entity_candidates", "entity_weight", "entity_found_too", "entity_past_late",
            "entity_sources"),
        "episodes: the turns the user's entity index reaches from the query's entities and "
        "the kinds it asks for (what state, which instruments, who), with their own weight"),
    Stage.EXCHANGES: StageInfo(
        "candidates", "strata.recall.candidates", ("exchange_weight",),
        "episodes: exchanges (two neighbouring turns) searched and fused with their turns"),
    Stage.KEYWORDS: StageInfo(
        "candidates", "strata.recall.candidates", (),
        "procedures whose keywords the query contains count as a full dense match"),
    Stage.COVERAGE: StageInfo(
        "episode ranking", "strata.recall.granularity", ("coverage_weight",),
        "+ the share of the query's distinct terms a turn and its exchange contain"),
    Stage.SPEAKER_BOOST: StageInfo(
        "episode ranking", "strata.recall.granularity", ("speaker_boost",),
        "+ for the turns of the person the query names"),
    Stage.TIME_BOOST: StageInfo(
        "episode ranking", "strata.recall.granularity", ("time_boost", "time_mentions"),
        "+ for a turn said on (or speaking of) a date the query names"),
    Stage.ANSWER_BOOST: StageInfo(
        "episode ranking", "strata.recall.granularity", ("answer_boost",),
        "+ for a turn that holds the kind of answer the query asks for"),
    Stage.QUESTION_PENALTY: StageInfo(
        "episode ranking", "strata.recall.granularity", ("question_penalty",),
        "− the share of a turn's words that are in questions"),
    Stage.SESSION: StageInfo(
        "episode ranking", "strata.recall.granularity", ("session_weight",),
        "a turn lifted by the best turn of its session"),
    Stage.LATE_INTERACTION: StageInfo(
        "late interaction", "strata.recall.granularity", ("late_share", "late_candidates"),
        "the best turns re-scored token by token (MaxSim) and ranked again; the rest dropped"),
    Stage.MERGE: StageInfo(
        "merge", "strata.recall.granularity", ("neighbour_ratio", "neighbour_side"),
        "a turn merged with an exchange partner nearly as relevant, into one item"),
    Stage.FUSION: StageInfo(
        "fusion", "strata.recall.scoring", (
            "layer_weights", "w_similarity", "w_decay", "w_confidence", "w_type",
            "dense_share", "bm25_half", "type_priority", "unknown_type_priority",
            "inferred_confidence", "half_life_days", "decay_floor"),
        "layer weight × (similarity, time decay, confidence, type priority, weighted)"),
    Stage.EXPANSION: StageInfo(
        "expansion", "strata.recall.expansion", ("expansion_weight",),
        "with an LLM configured: the statements it writes for the query are searched too"),
    Stage.SELECT: StageInfo(
        "assembly", "strata.recall.assembly", (
            "threshold", "min_similarity", "relaxed_factor", "relaxed_floor"),
        "candidates relevant enough and above the score threshold (relaxed once)"),
    Stage.PROJECT: StageInfo(
        "assembly", "strata.recall.assembly", ("context_boost", "other_context_cap"),
        "the request's project / business line first"),
    Stage.ASSEMBLY: StageInfo(
        "assembly", "strata.recall.assembly", (
            "dedup_jaccard", "pool_per_item", "working_share", "summary_share"),
        "dedup, the budget shared by the best items, the labelled context"),
}

# the order every recipe's stages run in
ORDER: tuple[Stage, ...] = tuple(Stage)
# what the default recipe runs: every stage but the entity index's candidates (which did
# not pay under leave-one-conversation-out; the ``entities`` profiles run it)
DEFAULT_STAGES: tuple[Stage, ...] = tuple(s for s in Stage if s is not Stage.ENTITIES)
# a recall cannot run without these
REQUIRED = frozenset({Stage.SEARCH, Stage.FUSION, Stage.SELECT, Stage.ASSEMBLY})
# the terms added to a turn's score, in this order (``strata.recall.granularity``)
TURN_TERMS = (Stage.COVERAGE, Stage.SPEAKER_BOOST, Stage.TIME_BOOST, Stage.ANSWER_BOOST)
# the stages of the episodes layer's ranking: with none of them, turns go as searched
EPISODE_RANKING = frozenset({Stage.EXCHANGES, *TURN_TERMS, Stage.QUESTION_PENALTY,
                             Stage.SESSION, Stage.LATE_INTERACTION, Stage.MERGE})


def check_stages(stages: tuple[Stage, ...]) -> tuple[Stage, ...]:
    """``stages`` if each is named once, in the order recall runs them, with the required
    ones; else ValueError."""
    if len(set(stages)) != len(stages):
        raise ValueError("a stage is listed twice")
    order = list(ORDER)
    if [order.index(s) for s in stages] != sorted(order.index(s) for s in stages):
        raise ValueError(f"stages run in this order: {', '.join(order)}")
    missing = sorted(REQUIRED - set(stages))
    if missing:
        raise ValueError(f"a recall needs the stages {', '.join(missing)}")
    return stages
