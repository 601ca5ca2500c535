"""Intent routing: which layers a query needs. Rules and keywords first (zh + en); an optional
classifier can be plugged in behind ``RouteClassifier``."""

from __future__ import annotations

import re
from enum import Enum
from typing import Protocol

from pydantic import BaseModel

from strata.models import Layer

__all__ = ["LAYERS", "Route", "RouteClassifier", "RouteDecision", "route_query"]

LAYERS: tuple[Layer, ...] = tuple(Layer)  # every layer, in the order a decision lists them


class Route(str, Enum):
    CONTINUATION = "continuation"  # "expand on that", "刚才那个" → mostly working memory
    PERSONAL = "personal"          # the user's own history and preferences
    KNOWLEDGE = "knowledge"        # documentation questions
    MIXED = "mixed"                # both, or unclear


ROUTE_LAYERS: dict[Route, tuple[Layer, ...]] = {
    Route.CONTINUATION: (Layer.WORKING, Layer.FACTS),
    Route.PERSONAL: (Layer.WORKING, Layer.FACTS, Layer.EPISODES, Layer.PROCEDURES),
    Route.KNOWLEDGE: (Layer.WORKING, Layer.PROCEDURES, Layer.KNOWLEDGE),
    Route.MIXED: LAYERS,
}

_CONTINUATION = re.compile(
    r"刚才|上面|前面说|再展开|继续说|接着说|那个再|你刚说|\b(go on|continue|elaborate|expand on|"
    r"you just said|as you said|what did you mean|the previous answer|that last)\b", re.I)
_PERSONAL = re.compile(
    r"我(之前|上次|以前|曾经|说过|告诉过|喜欢|讨厌|住|的|们)|咱|我是不是|还记得|记得我|"
    r"\b(my|mine|did i|have i|was i|am i|(?<!how )(?<!what )do i|i told you|remember when|"
    r"about me|for me|we|we're|we've|we'll|our|ours|us|let's|"
    r"what do i|when did i|where did i|who did i)\b", re.I)
# questions about people: a possessive name, "did Caroline …", a name inside the sentence
# ("the shoes that Melanie got"), third-person pronouns
_PEOPLE = re.compile(
    r"他|她|\b[A-Z][a-z]+'s\b|(?<=[a-z,] )[A-Z][a-z]{2,}\b|"
    r"\b(?i:did|does|do|has|have|is|was|were|would|will|could|can|had) [A-Z][a-z]+\b|"
    r"\b(?i:he|she|his|her|hers|him|they|their|them)\b")
# documentation cues: a question with one of these and no personal cue is about the docs
_KNOWLEDGE = re.compile(
    r"文档|配置|步骤|教程|说明|规定|政策|价格|支持|"
    r"\b(docs?|documentation|manual|configure|install|setup|set up|policy|pricing|"
    r"supported|error code|api)\b", re.I)
# the form of a question ("what are …", "how does …") says nothing about whom it is about:
# "What are we doing with the kitchen?" is the user's own business, so a question with only
# this cue searches memory too (mixed), never the knowledge base alone
_QUESTION = re.compile(
    r"怎么|如何|什么是|\b(how (do|to|can|does)|what is(?! my)|what are(?! my))\b", re.I)


class RouteDecision(BaseModel):
    route: Route
    layers: list[Layer]
    reason: str


class RouteClassifier(Protocol):
    """An optional model that routes what the rules leave unclear."""

    def classify(self, query: str) -> Route | None: ...


def route_query(query: str, requested: list[str] | None = None,
                has_session: bool = False,
                classifier: RouteClassifier | None = None) -> RouteDecision:
    """The route and layers for ``query``; explicit ``requested`` layers always win."""
    continuation = bool(_CONTINUATION.search(query))
    personal = bool(_PERSONAL.search(query) or _PEOPLE.search(query))
    knowledge = bool(_KNOWLEDGE.search(query))
    question = bool(_QUESTION.search(query))
    if continuation and has_session and not (knowledge or question):
        route, reason = Route.CONTINUATION, "refers to the current conversation"
    elif personal and (knowledge or question):
        route, reason = Route.MIXED, "personal and documentation cues"
    elif personal:
        route, reason = Route.PERSONAL, "asks about the user's own history"
    elif knowledge:
        route, reason = Route.KNOWLEDGE, "a documentation question"
    elif question:
        route, reason = Route.MIXED, "a question that may be about the user"
    else:
        guess = classifier.classify(query) if classifier is not None else None
        route, reason = (guess, "classifier") if guess else (Route.MIXED, "no clear cue")
    layers = list(ROUTE_LAYERS[route])
    if requested:
        unknown = set(requested) - set(LAYERS)
        if unknown:
            raise ValueError(f"unknown layers {sorted(unknown)}")
        layers, reason = [layer for layer in LAYERS if layer in requested], "layers requested"
    if not has_session and Layer.WORKING in layers:
        layers.remove(Layer.WORKING)
    return RouteDecision(route=route, layers=layers, reason=reason)
