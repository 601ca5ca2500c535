"""Write-time enrichment (off by default): a chat model writes, once per turn and off the
recall path, the words a later question may use that the turn does not contain.

Much of what LoCoMo's multi-hop and open-domain questions ask for shares neither words nor
near meaning with the turn that answers it ("patriotic" / "serving my country", a console /
a game's title: ``docs/benchmarks.md``), so it is never a candidate. With
``STRATA_ENRICHER=openai`` the extraction worker asks an OpenAI-compatible chat model for
up to ten keywords per turn-level episode — the kind or genre of what the turn names, the
interests, traits, values, jobs or life events it implies — and keeps them in the episode's
metadata (``keywords``). The episode's vector is then the embedding of its text with its
keywords, and its BM25 terms are those of both (``strata.models.embedded_text``); its text
and its late-interaction token vectors stay the turn's own, so recall still shows what was
said. A failed call
(an error, a timeout) means no keywords: the episode is written as without enrichment.

What it adds was measured with the local Qwen2.5-Coder-1.5B (``bench/enrich_ceiling.py``,
``docs/benchmarks.md``, "Keywords written once per turn").
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

import httpx

from strata.chat import ChatClient, ChatFailed
from strata.models import KEYWORDS, embedded_text
from strata.providers import provider_retry
from strata.settings import Settings

__all__ = ["KEYWORDS", "Enricher", "LLMKeywords", "embedded_text", "make_enricher"]

logger = logging.getLogger(__name__)

MAX_KEYWORDS_CHARS = 200
SYSTEM = ("You index chat messages for search. For each message, write keywords that a later "
          "question might use but the message does not contain: the region and country of a "
          "place, the kind or genre of a named thing, and the interests, traits, values, jobs "
          "or life events it implies. Lowercase, comma-separated, at most 10, no repeats.")
# written for chat in general: none is a turn of the evaluation data
SHOTS = (
    ("Ana: we spent the weekend hiking near Boulder with the dog",
     "colorado, usa, mountains, outdoors, nature lover, pet owner, dog, trip"),
    ("Raj: Just beat Elden Ring on my PS5, took me 80 hours",
     "video game, gamer, playstation, console, fantasy, rpg, hobby"),
    ("Mei: I volunteer at the food bank every Saturday before my nursing shift",
     "charity, community service, generous, nurse, healthcare, job, routine"),
)
MAX_TOKENS = 40
FREQUENCY_PENALTY = 1.0  # a small model repeats its words without it


class Enricher(Protocol):
    def keywords(self, text: str) -> str:
        """The text's keywords ("" for none); never raises."""
        ...


def messages_for(text: str) -> list[dict[str, str]]:
    """The chat request for one text: the instructions, the examples, the text."""
    messages = [{"role": "system", "content": SYSTEM}]
    for said, words in SHOTS:
        messages += [{"role": "user", "content": said}, {"role": "assistant", "content": words}]
    messages.append({"role": "user", "content": text})
    return messages


class LLMKeywords:
    """Keywords from an OpenAI-compatible chat model (``ChatClient``)."""

    def __init__(self, chat: ChatClient) -> None:
        self._chat = chat

    def keywords(self, text: str) -> str:
        if not text.strip():
            return ""
        try:
            reply = self._chat.reply(messages_for(text), max_tokens=MAX_TOKENS,
                                     frequency_penalty=FREQUENCY_PENALTY)
        except ChatFailed as exc:
            logger.warning("enrichment failed, the episode is written without keywords: %s",
                           exc)
            return ""
        return " ".join(reply.split())[:MAX_KEYWORDS_CHARS]


def enrich(enricher: Enricher, texts: Sequence[str]) -> list[str]:
    """Each text's keywords, in order."""
    return [enricher.keywords(text) for text in texts]


def make_enricher(settings: Settings, transport: httpx.BaseTransport | None = None
                  ) -> Enricher | None:
    """The enricher ``settings.enricher`` names (None: off, the default)."""
    if settings.enricher != "openai":
        return None
    return LLMKeywords(ChatClient(settings.openai_base_url, settings.openai_api_key,
                                  settings.openai_chat_model, settings.openai_timeout_s,
                                  transport, retry=provider_retry(settings)))
