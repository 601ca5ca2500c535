"""Two granularities of one conversation, fused into turn-level recall items: the episodes
layer's stages (``strata.recall.stages``) from ``exchanges`` to ``merge``, each of the
formula's terms below the stage of the recipe that adds it (a stage the recipe leaves out
adds nothing). Each hit carries the ranking as a ``TurnScore``.

The episodes layer holds turn-level episodes and exchanges (two neighbouring user turns,
``strata.extract.exchanges``). A query is matched against both. Each turn is then scored by

    turn = (1 - w)·own similarity + w·best similarity of an exchange it belongs to
           + c·(own coverage + best exchange coverage)
    final = (turn + s·best turn of its session) / (1 + s)

(w = ``exchange_weight``, c = ``coverage_weight``, s = ``session_weight``): a turn that only
makes sense with its neighbour is found through the exchange, a turn that has more of the
query's terms beats one that repeats a single term (coverage: the share of the query's
distinct terms the text contains; BM25 saturates on one frequent term), and a session that is
about the query lifts its turns. In a multi-party conversation (turns with
``metadata.speaker``), the turns of the one person the query names get ``speaker_boost``, and
the names of the people speaking do not count as query terms. A turn said on a date the query
names ("on 13 October, 2023", "in July 2022"; ``strata.recall.timeframe``), or with
``time_mentions`` speaking of a day in it ("last week" said on 2 July is in June;
``strata.recall.relative_dates``), gets ``time_boost``; one that holds the kind of answer the
query asks for (a number, a time, a place, a name, a person; ``strata.recall.answer_types``)
gets ``answer_boost``. A turn found only through an exchange is fetched with both its
similarities.

With a late-interaction scorer (``strata.recall.late``) this ranking is the first of two
stages: the best ``late_candidates`` turns, and the exchange partners they need, are scored
token by token, and the same formula ranks them again with ``late_share``·MaxSim +
(1 - ``late_share``)·BM25 as the similarity; the other turns are dropped.

Last, a turn whose exchange partner is nearly as relevant (``neighbour_ratio``) is merged
with it into one item naming both turns, so the context shows the pair once instead of
spending two items on it; when both its neighbours are, with the one ``neighbour_side`` names
(the one after it by default: what answered or followed it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache

from strata.extract.intents import is_question
from strata.layers.summarize import split_sentences
from strata.models import SearchHit, StoredRecord, TurnScore
from strata.recall.answer_types import Answer, holds
from strata.recall.answer_types import asked as questioned
from strata.recall.late import LateScorer, maxsim
from strata.recall.pipeline import Phase
from strata.recall.recipes import RecallRecipe
from strata.recall.relative_dates import mentions
from strata.recall.scoring import similarity
from strata.recall.stages import TURN_TERMS, Stage
from strata.recall.timeframe import Period, mentioned_periods
from strata.stores.lexical import tokenize

__all__ = ["FORMULA", "RANKING", "fuse_granularities"]


@dataclass
class _Unit:
    record: StoredRecord
    raw: dict[str, float]  # the store's raw similarities (dense, lexical)
    coverage: float = 0.0
    late: float | None = None
    own: float = 0.0
    pair: float = 0.0
    pair_coverage: float = 0.0
    final: float = 0.0
    terms: list[tuple[str, float]] = field(default_factory=list)
    partners: dict[str, int] = field(default_factory=dict)  # exchange partner id → -1 before,
    #                                                          +1 after this turn

    def similarity(self, recipe: RecallRecipe) -> float:
        return similarity(self.raw.get("dense", 0.0), self.raw.get("lexical", 0.0), recipe,
                          self.late)


@dataclass
class _Exchange:
    record: StoredRecord
    members: list[str]
    raw: dict[str, float]
    coverage: float
    late: float | None = None


@dataclass(frozen=True)
class _Asked:
    """What the query asks, as the ranking's terms read it."""

    about: str | None  # the one speaker it names
    periods: Sequence[Period]  # the dates it names
    answer: Answer | None  # the kind of answer it asks for
    people: Collection[str]  # the conversation's speakers
    reached: Mapping[str, float] = field(default_factory=dict)  # the entities stage's turns


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


TermsOf = Callable[[str], "Collection[str]"]  # a text's index terms (``tokenize``)


