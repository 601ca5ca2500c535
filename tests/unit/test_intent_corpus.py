"""The rule extractor scored on a labelled bilingual corpus (tests/data/intent_corpus.jsonl).

Each utterance is one class: remember, forget, change, fact (with the expected key and
value), secret (with the secret that must not be stored) or none (questions, the assistant's
guesses, chit-chat, acknowledgements). Run with ``-s`` to see the per-class figures.

The optional LLM extractor takes the same tests when an OpenAI-compatible endpoint is named
(``STRATA_TEST_LLM_BASE_URL``, ``STRATA_TEST_LLM_MODEL``, ``STRATA_TEST_LLM_API_KEY``); its
rule fallback is disabled there, so a failed call fails the test instead of scoring the rules.
This machine reaches no such endpoint (no model weights, no internet), so those cases skip.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from strata.extract.base import Candidate, Extractor, Intent
from strata.extract.filters import WriteFilter
from strata.extract.llm import LLMExtractor
from strata.extract.pii import find_pii
from strata.extract.rules import RuleExtractor
from strata.models import MemoryKind, Role, Turn

CORPUS = Path(__file__).parents[1] / "data" / "intent_corpus.jsonl"
CLASSES = ("remember", "forget", "change", "fact", "secret", "none")
MIN_SCORE = 0.9


def _rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()
            if line.strip()]


class _NoFallback:
    """The LLM extractor's fallback in these tests: a failed call is a failed test."""

    def extract(self, turns: Sequence[Turn]) -> list[Candidate]:
        raise AssertionError("the LLM call failed (see the warning in the log)")


def _extractor(name: str) -> Extractor:
    if name == "rules":
        return RuleExtractor()
    base_url = os.environ.get("STRATA_TEST_LLM_BASE_URL")
    if not base_url:
        pytest.skip("no OpenAI-compatible endpoint to score the LLM extractor with "
                    "(set STRATA_TEST_LLM_BASE_URL and STRATA_TEST_LLM_MODEL)")
    return LLMExtractor(base_url, os.environ.get("STRATA_TEST_LLM_API_KEY", ""),
                        os.environ.get("STRATA_TEST_LLM_MODEL", ""), fallback=_NoFallback())


EXTRACTORS = pytest.mark.parametrize("extractor_name", ["rules", "llm"])


def _extract(row: dict[str, Any], extractor: Extractor | None = None) -> list[Candidate]:
    turn = Turn(turn_id="c:1", session_id="c", user_id="u", role=Role(row.get("role", "user")),
                content=row["text"])
    return (extractor or RuleExtractor()).extract([turn])


def classify(text: str, candidates: list[Candidate]) -> str:
    """The one class an utterance gets from what the extractor (and the PII scan) found."""
    if find_pii(text):
        return "secret"
    facts = [c for c in candidates if c.kind is MemoryKind.FACT and c.key]
    if any(c.intent is Intent.FORGET for c in candidates):
        return "forget"
    if any(c.intent is Intent.OVERRIDE for c in facts):
        return "change"
    if any(c.intent is Intent.REMEMBER for c in facts):
        return "remember"
    return "fact" if facts else "none"


def _stored_fields(candidate: Candidate) -> str:
    return " ".join([candidate.text, candidate.key or "", candidate.value or "",
                     *candidate.scope_tags, *candidate.parts, candidate.business_object or "",
                     candidate.speaker or ""]).lower()


def test_corpus_is_bilingual_and_large_enough() -> None:
    rows = _rows()
    langs = Counter(r["lang"] for r in rows)
    assert len(rows) >= 220 and min(langs["en"], langs["zh"]) >= 0.4 * len(rows)
    assert set(Counter(r["class"] for r in rows)) == set(CLASSES)
    assert all(r["class"] != "fact" or ("key" in r and "value" in r) for r in rows)
    assert all(r["class"] != "secret" or r["secret"] in r["text"] for r in rows)


@EXTRACTORS
def test_extractor_scores_on_the_corpus(extractor_name: str) -> None:
    extractor = _extractor(extractor_name)
    rows = _rows()
    gold: Counter[str] = Counter()
    predicted: Counter[str] = Counter()
    correct: Counter[str] = Counter()
    values = [0, 0]  # [right, expected]
    misses = []
    for row in rows:
        candidates = _extract(row, extractor)
        got = classify(row["text"], candidates)
        gold[row["class"]] += 1
        predicted[got] += 1
        correct[got] += got == row["class"]
        if got != row["class"]:
            misses.append(f"{row['class']} → {got}: {row['text']}")
        if "key" in row:
            found = {c.key: c.value for c in candidates if c.key}
            values[0] += found.get(row["key"]) == row["value"]
            values[1] += 1
            if found.get(row["key"]) != row["value"]:
                misses.append(f"value {row['key']}={row['value']!r}: got {found}")
    print(f"\n{'class':<9}{'n':>4}{'precision':>11}{'recall':>8}")
    scores = {}
    for name in CLASSES:
        precision = correct[name] / predicted[name] if predicted[name] else 0.0
        recall = correct[name] / gold[name]
        scores[name] = (precision, recall)
        print(f"{name:<9}{gold[name]:>4}{precision:>11.3f}{recall:>8.3f}")
    accuracy = values[0] / values[1]
    print(f"value accuracy (key and value exact): {accuracy:.3f} over {values[1]}")
    for miss in misses:
        print("  miss:", miss)
    for name, (precision, recall) in scores.items():
        assert precision >= MIN_SCORE and recall >= MIN_SCORE, (name, precision, recall)
    assert accuracy >= MIN_SCORE


@EXTRACTORS
@pytest.mark.parametrize("row", [r for r in _rows() if r["class"] == "secret"],
                         ids=lambda r: r["text"][:30])
def test_no_secret_reaches_long_term_memory(row: dict[str, Any], extractor_name: str) -> None:
    """Every stored field of every kept candidate is free of the secret, in any case."""
    report = WriteFilter().apply(_extract(row, _extractor(extractor_name)))
    secret = row["secret"].lower()
    assert all(secret not in _stored_fields(c) for c in report.kept), report.kept
