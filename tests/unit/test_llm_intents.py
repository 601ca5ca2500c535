"""The LLM intent detector (issue #36) against a scripted chat endpoint: how a reply is read,
and that an unusable reply gives the rules' reading (never a forget of its own)."""

from __future__ import annotations

import json

import httpx

from strata.chat import ChatClient
from strata.extract.intent_model import RuleIntents, Utterance
from strata.extract.llm_intents import INTENT_PROMPT, LLMIntents


def detector(*contents: str, status: int = 200) -> tuple[LLMIntents, list[dict[str, object]]]:
    """An LLMIntents whose n-th call is answered with ``contents[n]`` (the last repeats)."""
    seen: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        content = contents[min(len(seen), len(contents)) - 1]
        return httpx.Response(status, json={"choices": [{"message": {"content": content}}]})

    chat = ChatClient("http://llm/v1", "", "m", 5.0, transport=httpx.MockTransport(handler))
    return LLMIntents(chat), seen


def test_a_reply_is_read_into_intent_scope_and_target() -> None:
    llm, seen = detector(
        json.dumps({"intent": "forget", "scope": "all", "target": None}),
        json.dumps({"intent": " Change ", "scope": "one", "target": "x"}),
        json.dumps({"intent": "forget", "scope": "whatever", "target": " my old address "}))
    first, second, third = llm.read([Utterance("把我的一切都忘了吧"),
                                     Utterance("Actually I live in Lyon now", "Where do you live?"),
                                     Utterance("Drop my old address")])
    assert (first.intent, first.scope, first.by) == ("forget", "all", "llm")
    # a label is read case- and space-blind; only a forget carries scope and target
    assert (second.intent, second.scope, second.target) == ("change", None, None)
    # an unknown scope is the narrowest one, never "all"
    assert (third.scope, third.target) == ("one", "my old address")
    assert (llm.calls, llm.fallbacks) == (3, 0)
    # one call per utterance: the system prompt, then the turn with the turn before it
    messages = seen[1]["messages"]
    assert isinstance(messages, list)
    assert messages[0] == {"role": "system", "content": INTENT_PROMPT}
    assert messages[1]["content"] == ('Previous: "Where do you live?"\n'
                                      'Turn: "Actually I live in Lyon now"')
    assert seen[1]["response_format"] == {"type": "json_object"}
    assert 'Previous' not in seen[0]["messages"][1]["content"]  # type: ignore[index]


def test_a_bad_reply_falls_back_to_the_rules_and_is_counted() -> None:
    turns = [Utterance("Don't forget to buy milk on the way home"),
             Utterance("I forgot my keys again"),
             Utterance("Please forget my phone number")]
    for bad in ("forget", '{"intent": "forget everything"}', '{"scope": "all"}', "not json {"):
        llm, _ = detector(bad)
        readings = llm.read(turns)
        assert [r.intent for r in readings] == [r.intent for r in RuleIntents().read(turns)]
        assert [r.by for r in readings] == ["rules"] * 3
        # the reply said "forget"; the rules' reading of the hard negatives is not a forget
        assert "forget" not in [r.intent for r in readings[:2]]
        assert (llm.calls, llm.fallbacks) == (3, 3)


def test_an_endpoint_error_falls_back_to_the_rules() -> None:
    llm, _ = detector(json.dumps({"intent": "forget", "scope": "all"}), status=500)
    [reading] = llm.read([Utterance("I'd like to hear a joke")])
    assert (reading.intent, reading.by) == ("none", "rules")
    assert llm.fallbacks == 1
