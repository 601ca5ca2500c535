"""The LLM extractor: an OpenAI-compatible chat model returns JSON validated against
``ExtractionOutput``; anything malformed or failed falls back to the rules and is logged."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import httpx

from strata.chat import ChatClient, ChatFailed
from strata.extract.base import Candidate, Extractor, Intent
from strata.extract.prompts import EXTRACT_V1, ExtractionOutput, Prompt
from strata.extract.rules import (
    ConfirmReader,
    FactReader,
    ForgetReader,
    RuleExtractor,
    speaker_of,
    spoken_by,
)
from strata.models import MemoryKind, Provenance, Role, Source, Turn
from strata.providers import NO_RETRY, RetryPolicy, provider_retry
from strata.settings import Settings

__all__ = ["LLMExtractor", "make_extractor"]

logger = logging.getLogger(__name__)


class LLMExtractor:
    """Extraction by a chat model, with the rule extractor as the safety net."""

    def __init__(self, base_url: str, api_key: str, model: str, prompt: Prompt = EXTRACT_V1,
                 timeout_s: float = 30.0, fallback: Extractor | None = None,
                 transport: httpx.BaseTransport | None = None,
                 retry: RetryPolicy = NO_RETRY) -> None:
        self._chat = ChatClient(base_url, api_key, model, timeout_s, transport, retry=retry)
        self.prompt = prompt
        self._fallback = fallback or RuleExtractor()

    def _ask(self, turns: Sequence[Turn]) -> ExtractionOutput:
        transcript = "\n".join(  # the person speaking, in a multi-party conversation
            f"[{t.turn_id} {t.role.value}{f' · {who}' if (who := speaker_of(t)) else ''}] "
            f"{t.content}" for t in turns)
        return self._chat.ask(ExtractionOutput, self.prompt.system, transcript)

    def extract(self, turns: Sequence[Turn]) -> list[Candidate]:
        if not turns:
            return []
        try:
            output = self._ask(turns)
        except ChatFailed as exc:
            logger.warning("LLM extraction (%s) failed, using rules: %s", self.prompt.version,
                           exc)
            return self._fallback.extract(turns)
        by_id = {t.turn_id: t for t in turns}
        out = []
        for memory in output.memories:
            sources = [by_id[i] for i in memory.turn_ids if i in by_id]
            if not sources or all(t.role is not Role.USER for t in sources):
                logger.info("dropping an LLM memory not grounded in a user turn")
                continue  # the assistant's words never become user facts
            if memory.kind == "fact" and not memory.key:
                continue
            first = sources[0]
            # who said it, in a multi-party conversation: the one speaker of its user turns
            said_by = {speaker_of(t) for t in sources if t.role is Role.USER}
            speaker = said_by.pop() if len(said_by) == 1 else None
            cand = Candidate(
                kind=MemoryKind(memory.kind), text=memory.text, key=memory.key,
                value=memory.value, confidence=memory.confidence, source=Source(memory.source),
                intent=Intent(memory.intent), scope_tags=memory.scope_tags,
                provenance=Provenance(session_id=first.session_id,
                                      turn_ids=[t.turn_id for t in sources if t.role is Role.USER]),
                event_time=first.created_at)
            out.append(spoken_by(cand, speaker) if cand.kind is MemoryKind.FACT
                       else cand.model_copy(update={"speaker": speaker}))
        return out


def make_extractor(settings: Settings) -> Extractor:
    """The extractor ``settings.extractor`` names (rules by default)."""
    if settings.extractor == "openai":
        return LLMExtractor(settings.openai_base_url, settings.openai_api_key,
                            settings.openai_chat_model, timeout_s=settings.openai_timeout_s,
                            retry=provider_retry(settings))
    confirm: ConfirmReader | None = None
    forget: ForgetReader | None = None
    facts: FactReader | None = None
    if settings.intent_detector == "learned":
        from strata.extract.intent_model import (  # scikit-learn: loaded here
            confirm_reader,
            forget_reader,
        )

        confirm, forget = confirm_reader, forget_reader
    if settings.fact_reader == "learned":
        from strata.extract.fact_model import packaged_reader

        facts = packaged_reader()
    return RuleExtractor(reads_confirm=confirm, reads_facts=facts, reads_forget=forget)
