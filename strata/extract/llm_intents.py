"""An LLM reading of what a user turn asks of memory (issue #36): the third detector beside
the rules and the learned model, measured on the same held-out writers
(``bench/intents.py --llm-url``). Not on the turn path: a chat call per turn costs seconds on
a small local model, where the learned reading costs milliseconds.

One chat call per utterance (the turn and the turn before it) under a short system prompt
that defines the seven labels in plain words and names the phrasings that are not a forget;
the reply is JSON ``{intent, scope, target}`` validated by a pydantic model. A reply that does
not fit (or any chat error) gives the rules' reading of that utterance, and is counted
(``fallbacks``): a garbled reply never becomes a forget by itself.

The prompt's examples were written for it; no sentence of the labelled corpus is in it (the
held-out writers' rows are the test).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, field_validator

from strata.chat import ChatClient, ChatFailed
from strata.extract.intent_model import IntentReading, RuleIntents, Utterance

__all__ = ["INTENT_PROMPT", "IntentReply", "LLMIntents", "intent_prompt_user"]

logger = logging.getLogger(__name__)

SCOPES = ("one", "topic", "person", "all")

INTENT_PROMPT = """\
You label one chat turn that a user said to their assistant, which keeps a memory of the user.
The turn may be in English or Chinese. Choose exactly one intent:
- forget: the user asks the assistant to forget, delete, drop or stop keeping or bringing up
  something it knows about them (one thing, a topic, a person, or everything), also by saying
  a matter is over and needs no more tracking.
- change: the user updates or corrects something true about them (a new value replaces an
  old one: moved house, new job, no longer likes something, "actually it is X, not Y").
- remember: the user asks the assistant to remember, note or save something now.
- confirm: the user says that what the previous turn stated or asked is right.
- habit: the user states a regular routine or lasting habit of theirs.
- event: the user reports a one-off thing that happened or will happen to them.
- none: anything else (questions, chat, opinions, advice to others).
These are NOT forget: "don't forget to ..." (a reminder), "I forgot my keys" (the user
forgot something), a question about forgetting, quoting what someone else said, a
hypothetical ("if I ever asked you to forget ...").
For forget, scope is "all" when the user wants everything forgotten, "person" for
everything about one person, "topic" for a whole subject, else "one"; target is what is
to be forgotten, in the user's words. For other intents scope and target are null.
Examples:
Turn: "Wipe whatever you have on my sister's wedding plans." ->
{"intent": "forget", "scope": "topic", "target": "my sister's wedding plans"}
Turn: "Don't let me forget to water the plants tonight." ->
{"intent": "none", "scope": null, "target": null}
Turn: "我搬到杭州了，不在上海住了。" -> {"intent": "change", "scope": null, "target": null}
Previous: "So you take the 7:40 train every weekday?" Turn: "Yep, exactly." ->
{"intent": "confirm", "scope": null, "target": null}
Answer with JSON only: {"intent": ..., "scope": ..., "target": ...}"""


class IntentReply(BaseModel):
    """The model's answer: one of the seven labels; a forget's scope and target."""

    intent: Literal["forget", "change", "remember", "confirm", "habit", "event", "none"]
    scope: str | None = None
    target: str | None = None

    @field_validator("intent", mode="before")
    @classmethod
    def _plain(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value


def intent_prompt_user(utterance: Utterance) -> str:
    """The user message of one call: the turn before (when there is one) and the turn."""
    before = f'Previous: "{utterance.previous}"\n' if utterance.previous else ""
    return f'{before}Turn: "{utterance.text}"'


class LLMIntents:
    """Reads each utterance with one call to ``chat``; the rules answer when the reply is
    unusable (``fallbacks`` counts those, ``calls`` every call)."""

    def __init__(self, chat: ChatClient, max_tokens: int = 80) -> None:
        self._chat = chat
        self._rules = RuleIntents()
        self._max_tokens = max_tokens
        self.calls = 0
        self.fallbacks = 0

    def read(self, utterances: Sequence[Utterance]) -> list[IntentReading]:
        return [self._read_one(u) for u in utterances]

    def _read_one(self, utterance: Utterance) -> IntentReading:
        self.calls += 1
        try:
            reply = self._chat.ask(IntentReply, INTENT_PROMPT, intent_prompt_user(utterance),
                                   max_tokens=self._max_tokens)
        except ChatFailed as exc:
            self.fallbacks += 1
            logger.info("intent reply unusable, the rules read the turn: %s", exc)
            return self._rules.read([utterance])[0]
        if reply.intent != "forget":
            return IntentReading(reply.intent, 1.0, "llm")
        scope = (reply.scope or "one").strip().lower()
        target = (reply.target or "").strip() or None
        return IntentReading("forget", 1.0, "llm", scope if scope in SCOPES else "one", target)
