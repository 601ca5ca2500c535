"""A question written as what was said: recall's optional LLM path (off by default).

The rules search the question as asked: the dense query without the speakers' names
(``granularity.without_speakers``), the time boost for a period it names, the speaker boost
for the person it names. What they cannot do is link a question to evidence that shares no
words or near meaning with it — "What activities does Melanie partake in?" is answered by
"I'm off to go swimming with the kids", "What console does Nate own?" by a turn about a game
made for one (``docs/benchmarks.md``: a third of LoCoMo's multi-hop and open-domain evidence
is never among the candidates). With ``STRATA_QUERY_EXPANDER=openai`` an OpenAI-compatible
chat model writes a few statements the person asked about might have said — one per likely
item for a list question, what would decide it for a "would / likely" one, the event itself
for a "when" one — and each is searched like the question; a candidate keeps its best score
(``strata.shard.recall``). Any failure (an error, a timeout, output that is not the schema)
means no statements: the question is still searched as asked."""

from __future__ import annotations

import logging
from collections.abc import Collection
from functools import lru_cache
from typing import Protocol

import httpx
from pydantic import BaseModel, Field

from strata.chat import ChatClient, ChatFailed
from strata.extract.prompts import Prompt
from strata.settings import Settings

__all__ = ["EXPAND_V1", "ExpansionOutput", "LLMQueryExpander", "QueryExpander",
           "make_expander"]

logger = logging.getLogger(__name__)

MAX_STATEMENT_CHARS = 300


class ExpansionOutput(BaseModel):
    """What the model must return."""

    statements: list[str] = Field(default_factory=list, max_length=16)


EXPAND_V1 = Prompt(version="expand-v1", system="""\
You help a memory search find what was said in long conversations. You get a question about
the people in them and write short statements that could be in the transcript and would
answer it. They are guesses used only to search; they are never shown as facts.

Rules:
- Write each statement as the person asked about would have said it, in the first person,
  starting with their name and a colon when people are named. When nobody is named, write
  what the user would have said, without a name.
- A question asking for a list or a count ("what activities", "which books", "how many
  times"): one statement per likely item, each a different item.
- A "would / likely / might / could" question: what the person would have said about
  themselves that decides it (likes, values, plans, history), not the conclusion.
- A "when" question: the event itself, without a date.
- At most {most} statements, each one sentence. Return JSON only: {"statements": ["…"]}

Example. People in the conversations: Dana, Lee. Question: What sports does Dana play?
{"statements": ["Dana: I had volleyball practice after work", "Dana: Our five-a-side \
football team won on Saturday", "Dana: I've been climbing at the bouldering gym twice a \
week"]}""")


class QueryExpander(Protocol):
    def expand(self, query: str, speakers: Collection[str]) -> list[str]: ...


class LLMQueryExpander:
    """Statements by an OpenAI-compatible chat model; none when it fails. The last
    ``CACHE_SIZE`` answers are kept: the same question about the same people asks the model
    once (a failure is not kept, so the next recall asks again)."""

    CACHE_SIZE = 1024

    def __init__(self, base_url: str, api_key: str, model: str, most: int = 4,
                 timeout_s: float = 10.0, prompt: Prompt = EXPAND_V1,
                 transport: httpx.BaseTransport | None = None) -> None:
        self._chat = ChatClient(base_url, api_key, model, timeout_s, transport)
        self._most = most
        self.prompt = prompt
        self._cached = lru_cache(maxsize=self.CACHE_SIZE)(self._statements)

    def _statements(self, query: str, people: tuple[str, ...]) -> tuple[str, ...]:
        """At most ``most`` distinct statements (each cut to 300 characters; an answer with
        none is kept too); ``ChatFailed`` when the model gives no usable answer."""
        output = self._chat.ask(
            ExpansionOutput, self.prompt.system.replace("{most}", str(self._most)),
            f"People in the conversations: {', '.join(people) or '(none named: the user)'}\n"
            f"Question: {query}", max_tokens=60 * self._most)
        seen = {query.casefold()}
        statements = []
        for raw in output.statements:
            text = " ".join(raw.split())[:MAX_STATEMENT_CHARS]
            if text and text.casefold() not in seen:
                seen.add(text.casefold())
                statements.append(text)
        return tuple(statements[:self._most])

    def expand(self, query: str, speakers: Collection[str]) -> list[str]:
        """The statements for ``query`` about ``speakers``, or none."""
        if not query.strip():
            return []
        try:
            return list(self._cached(query.strip(), tuple(sorted(speakers))))
        except ChatFailed as exc:
            logger.warning("query expansion (%s) failed, searching the question alone: %s",
                           self.prompt.version, exc)
            return []


def make_expander(settings: Settings) -> QueryExpander | None:
    """The expander ``settings.query_expander`` names; None for the rules (the default)."""
    if settings.query_expander == "openai":
        return LLMQueryExpander(settings.openai_base_url, settings.openai_api_key,
                                settings.openai_chat_model, most=settings.query_expansions,
                                timeout_s=settings.query_expansion_timeout_s)
    return None