def _coverage(terms: set[str], text: str, terms_of: TermsOf) -> float:
    """The share of the query's distinct terms that ``text`` contains."""
    return len(terms & set(terms_of(text))) / len(terms) if terms else 0.0


@lru_cache(maxsize=16384)
def asking_share(text: str) -> float:
    """The share of a text's words that are in questions ("Is this your own painting?"):
    a turn that asks repeats the words of a question about it without answering it."""
    words = asked = 0
    for sentence in split_sentences(text):
        n = len(sentence.split())
        words += n
        if is_question(sentence):
            asked += n
    return asked / words if words else 0.0


def _happened_in(record: StoredRecord, periods: Sequence[Period], mentioned: bool) -> bool:
    """Whether the turn was said in one of the periods or, with ``mentioned``, speaks of a
    day in one ("last week", said on 2 July, is in June too; ``relative_dates.mentions``)."""
    raw = record.payload.get("event_time")
    if not periods or not isinstance(raw, str):
        return False
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        return False
    return any(p.contains(when) for p in periods) or (mentioned and any(
        p.overlaps(m.first, m.last) for m in mentions(record.text, when.date()) for p in periods))


# A ranking term: what a stage adds to a turn's score, None when it does not apply.
_Term = Callable[[_Unit, _Asked, RecallRecipe], "float | None"]


def _coverage_term(unit: _Unit, asked: _Asked, recipe: RecallRecipe) -> float | None:
    return recipe.coverage_weight * (unit.coverage + unit.pair_coverage)


def _speaker_term(unit: _Unit, asked: _Asked, recipe: RecallRecipe) -> float | None:
    return (recipe.speaker_boost if asked.about and _speaker(unit.record) == asked.about
            else None)


def _time_term(unit: _Unit, asked: _Asked, recipe: RecallRecipe) -> float | None:
    return (recipe.time_boost if _happened_in(unit.record, asked.periods, recipe.time_mentions)
            else None)


def _answer_term(unit: _Unit, asked: _Asked, recipe: RecallRecipe) -> float | None:
    return (recipe.answer_boost if asked.answer is not None
            and holds(asked.answer, unit.record.text, asked.people) else None)


TERMS: dict[Stage, _Term] = {Stage.COVERAGE: _coverage_term, Stage.SPEAKER_BOOST: _speaker_term,
                             Stage.TIME_BOOST: _time_term, Stage.ANSWER_BOOST: _answer_term}
assert tuple(TERMS) == TURN_TERMS
# the stages that are terms of the turn formula (``_rank``): the ones above, in that order,
# then the question penalty and the session's lift (the exchanges stage's weight and the
# entities stage's are terms of it too; their candidates are ``strata.recall.candidates``)
FORMULA = frozenset({*TERMS, Stage.QUESTION_PENALTY, Stage.SESSION})


def _rank(units: dict[str, _Unit], exchanges: Sequence[_Exchange], asked: _Asked,
          recipe: RecallRecipe) -> tuple[list[_Unit], dict[str, float]]:
    """Score every turn (and every exchange none of whose turns is known) by the formula
    above, each term the stage of the recipe that adds it; returns them with the best turn
    score of each session."""
    for unit in units.values():
        unit.own = unit.similarity(recipe)
        unit.pair = unit.pair_coverage = 0.0
        unit.partners = {}
    standalone: list[_Unit] = []
    for exchange in exchanges:
        score = similarity(exchange.raw.get("dense", 0.0), exchange.raw.get("lexical", 0.0),
                           recipe, exchange.late)
        present = [m for m in exchange.members if m in units]
        for m in present:
            units[m].pair = max(units[m].pair, score)
            units[m].pair_coverage = max(units[m].pair_coverage, exchange.coverage)
        if len(present) == 2:
            first, second = present
            units[first].partners[second] = 1
            units[second].partners[first] = -1
        elif not present:  # its turns have no episodes of their own (short turns)
            standalone.append(_Unit(exchange.record, exchange.raw, exchange.coverage,
                                    exchange.late, own=score, pair=score,
                                    pair_coverage=exchange.coverage))
    w, s = recipe.exchange_weight, recipe.session_weight
    fused = recipe.runs(Stage.EXCHANGES)
    terms = [(stage, TERMS[stage]) for stage in TURN_TERMS if recipe.runs(stage)]
    penalty = recipe.runs(Stage.QUESTION_PENALTY)
    everything = [*units.values(), *standalone]
    best: dict[str, float] = {}
    for unit in everything:
        turn = (1 - w) * unit.own + w * unit.pair if fused else unit.own
        unit.terms = []
        for stage, term in terms:
            added = term(unit, asked, recipe)
            if added is not None:
                turn += added
                unit.terms.append((stage.value, added))
        reached = asked.reached.get(unit.record.id)
        if reached is not None:  # the entity index's own weight (the entities stage)
            turn += recipe.entity_weight * reached
            unit.terms.append((Stage.ENTITIES.value, recipe.entity_weight * reached))
        unit.final = turn
        if penalty:
            taken = recipe.question_penalty * asking_share(unit.record.text)
            unit.final = turn - taken
            unit.terms.append((Stage.QUESTION_PENALTY.value, -taken))
        best[_session(unit.record)] = max(best.get(_session(unit.record), 0.0), turn)
    if recipe.runs(Stage.SESSION):
        for unit in everything:
            lifted = (unit.final + s * best[_session(unit.record)]) / (1 + s)
            unit.terms.append((Stage.SESSION.value, lifted - unit.final))
            unit.final = lifted
    return everything, best


