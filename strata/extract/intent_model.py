"""A learned reading of what a user turn asks of memory (issue #36): a linear model over
the character n-grams of the turn and of the turn before it, English and Chinese alike.

The rules (``strata.extract.intents``) fit the sentences they were written from; this
model is trained on a labelled corpus written by several independent writers
(``tests/data/intents``) and is measured on writers it never saw (``bench/intents.py``).
``CombinedIntents`` keeps a rule's answer where the rules are precise and asks the model
elsewhere, with a stricter threshold for forgetting than for anything else (a wrong forget
hides what the user said).

Labels: forget, change, remember, confirm, habit, event, none. Needs scikit-learn (the
``learned`` extra); nothing is downloaded, the model is fitted from the rows it is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from strata.extract.base import Intent
from strata.extract.intents import detect_intent

__all__ = ["INTENTS", "CombinedIntents", "IntentDetector", "IntentReading", "LearnedIntents",
           "RuleIntents", "Utterance"]

INTENTS = ("forget", "change", "remember", "confirm", "habit", "event", "none")
_RULE_LABEL = {Intent.FORGET: "forget", Intent.OVERRIDE: "change",
               Intent.REMEMBER: "remember", Intent.NONE: "none"}


@dataclass(frozen=True)
class Utterance:
    """A user turn and the turn before it (what "yes, that's right" confirms)."""

    text: str
    previous: str | None = None


@dataclass(frozen=True)
class IntentReading:
    """What a detector read: one of ``INTENTS``, how sure it is, and who said so."""

    intent: str
    confidence: float
    by: str  # rules | learned | learned+rules


class IntentDetector(Protocol):
    """Reads the intent of each utterance (one batch: the model's cost is per call)."""

    def read(self, utterances: Sequence[Utterance]) -> list[IntentReading]: ...


class RuleIntents:
    """The hand-written rules: forget, change (an override), remember or none."""

    def read(self, utterances: Sequence[Utterance]) -> list[IntentReading]:
        return [IntentReading(_RULE_LABEL[detect_intent(u.text)], 1.0, "rules")
                for u in utterances]


class LearnedIntents:
    """Logistic regression over TF-IDF character n-grams (1-4, within word bounds, so a
    Chinese turn is read by its characters and an English one by its word pieces and
    misspellings) of the turn, beside those of the previous turn."""

    def __init__(self, rows: Sequence[dict[str, Any]], c: float = 4.0) -> None:
        from scipy.sparse import hstack
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression

        self._hstack = hstack
        self._text = TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 4), sublinear_tf=True,
                                     lowercase=True, min_df=1)
        self._previous = TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 3),
                                         sublinear_tf=True, lowercase=True, min_df=2)
        texts = [r["text"] for r in rows]
        before = [_previous(r.get("previous")) for r in rows]
        features = hstack([self._text.fit_transform(texts),
                           self._previous.fit_transform(before) * 0.5]).tocsr()
        self._model = LogisticRegression(C=c, max_iter=2000, class_weight="balanced")
        self._model.fit(features, [r["intent"] for r in rows])
        self.classes: list[str] = [str(c) for c in self._model.classes_]

    def probabilities(self, utterances: Sequence[Utterance]) -> list[dict[str, float]]:
        features = self._hstack([
            self._text.transform([u.text for u in utterances]),
            self._previous.transform([_previous(u.previous) for u in utterances]) * 0.5]).tocsr()
        return [dict(zip(self.classes, map(float, row), strict=True))
                for row in self._model.predict_proba(features)]

    def read(self, utterances: Sequence[Utterance]) -> list[IntentReading]:
        out = []
        for probs in self.probabilities(utterances):
            best = max(probs, key=probs.__getitem__)
            out.append(IntentReading(best, probs[best], "learned"))
        return out


def _previous(text: str | None) -> str:
    return text or ""


class CombinedIntents:
    """The model's reading, with forgetting held to a stricter bar and the rules as a
    second opinion on it: a forget needs the model's probability of forget at least
    ``forget_threshold``, or at least ``rule_backed`` when the rules also read a forget;
    otherwise the turn gets the model's best other label. The thresholds were chosen by
    leave-one-writer-out on the development writers (``bench/intents.py``)."""

    def __init__(self, learned: LearnedIntents, forget_threshold: float = 0.4,
                 rule_backed: float = 0.2) -> None:
        self._learned = learned
        self._rules = RuleIntents()
        self.forget_threshold = forget_threshold
        self.rule_backed = rule_backed

    def read(self, utterances: Sequence[Utterance]) -> list[IntentReading]:
        ruled = self._rules.read(utterances)
        out = []
        for rule, probs in zip(ruled, self._learned.probabilities(utterances), strict=True):
            bar = self.rule_backed if rule.intent == "forget" else self.forget_threshold
            if probs.get("forget", 0.0) >= bar:
                out.append(IntentReading("forget", probs["forget"],
                                         "learned+rules" if rule.intent == "forget"
                                         else "learned"))
                continue
            others = {k: v for k, v in probs.items() if k != "forget"}
            best = max(others, key=others.__getitem__)
            out.append(IntentReading(best, others[best], "learned"))
        return out
