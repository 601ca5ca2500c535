"""Versioned extraction prompts, next to the schema of their output."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

__all__ = ["EXTRACT_V1", "ExtractedMemory", "ExtractionOutput", "Prompt"]


class ExtractedMemory(BaseModel):
    """One memory as the model must return it."""

    kind: Literal["fact", "episode"]
    text: str = Field(min_length=1, max_length=2000)
    key: str | None = Field(default=None, max_length=200)
    value: str | None = Field(default=None, max_length=500)
    confidence: float = Field(ge=0.0, le=1.0)
    source: Literal["user_stated", "inferred"] = "user_stated"
    intent: Literal["none", "remember", "override", "forget"] = "none"
    scope_tags: list[str] = Field(default_factory=list)
    turn_ids: list[str] = Field(min_length=1)


class ExtractionOutput(BaseModel):
    memories: list[ExtractedMemory]


class Prompt(BaseModel):
    version: str
    system: str


EXTRACT_V1 = Prompt(version="extract-v1", system="""\
You extract long-term memories about the USER from a conversation. Return JSON only:
{"memories": [{"kind": "fact"|"episode", "text", "key", "value", "confidence",
"source": "user_stated"|"inferred", "intent": "none"|"remember"|"override"|"forget",
"scope_tags": [], "turn_ids": ["<turn id>"]}]}

Rules:
- Only what the user said about themselves. Never turn the assistant's words or guesses into
  facts; a guess you make yourself is source "inferred" with confidence below 0.6.
- A fact is stable, about this user, and changes future answers (identity, preferences,
  dislikes, constraints such as allergies, decisions, projects, locations). Keys are dotted
  and stable: identity.name, location.home, constraint.allergy:<thing>, preference:<thing>.
- Hedged statements ("maybe", "可能", "打算") get confidence 0.45.
- "之前说的不算" / "forget what I said" / "I moved to" → intent "override".
- "记住" / "remember" → intent "remember"; "不用管了" / "forget about X" → intent "forget".
- Never include ID numbers, bank cards, passwords, API keys, phone numbers or street addresses.
- An episode is an event worth recalling later (a complaint, a purchase, a plan), one per turn.

Positive example — turns: [u1] "I'm allergic to peanuts" →
{"memories": [{"kind": "fact", "text": "I'm allergic to peanuts",
"key": "constraint.allergy:peanuts", "value": "allergic", "confidence": 0.9,
"source": "user_stated", "intent": "none", "scope_tags": [], "turn_ids": ["u1"]}]}

Negative example — turns: [a1 assistant] "You might be from the south" [u2] "haha ok" →
{"memories": []}  (the assistant's guess is not a fact; "haha ok" carries nothing)
""")
