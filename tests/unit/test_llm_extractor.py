"""The LLM extractor: validated JSON in, rules on any failure, user-grounded only."""

from __future__ import annotations

import json

import httpx

from strata.extract.llm import LLMExtractor
from strata.models import Role, Turn

TURNS = [Turn(turn_id="u1", session_id="s", user_id="u", role=Role.USER,
              content="I'm allergic to peanuts"),
         Turn(turn_id="a1", session_id="s", user_id="u", role=Role.ASSISTANT,
              content="You might be from the south")]


def extractor(reply: object, status: int = 200) -> LLMExtractor:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        assert body["messages"][0]["content"].startswith("You extract long-term memories")
        content = reply if isinstance(reply, str) else json.dumps(reply)
        return httpx.Response(status, json={"choices": [{"message": {"content": content}}]})

    return LLMExtractor("http://llm/v1", "", "m", transport=httpx.MockTransport(handler))


def test_valid_output_is_used_and_grounded() -> None:
    out = extractor({"memories": [
        {"kind": "fact", "text": "allergic to peanuts", "key": "constraint.allergy:peanuts",
         "value": "allergic", "confidence": 0.9, "turn_ids": ["u1"]},
        {"kind": "fact", "text": "from the south", "key": "identity.origin", "value": "south",
         "confidence": 0.9, "turn_ids": ["a1"]}]}).extract(TURNS)
    assert [(c.key, c.provenance.turn_ids) for c in out] == [
        ("constraint.allergy:peanuts", ["u1"])]


def test_malformed_or_failed_output_falls_back_to_rules() -> None:
    for bad in (extractor("not json at all"), extractor({"memories": [{"kind": "fact"}]}),
                extractor({"oops": 1}, status=500)):
        out = bad.extract(TURNS)
        assert [c.key for c in out if c.key] == ["constraint.allergy:peanuts"]
