"""Summarizers fold turns that leave the working-memory window into a rolling summary.

The rule-based default is extractive: it keeps the sentences that carry numbers, money,
dates, proper nouns, stated facts and preferences, decisions and constraints (the details LLM
summaries are known to lose), and drops small talk — acknowledgements, thanks, laughter and
questions with nothing concrete in them — within the token budget. The LLM summarizer is
incremental (previous summary + evicted turns) and falls back to the rules when the call
fails or returns junk.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol

import httpx

from strata.chat import ChatClient, ChatFailed
from strata.extract.fact_rules import match_facts
from strata.extract.intents import is_acknowledgement, is_question
from strata.models import Turn
from strata.providers import NO_RETRY, RetryPolicy, provider_retry
from strata.settings import Settings
from strata.tokens import count_pieces, count_tokens

__all__ = [
    "LLMSummarizer",
    "RuleSummarizer",
    "Summarizer",
    "make_summarizer",
    "salient_score",
    "split_sentences",
]

logger = logging.getLogger(__name__)

_NUMBER = re.compile(r"\d")
_MONEY = re.compile(r"[$€£¥]|\b(usd|rmb|dollars?|euros?|yuan)\b|元|块钱|万", re.I)
_DATE = re.compile(
    r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b|\b(monday|tuesday|wednesday|"
    r"thursday|friday|saturday|sunday|today|tomorrow|yesterday|next week|last week)\b|"
    r"[年月日号]|周[一二三四五六日天]|星期|明天|昨天|下周|上周", re.I)
_PREFERENCE = re.compile(
    r"\b(i (really )?(like|love|prefer|hate|dislike|want|need|can't|cannot|don't)|my favou?rite|"
    r"allergic|i live|i work|call me|my name)\b|喜欢|不喜欢|讨厌|偏好|爱吃|不吃|过敏|"
    r"我是|我叫|我住|希望|不要|必须|一定", re.I)
# decisions and constraints: what was settled, and the limits it must respect
_DECISION = re.compile(
    r"\b(decided|agreed|settled on|confirmed|chose|we'll go with|let's go with|must|have to|"
    r"need to|cannot|can't|at most|at least|no more than|no later than|deadline|budget|limit|"
    r"due)\b|决定|确定|定了|同意|必须|不能|不可以|截止|预算|最多|至少|不超过|之前完成", re.I)
# small talk that opens a sentence; with nothing concrete after it, the sentence is filler
_FILLER = re.compile(
    r"^(?:ok(?:ay)?|sure|thanks|thank you|haha|lol|hmm+|great|cool|alright|right|yeah|yes|"
    r"no worries|good point|sounds|i see|i agree|let me (?:think|check)|that's (?:interesting|"
    r"great|nice|fun)|makes sense|interesting|nice|wow|好的|嗯|哈|谢谢|行|对|没问题|我明白|明白|"
    r"有道理|不错)\b", re.I)
_PROPER = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]{2,}")


def split_sentences(text: str) -> list[str]:
    """Sentences of mixed Chinese/English text (punctuation kept)."""
    parts = re.split(r"(?<=[。！？!?；;\n])|(?<=[.])\s+", text)
    return [p.strip() for p in parts if p and p.strip()]


@lru_cache(maxsize=8192)
def salient_score(sentence: str) -> float:
    """How much a sentence carries that a summary must keep (0 = small talk). Cached: the
    summary's lines are scored again each time a turn is folded in."""
    concrete = _NUMBER.search(sentence) or _MONEY.search(sentence)
    if is_acknowledgement(sentence) or (not concrete and (
            is_question(sentence) or _FILLER.match(sentence.strip()))):
        return 0.0  # "ok thanks", "haha yes", "what do you think?": nothing to keep
    score = 0.0
    if _NUMBER.search(sentence):
        score += 2.0
    if _MONEY.search(sentence):
        score += 1.5
    if _DATE.search(sentence):
        score += 1.0
    if _PREFERENCE.search(sentence):
        score += 1.5
    if _DECISION.search(sentence):
        score += 1.5
    if _PROPER.search(sentence):
        score += 1.0
    if match_facts(sentence):
        score += 1.5  # a stated fact: a name, a place, a constraint
    return score


_line_pieces = lru_cache(maxsize=8192)(count_pieces)  # a summary's lines, counted once