def _rescore_late(query: str, late: LateScorer, shortlist: list[_Unit],
                  units: dict[str, _Unit], exchanges: Sequence[_Exchange]
                  ) -> tuple[dict[str, _Unit], list[_Exchange]]:
    """The shortlisted turns and the exchanges that touch them, with their ``late`` MaxSim.
    Every turn is encoded once (the exchanges' partners too); an exchange of two known turns
    is scored as their union, any other exchange is encoded itself."""
    keep = {u.record.id for u in shortlist}
    touching = [e for e in exchanges if e.record.id in keep or keep & set(e.members)]
    needed = keep | {m for e in touching for m in e.members if m in units}
    turns = {rid: unit for rid, unit in units.items() if rid in needed}
    alone = [e for e in touching if not e.members or not all(m in turns for m in e.members)]
    encoded = {id(e) for e in alone}
    maxima = late(query, [u.record.text for u in turns.values()] +
                  [e.record.text for e in alone])
    per_turn = dict(zip(turns, maxima[:len(turns)], strict=True))
    for turn_id, best in per_turn.items():
        turns[turn_id].late = maxsim(best)
    for exchange, best in zip(alone, maxima[len(turns):], strict=True):
        exchange.late = maxsim(best)
    for exchange in touching:
        if id(exchange) not in encoded:
            exchange.late = maxsim(*(per_turn[m] for m in exchange.members))
    return turns, touching


@dataclass
class _Ranking:
    """The episodes' ranking: what its stages read, and the ranked turns they leave."""

    query: str
    recipe: RecallRecipe
    late: LateScorer | None
    units: dict[str, _Unit]
    exchanges: list[_Exchange]
    asked: _Asked
    everything: list[_Unit] = field(default_factory=list)  # ranked by ``_rank``
    best: dict[str, float] = field(default_factory=dict)  # the best turn of each session
    merged: list[tuple[_Unit, _Unit | None]] | None = None  # the merge stage's items

    def rank(self) -> None:
        self.everything, self.best = _rank(self.units, self.exchanges, self.asked, self.recipe)


