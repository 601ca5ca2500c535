"""Named recall recipes: search configuration as data, so alternatives compare by name.

``RecallRecipe`` is the one table of ranking parameters: every figure the ranking uses is a
field here, with what it does and where its value came from (``json_schema_extra["source"]``:
a leave-one-conversation-out result on LoCoMo dev and its section of docs/benchmarks.md, or
"chosen by hand"). ``python -m strata.recall.parameters --write docs/ranking-parameters.md``
renders it, per-profile overrides included; a unit test keeps that page equal to the code.
``stages`` is the recipe's pipeline (``strata.recall.stages``): a stage is switched off by
leaving it out, and each parameter belongs to one stage.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from strata.errors import InvalidInput
from strata.models import Layer, MemoryKind
from strata.recall.stages import DEFAULT_STAGES, ORDER, Stage, check_stages

__all__ = ["BY_HAND", "DEFAULT", "DENSE_ONLY", "ENTITY_PROFILES", "ENTITY_SOURCES", "HYBRID_RRF",
           "LEXICAL_ONLY", "POOLED", "RECIPES", "TURNS_ONLY", "RecallRecipe", "choose_recipe",
           "with_stages", "without"]

BY_HAND = "chosen by hand"
_LOO = "leave-one-conversation-out on LoCoMo dev"
_DOC = "docs/benchmarks.md#"
_SWEEP = (f"{_LOO}, 2026-12-01: one step either side of the default, no fold's choice beat it "
          f"held out; kept ({_DOC}late-interaction-over-the-querys-content-words-and-a-weight"
          "-sweep-that-finds-nothing-20-14-2026-12-01-afternoon)")
_TURNS_THAT_ASK = f"{_DOC}names-out-of-the-dense-query-and-turns-that-ask-20-2026-12-01-evening"
ENTITY_SOURCES = ("gazetteer", "lexicon", "names")  # strata.entities.asked.SOURCES
_ENTITY_LOO = (f"{_LOO}, 2026-12-03: every fold chose the gazetteer alone "
               "(entities-only-gazetteer), held-out R@10 0.857 / MRR 0.690 against the default's "
               "0.853 / 0.691, so the default does not run the stage "
               f"({_DOC}the-entity-index-as-a-recall-candidate-source-locomo-dev-under-leave-one-"
               "conversation-out-38-2026-12-03)")
_RELATIVE_DATES = (f"{_DOC}relative-dates-in-the-context-and-four-ranking-ideas-that-do-not-"
                   "help-20-2026-12-01-night")


def _param(default: Any, what: str, source: str = BY_HAND, **constraints: Any) -> Any:
    """A ranking parameter: its default, what it does, where the value came from."""
    extra: dict[str, Any] = {"source": source}
    if callable(default):
        return Field(default_factory=default, description=what, json_schema_extra=extra,
                     **constraints)
    return Field(default=default, description=what, json_schema_extra=extra, **constraints)


class RecallRecipe(BaseModel):
    """The ranking parameters of one way of recalling (see the module's docstring)."""

    model_config = {"frozen": True}

    name: str
    stages: tuple[Stage, ...] = _param(
        DEFAULT_STAGES, "the stages this recipe runs, in order (strata.recall.stages); a stage "
        "left out is switched off")
    # -- candidates (strata.recall.service) -------------------------------------------------
    search: str = _param("hybrid", "how each layer is searched: hybrid (dense + BM25), dense "
                         "or lexical", pattern="^(hybrid|dense|lexical)$")
    candidates_per_layer: int = _param(30, "the candidates each layer's search returns")
    period_candidates: int = _param(
        30, "a query that names a date also searches the turns said then, this many per date "
        "(the time boost can only lift a turn that is a candidate)",
        f"{_LOO}, 2026-12-02: four folds of five chose 30, held-out R@10 0.850 "
        f"({_DOC}turns-said-on-the-date-a-question-names-20-2026-12-02-late-morning)", ge=0)
    max_dates: int = _param(4, "the dates of one query whose turns are searched (a search "
                            "each: bounded)", ge=0)
    # -- the entity index's candidates (strata.recall.service, strata.recall.granularity) --
    entity_candidates: int = _param(
        20, "episodes: the turns the user's entity index reaches that join the candidates, "
        "best first by RRF of their cosine and their reasons' specificity",
        BY_HAND + " (the candidate ceiling's cap, 2026-12-03: reach ≤20 kept most of the "
        f"gain; {_DOC}the-entity-indexs-candidate-ceiling-what-the-first-stage-could-see-with-"
        "it-38-2026-12-03)", ge=1)
    entity_weight: float = _param(
        0.2, "+ this for a turn the entity index reached (one of the entity_candidates), "
        "whether the search found it or not", _ENTITY_LOO, ge=0.0)
    entity_found_too: bool = _param(
        True, "entity_weight lifts the reached turns the search found as well (false: only "
        "the ones the entity index added, a separate source rather than a boost)", _ENTITY_LOO)
    entity_past_late: bool = _param(
        False, "the turns the entity index reached pass late interaction's cut (its "
        "late_candidates) and are re-scored with the shortlist, instead of competing for it",
        _ENTITY_LOO)
    entity_sources: tuple[str, ...] = _param(
        ("gazetteer", "lexicon", "names"), "what the entity index may reach through: the "
        "gazetteer (places, place levels), the category lexicon (things, categories), the "
        "proper nouns (names, titles, the people a question asks for)", _ENTITY_LOO)
    # -- fusion score (strata.recall.scoring) ----------------------------------------------
    layer_weights: dict[Layer, float] = _param(lambda: {
        Layer.WORKING: 1.2, Layer.FACTS: 0.8, Layer.EPISODES: 0.8, Layer.PROCEDURES: 0.8,
        Layer.KNOWLEDGE: 1.0}, "a layer's candidates' scores × this")
    w_similarity: float = _param(0.5, "weight of the similarity in the fusion score")
    w_decay: float = _param(0.2, "weight of the time decay in the fusion score")
    w_confidence: float = _param(0.2, "weight of the memory's confidence in the fusion score")
    w_type: float = _param(0.1, "weight of the type priority in the fusion score")
    dense_share: float = _param(0.5, "similarity = dense_share·cosine + (1 - dense_share)·"
                                "saturated BM25 (when not scored token by token)")
    bm25_half: float = _param(10.0, "the BM25 score that counts as a half match (BM25 "
                              "saturated to 0–1)")
    type_priority: dict[str, float] = _param(lambda: {
        MemoryKind.FACT: 1.0, MemoryKind.PROCEDURE: 0.9, Layer.KNOWLEDGE: 0.8,
        MemoryKind.EPISODE: 0.6}, "the type priority of a memory's kind (knowledge: a "
        "knowledge chunk)")
    unknown_type_priority: float = _param(0.5, "the type priority of a kind not listed")
    inferred_confidence: float = _param(0.5, "an inferred memory's confidence × this (what "
                                        "the agent inferred ranks below what was stated)",
                                        ge=0.0, le=1.0)
    half_life_days: dict[Layer, float] = _param(lambda: {
        Layer.FACTS: 30.0, Layer.EPISODES: 7.0}, "the time decay's half-life per layer "
        "(exp(-ln 2 / half-life · days); a layer not listed does not decay)")
    decay_floor: float = _param(0.5, "time decay counts from when a memory happened (its "
                                "event time), down to this floor: recency orders similar "
                                "memories, it does not erase old ones", ge=0.0, le=1.0)
    # -- episodes: two granularities (strata.recall.granularity) ----------------------------
    exchange_weight: float = _param(0.7, "a turn's similarity mixes its own (1 - w) with its "
                                    "best exchange's (w)", _SWEEP,
                                    ge=0.0, le=1.0)
    session_weight: float = _param(0.5, "a turn's score is lifted by the best turn of its "
                                   "session: (turn + s·best) / (1 + s)", _SWEEP, ge=0.0)
    coverage_weight: float = _param(0.05, "+ this × the share of the query's distinct terms "
                                    "the turn and its exchange contain", _SWEEP, ge=0.0)
    speaker_boost: float = _param(
        0.2, "+ this for the turns of the person the query asks about", BY_HAND + " (0.3 and "
        f"0.4 measured lower on LoCoMo dev in-sample, 2026-12-01, {_RELATIVE_DATES})", ge=0.0)
    time_boost: float = _param(
        0.4, "+ this for a turn said on a date the query names (or speaking of one, with "
        "time_mentions)", f"{_LOO}, 2026-12-01 ({_RELATIVE_DATES})", ge=0.0)
    time_mentions: bool = _param(
        True, "the time boost also lifts a turn that speaks of a day in the named period "
        "(\"last week\", said on 2 July, is in June)", f"{_LOO}, 2026-12-01 ({_RELATIVE_DATES})")
    answer_boost: float = _param(
        0.15, "+ this for a turn that holds the kind of answer the query asks for (a number, "
        "a time, a place, a name, a person)", f"{_LOO}, 2026-12-02: every fold chose 0.15 "
        f"({_DOC}turns-that-hold-the-kind-of-answer-asked-for-20-2026-12-02-morning)", ge=0.0)
    question_penalty: float = _param(
        0.05, "− this × the share of a turn's words that are in questions (it asks, not "
        "tells)", f"{_LOO}, 2026-12-01: every fold chose 0.05 ({_TURNS_THAT_ASK})", ge=0.0)
    neighbour_ratio: float = _param(
        0.8, "a turn is merged with an exchange partner that scores at least this × its own "
        "score", _SWEEP, ge=0.0)
    neighbour_side: int = _param(
        1, "when both neighbours could merge, the one taken: 1 the one after (what answered "
        "it), -1 the one before, 0 the more relevant", f"{_LOO}, 2026-12-01 "
        f"({_TURNS_THAT_ASK})", ge=-1, le=1)
    # -- late interaction (strata.recall.late) ----------------------------------------------
    late_share: float = _param(0.8, "episodes: similarity = late_share·MaxSim + (1 - "
                               "late_share)·BM25 when token vectors exist",
                               _SWEEP, ge=0.0, le=1.0)
    late_candidates: int = _param(20, "the best turns re-scored token by token (the others "
                                  "are dropped)", _SWEEP, ge=1)
    # -- the optional LLM path (strata.recall.expansion) ------------------------------------
    expansion_weight: float = _param(
        0.8, "a candidate found by a statement the model wrote scores × this and keeps its "
        "best score (1 floods the context with the model's guesses)", f"{_LOO}, 2026-12-02, "
        "with a local 1.5B model: every fold chose 0.8 "
        f"({_DOC}recalls-optional-llm-path-measured-with-a-local-model-20-2026-12-02-night)",
        ge=0.0, le=1.0)
    # -- selection and assembly (strata.recall.assembly, strata.recall.context) -------------
    threshold: float = _param(0.3, "a candidate's score must reach this")
    min_similarity: float = _param(0.2, "below this (the strongest of cosine, saturated BM25 "
                                   "and the mix) a candidate is unrelated, whatever its "
                                   "recency")
    relaxed_factor: float = _param(0.5, "when nothing passes, both thresholds × this, once",
                                   ge=0.0, le=1.0)
    relaxed_floor: float = _param(
        0.15, "a knowledge chunk's relaxed similarity threshold never goes below this (MiniLM "
        "gives unrelated text a cosine of 0.0–0.13, a weak real match 0.18 or more)",
        ge=0.0, le=1.0)
    dedup_jaccard: float = _param(0.8, "two candidates whose words overlap this much (Jaccard) "
                                  "are one: the better scored is kept")
    pool_per_item: int = _param(3, "the best top_k × this candidates are offered to the "
                                "budget (an item that cannot fit is passed over)", ge=1)
    context_boost: float = _param(1.25, "the current project's / business line's memories "
                                  "score × this", ge=1.0)
    other_context_cap: float = _param(0.99, "another context's memories are capped at this × "
                                      "the lowest score of the current one's, so never outrank "
                                      "them", ge=0.0, le=1.0)
    working_share: float = _param(0.6, "working memory may use at most this share of the "
                                  "budget", ge=0.0, le=1.0)
    summary_share: float = _param(0.4, "the rolling summary may use at most this share of "
                                  "working memory's", ge=0.0, le=1.0)
    # -- scenario profiles ------------------------------------------------------------------
    layers: tuple[Layer, ...] | None = _param(
        None, "a scenario profile's layers: the only ones it searches (working memory is kept "
        "when the request has a session); none: whatever the route picks")
    description: str = ""

    @field_validator("entity_sources")
    @classmethod
    def _known_sources(cls, sources: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(sources) - set(ENTITY_SOURCES))
        if unknown:
            raise ValueError(f"unknown entity sources {unknown}; of {list(ENTITY_SOURCES)}")
        return sources

    @field_validator("stages")
    @classmethod
    def _stages_in_order(cls, stages: tuple[Stage, ...]) -> tuple[Stage, ...]:
        return check_stages(stages)

    def runs(self, stage: Stage) -> bool:
        """Whether this recipe runs ``stage``."""
        return stage in self.stages


def without(*left_out: Stage) -> tuple[Stage, ...]:
    """The default stages but ``left_out``."""
    return tuple(s for s in DEFAULT_STAGES if s not in left_out)


def with_stages(*added: Stage) -> tuple[Stage, ...]:
    """The default stages and ``added``, in the order stages run."""
    return tuple(s for s in ORDER if s in DEFAULT_STAGES or s in added)


HYBRID_RRF = RecallRecipe(name="hybrid")
# keywords join procedures' candidates of a hybrid search only
DENSE_ONLY = RecallRecipe(name="dense", search="dense", dense_share=1.0,
                          stages=without(Stage.KEYWORDS, Stage.LATE_INTERACTION))
LEXICAL_ONLY = RecallRecipe(name="lexical", search="lexical", dense_share=0.0,
                            stages=without(Stage.KEYWORDS, Stage.LATE_INTERACTION))
TURNS_ONLY = RecallRecipe(name="turns", stages=without(
    Stage.EXCHANGES, Stage.COVERAGE, Stage.SPEAKER_BOOST, Stage.TIME_BOOST,
    Stage.ANSWER_BOOST, Stage.QUESTION_PENALTY, Stage.SESSION, Stage.LATE_INTERACTION,
    Stage.MERGE), description="turns as searched: no episode ranking, no late interaction, "
    "no merging")
POOLED = RecallRecipe(name="pooled", stages=without(Stage.LATE_INTERACTION),
                      description="the default without late interaction")
# Scenario profiles: what differs between business scenarios is mostly the layer weights,
# and some need no long-term episodes at all. Chosen per request (``recipe``),
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
# The entity index as a candidate source (#38): the candidates the leave-one-conversation-
# out choice compared (``bench/locomo_loo.py``), and each source alone (the ablation).
_ENTITIES = with_stages(Stage.ENTITIES)
ENTITY_PROFILES = (
    RecallRecipe(name="entities", stages=_ENTITIES,
                 description="the default with the entity index's candidates"),
    *(RecallRecipe(name=f"entities-w{round(w * 100)}", stages=_ENTITIES, entity_weight=w,
                   description=f"the entities profile with entity_weight {w}")
      for w in (0.1, 0.3, 0.4)),
    RecallRecipe(name="entities-c10", stages=_ENTITIES, entity_candidates=10,
                 description="the entities profile with 10 entity candidates"),
    *(RecallRecipe(name=f"entities-added-w{round(w * 100)}-c{c}", stages=_ENTITIES,
                   entity_weight=w, entity_candidates=c, entity_found_too=False,
                   description=f"only the turns the index added get entity_weight {w}; "
                   f"{c} entity candidates")
      for w, c in ((0.2, 20), (0.3, 10), (0.2, 10))),
    RecallRecipe(name="entities-kept-c10", stages=_ENTITIES, entity_candidates=10,
                 entity_past_late=True, description="the entities-c10 profile with the "
                 "reached turns past late interaction's cut"),
    RecallRecipe(name="entities-kept-gazetteer", stages=_ENTITIES, entity_past_late=True,
                 entity_sources=("gazetteer",), description="the entities-only-gazetteer "
                 "profile with the reached turns past late interaction's cut"),
    *(RecallRecipe(name=f"entities-only-{source}", stages=_ENTITIES,
                   entity_sources=(source,),
                   description=f"the entities profile reaching through the {source} alone")
      for source in ENTITY_SOURCES))
DEFAULT = HYBRID_RRF
RECIPES: dict[str, RecallRecipe] = {r.name: r for r in (
    HYBRID_RRF, DENSE_ONLY, LEXICAL_ONLY, TURNS_ONLY, POOLED, QA, ADVISOR, SUPPORT,
    *ENTITY_PROFILES)}


def choose_recipe(requested: str | None, key: str | None = None,
                  tenant: str | None = None) -> tuple[str | None, RecallRecipe]:
    """The recipe of a recall (scenario profiles): the request's, else its API key's, else
    its tenant's, else the default; with the name chosen (None: the default by default).
    A request that names an unknown recipe is invalid input (422)."""
    if requested is not None and requested not in RECIPES:
        raise InvalidInput(f"unknown recipe {requested!r}; one of {sorted(RECIPES)}")
    name = requested or key or tenant
    return name, (RECIPES[name] if name else DEFAULT)