class Summarizer(Protocol):
    """Folds evicted turns into the previous summary within a token budget."""

    def summarize(self, previous: str, evicted: Sequence[Turn], budget_tokens: int) -> str: ...


class RuleSummarizer:
    """Extractive, deterministic, offline: keeps salient sentences, newest first on overflow."""

    def summarize(self, previous: str, evicted: Sequence[Turn], budget_tokens: int) -> str:
        lines = [ln for ln in previous.split("\n") if ln.strip()]
        for turn in evicted:
            kept = [s for s in split_sentences(turn.content) if salient_score(s) > 0]
            line = f"{turn.role.value}: {' '.join(kept)}"
            if kept and line not in lines:
                lines.append(line)
        return self._fit(lines, budget_tokens)

    @staticmethod
    def _fit(lines: list[str], budget_tokens: int) -> str:
        """Drop the least salient (then oldest) lines until the summary fits the budget.

        Runs on every turn that evicts one, so it is linear: each line is scored once, and
        the joined text's count is kept as it shrinks (``count_tokens`` of lines joined by
        newlines is the larger of their pieces' sum and the joined length ÷ 4)."""
        pieces = sum(_line_pieces(ln) for ln in lines)
        chars = sum(len(ln) for ln in lines)
        kept = len(lines)

        def fits() -> bool:
            return max(pieces, -(-(chars + max(kept - 1, 0)) // 4)) <= budget_tokens

        dropped: set[int] = set()
        if fits():  # the common case: nothing to drop, nothing to rank
            return "\n".join(lines)
        for worst in sorted(range(len(lines)), key=lambda i: (salient_score(lines[i]), i)):
            if fits():
                break
            dropped.add(worst)
            pieces -= _line_pieces(lines[worst])
            chars -= len(lines[worst])
            kept -= 1
        return "\n".join(ln for i, ln in enumerate(lines) if i not in dropped)


class LLMSummarizer:
    """An OpenAI-compatible chat model writes the summary; the rules are the fallback."""

    PROMPT_VERSION = "wm-summary-v1"

    def __init__(self, base_url: str, api_key: str, model: str, timeout_s: float = 20.0,
                 fallback: Summarizer | None = None,
                 transport: httpx.BaseTransport | None = None,
                 retry: RetryPolicy = NO_RETRY) -> None:
        self._chat = ChatClient(base_url, api_key, model, timeout_s, transport, retry=retry)
        self._fallback = fallback or RuleSummarizer()

    def _prompt(self, previous: str, evicted: Sequence[Turn], budget_tokens: int) -> str:
        turns = "\n".join(f"{t.role.value}: {t.content}" for t in evicted)
        return (
            "Update the running summary of a conversation. Keep every number, amount of "
            "money, date, name, place and stated preference or constraint exactly; drop "
            f"greetings and small talk. At most {budget_tokens} tokens. Reply with the summary "
            f"only.\n\nPrevious summary:\n{previous or '(none)'}\n\nNew turns:\n{turns}"
        )

    def summarize(self, previous: str, evicted: Sequence[Turn], budget_tokens: int) -> str:
        try:
            text = self._chat.reply([{"role": "user", "content": self._prompt(
                previous, evicted, budget_tokens)}]).strip()
        except ChatFailed as exc:
            logger.warning("LLM summary failed (%s); using rules", exc)
            return self._fallback.summarize(previous, evicted, budget_tokens)
        if self._is_junk(text, evicted, budget_tokens):
            logger.warning("LLM summary rejected as junk; using rules")
            return self._fallback.summarize(previous, evicted, budget_tokens)
        return text

    @staticmethod
    def _is_junk(text: str, evicted: Sequence[Turn], budget_tokens: int) -> bool:
        """Empty, far over budget, or lost the numbers the turns stated."""
        if not text or count_tokens(text) > budget_tokens * 1.5:
            return True
        numbers = set(re.findall(r"\d+(?:\.\d+)?", " ".join(t.content for t in evicted)))
        return bool(numbers) and not any(n in text for n in numbers)


def make_summarizer(settings: Settings) -> Summarizer:
    """The summarizer ``settings.summarizer`` names (rules by default)."""
    if settings.summarizer == "openai":
        return LLMSummarizer(settings.openai_base_url, settings.openai_api_key,
                             settings.openai_chat_model, retry=provider_retry(settings))
    return RuleSummarizer()