def fuse_granularities(turn_hits: Sequence[SearchHit], exchange_hits: Sequence[SearchHit],
                       fetch: Callable[[list[str]], list[SearchHit]], query: str,
                       recipe: RecallRecipe, late: LateScorer | None = None,
                       terms_of: TermsOf = tokenize,
                       reached: Mapping[str, float] | None = None) -> list[SearchHit]:
    """Turn-level hits (some merged with their neighbour), best first: every turn scored by
    the formula above, then ``RANKING``'s stages the recipe runs (late interaction, merge).
    ``fetch`` scores the named turns (both raw similarities) that only an exchange found;
    ``late``, if given, re-scores the best turns token by token (see the module's
    docstring); ``terms_of`` gives a text's terms (an index that stored them at write time
    saves tokenizing); ``reached``: the turns the entity index reached (the entities stage),
    each getting ``entity_weight`` × its value."""
    hits = {h.record.id: h for h in turn_hits}
    missing = sorted({m for h in exchange_hits for m in _members(h.record)} - hits.keys())
    if missing:
        hits.update({h.record.id: h for h in fetch(missing)
                     if float(h.record.payload.get("weight", 1.0)) > 0})
    people = {p for p in (_speaker(h.record) for h in hits.values()) if p}
    names = {t for name in people for t in tokenize(name)}
    terms = set(tokenize(query)) - names
    units = {rid: _Unit(h.record, h.parts, _coverage(terms, h.record.text, terms_of))
             for rid, h in hits.items()}
    exchanges = [_Exchange(h.record, _members(h.record), h.parts,
                           _coverage(terms, h.record.text, terms_of)) for h in exchange_hits]
    asked = _Asked(_named_speaker(query, units.values()),
                   mentioned_periods(query) if recipe.runs(Stage.TIME_BOOST) else [],
                   questioned(query) if recipe.runs(Stage.ANSWER_BOOST) else None, people,
                   reached if reached and recipe.runs(Stage.ENTITIES) else {})
    ranking = _Ranking(query, recipe, late, units, exchanges, asked)
    ranking.rank()
    return _hits(RANKING.run(recipe, ranking))


def _late_interaction(r: _Ranking) -> None:
    """The best ``late_candidates`` turns (and the entities stage's, with
    ``entity_past_late``) re-scored token by token and ranked again; the rest dropped."""
    if r.late is None or not r.everything:
        return
    r.everything.sort(key=lambda u: u.final, reverse=True)
    shortlist = r.everything[:r.recipe.late_candidates]
    if r.asked.reached and r.recipe.entity_past_late:  # the index's turns are not cut
        listed = {u.record.id for u in shortlist}
        shortlist += [u for u in r.everything[r.recipe.late_candidates:]
                      if u.record.id in r.asked.reached and u.record.id not in listed]
    r.units, r.exchanges = _rescore_late(r.query, r.late, shortlist, r.units, r.exchanges)
    r.rank()
    kept = {u.record.id for u in shortlist}
    r.everything = [u for u in r.everything if u.record.id in kept]
    for unit in r.everything:
        unit.partners = {p: side for p, side in unit.partners.items() if p in kept}


def _merge_neighbours(r: _Ranking) -> None:
    """Best first, a turn with the exchange partner that scores at least ``neighbour_ratio``
    of it, as one item (see the module); a partner merged is not an item of its own."""
    recipe = r.recipe
    r.merged = []
    consumed: set[str] = set()
    for unit in sorted(r.everything, key=lambda u: u.final, reverse=True):
        if unit.record.id in consumed:
            continue
        consumed.add(unit.record.id)
        free = [r.units[p] for p in unit.partners if p not in consumed]
        if recipe.neighbour_side and len(free) == 2 and min(u.final for u in free) >= (
                recipe.neighbour_ratio * unit.final):  # both close enough: the recipe's side
            free = [u for u in free if unit.partners[u.record.id] == recipe.neighbour_side]
        partner = max(free, key=lambda u: u.final, default=None)
        if partner is not None and partner.final >= recipe.neighbour_ratio * unit.final:
            consumed.add(partner.record.id)
        else:
            partner = None
        r.merged.append((unit, partner))


RANKING: Phase[_Ranking] = Phase("episode ranking", {
    Stage.LATE_INTERACTION: _late_interaction, Stage.MERGE: _merge_neighbours})


def _hits(r: _Ranking) -> list[SearchHit]:
    """The ranked turns as hits, best first (the merge stage's items, when it ran)."""
    items = (r.merged if r.merged is not None else
             [(u, None) for u in sorted(r.everything, key=lambda u: u.final, reverse=True)])
    out: list[SearchHit] = []
    for unit, partner in items:
        record = (unit.record if partner is None else
                  _merge(unit.record, partner.record, unit.partners[partner.record.id]))
        out.append(SearchHit(record=record, score=unit.final, parts=dict(unit.raw),
                             turn=TurnScore(
                                 own=unit.own, exchange=unit.pair,
                                 coverage=unit.coverage + unit.pair_coverage,
                                 session=r.best[_session(unit.record)], score=unit.final,
                                 late=unit.late, terms=tuple(unit.terms),
                                 merged_with=partner.record.id if partner else None)))
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
