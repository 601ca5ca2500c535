"""Write filters between extraction and storage: sensitive data, quality, the three questions.

1. Sensitive data is redacted from every stored field (text, parts, speaker); a candidate
   whose key or value holds it — even lower-cased — is dropped, and so are leaking scope
   tags and business objects.
2. A 0–1 quality score; below 0.5 the candidate is dropped.
3. The three questions for facts: does it stay true across sessions? is it bound to this
   user? does it change future answers? Any "no" → it stays in working memory only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel, Field

from strata.extract.base import Candidate, Intent
from strata.extract.pii import find_pii, redact
from strata.extract.rules import RuleExtractor, is_acknowledgement
from strata.layers.summarize import salient_score
from strata.models import MemoryKind, Source
from strata.tokens import count_tokens

__all__ = ["FilterReport", "WriteFilter", "quality_score", "three_questions"]

QUALITY_MIN = 0.5
_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|my|me|mine|we|our)\b|我|咱", re.I)
_GREETING = re.compile(r"^(hi|hello|hey|thanks|thank you|ok|okay|bye|你好|谢谢|好的|嗯|再见)\b",
                       re.I)


def quality_score(candidate: Candidate) -> float:
    """0–1: how worth keeping a candidate is (structure, salience, confidence; not chit-chat)."""
    text = candidate.text.strip()
    score = 0.3 + 0.3 * candidate.confidence
    if candidate.key:
        score += 0.2
    score += min(0.2, 0.05 * salient_score(text))
    if count_tokens(text) < 3:  # tokens, not characters: "我搬到上海了" says a lot
        score -= 0.3
    if (_GREETING.match(text) and len(text) < 30) or is_acknowledgement(text):
        score -= 0.4
    if candidate.source is Source.INFERRED:
        score -= 0.1
    return max(0.0, min(1.0, score))


def three_questions(candidate: Candidate) -> str | None:
    """None when a fact passes all three; otherwise the question it fails."""
    if candidate.intent is Intent.REMEMBER:
        return None  # the user asked for it explicitly
    if RuleExtractor.is_temporary(candidate.text):
        return "does not stay true across sessions"
    if not (candidate.key or _FIRST_PERSON.search(candidate.text)):
        return "not bound to this user"
    if not candidate.key and salient_score(candidate.text) == 0:
        return "would not change future answers"
    return None


def _secrets(cand: Candidate) -> list[str]:
    """The sensitive spans of every field, and the bare secret at the end of each span."""
    fields = [cand.text, cand.key or "", cand.value or "", *cand.scope_tags, *cand.parts,
              cand.business_object or "", cand.speaker or ""]
    spans = [field[f.start:f.end] for field in fields for f in find_pii(field)]
    tails = [span.split()[-1] for span in spans if len(span.split()[-1]) >= 4]
    return [s.lower() for s in spans + tails]


def _leaks(field: str | None, secrets: Sequence[str]) -> bool:
    """Whether a field holds sensitive data, also in a normalized (lower-cased) copy."""
    if not field:
        return False
    low = field.lower()
    return bool(find_pii(field)) or any(s in low for s in secrets)


def _redacted(cand: Candidate, secrets: Sequence[str]) -> Candidate:
    """Every stored field cleaned: texts redacted, leaking tags and objects removed."""
    return cand.model_copy(update={
        "text": redact(cand.text),
        "parts": [redact(p) for p in cand.parts],
        "scope_tags": [t for t in cand.scope_tags if not _leaks(t, secrets)],
        "business_object": None if _leaks(cand.business_object, secrets)
        else cand.business_object,
        "speaker": redact(cand.speaker) if cand.speaker else None})


class FilterReport(BaseModel):
    kept: list[Candidate] = Field(default_factory=list)
    dropped: list[tuple[str, str]] = Field(default_factory=list)  # (kind, reason): no text


class WriteFilter:
    """Applies the filters in order; the report never carries the dropped text."""

    def __init__(self, quality_min: float = QUALITY_MIN) -> None:
        self.quality_min = quality_min

    def apply(self, candidates: Sequence[Candidate]) -> FilterReport:
        report = FilterReport()
        for cand in candidates:
            if cand.intent is Intent.FORGET:
                report.kept.append(cand)
                continue
            secrets = _secrets(cand)
            if _leaks(cand.key, secrets) or _leaks(cand.value, secrets):
                report.dropped.append((cand.kind.value, "the key or value is sensitive data"))
                continue
            clean = _redacted(cand, secrets)
            if clean.text.count("[REDACTED:") and len(re.sub(r"\[REDACTED:\w+\]", "",
                                                             clean.text).strip()) < 8:
                report.dropped.append((cand.kind.value, "only sensitive data"))
                continue
            score = quality_score(clean)
            if score < self.quality_min:
                report.dropped.append((cand.kind.value, f"quality {score:.2f} < "
                                                        f"{self.quality_min}"))
                continue
            if clean.kind is MemoryKind.FACT:
                failed = three_questions(clean)
                if failed:
                    report.dropped.append((cand.kind.value, failed))
                    continue
            report.kept.append(clean)
        return report
