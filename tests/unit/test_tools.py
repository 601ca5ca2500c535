"""The LLM tool definitions and their dispatcher, against a fake Strata."""

from __future__ import annotations

import asyncio
import json
import re

import httpx
import jsonschema
import pytest

from strata import AsyncClient, Client
from strata.client import NO_RETRY
from strata.errors import Unauthorized
from strata.tools import TOOLS, adispatch, dispatch, openai_tools

OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class FakeStrata:
    """Answers like Strata for the paths the tools use; records what it was sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, object]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.sent.append((request.method, request.url.raw_path.decode(), body))
        if request.headers["authorization"] != "Bearer k":
            return httpx.Response(401, json={"error": "unauthorized", "detail": "bad key"})
        if request.url.path.endswith("/memories/gone"):
            return httpx.Response(404, json={"error": "not_found", "detail": "no memory gone"})
        if request.url.path == "/v1/recall":
            return httpx.Response(200, json={"context": "[facts] allergic to peanuts",
                                             "items": [], "route": "personal"})
        return httpx.Response(200, json={"memories": []})


def client(fake: FakeStrata, key: str = "k") -> Client:
    return Client("http://x", api_key=key, transport=httpx.MockTransport(fake), retry=NO_RETRY)


def test_definitions_are_valid_openai_tools_with_valid_json_schemas() -> None:
    tools = openai_tools()
    assert {t["function"]["name"] for t in tools} == {
        "add_turn", "recall", "remember", "forget", "search_memories", "list_memories",
        "search_knowledge", "close_session", "job_status"}
    for tool in tools:
        fn = tool["function"]
        assert tool["type"] == "function" and OPENAI_NAME.match(fn["name"])
        assert len(fn["description"]) > 40
        schema = fn["parameters"]
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert all(p.get("description") for p in schema["properties"].values())
        assert "title" not in json.dumps(schema) and "null" not in json.dumps(schema)
        assert set(schema.get("required", [])) <= set(schema["properties"])


def test_bound_arguments_leave_the_schemas() -> None:
    for tool in openai_tools(bound=("user_id", "session_id")):
        params = tool["function"]["parameters"]
        assert "user_id" not in params["properties"] and "session_id" not in params["properties"]
        assert "user_id" not in params.get("required", [])
    recall = openai_tools(bound=("user_id",), names=["recall"])[0]["function"]["parameters"]
    assert recall["required"] == ["query"]
    with pytest.raises(ValueError):
        openai_tools(bound=("tenant",))


@pytest.mark.parametrize(("name", "arguments", "valid"), [
    ("recall", {"user_id": "ann", "query": "dinner?"}, True),
    ("recall", {"user_id": "ann"}, False),
    ("recall", {"user_id": "ann", "query": "q", "budget_tokens": 10}, False),
    ("recall", {"user_id": "ann", "query": "q", "tenant": "other"}, False),
    ("list_memories", {"user_id": "ann", "status": "active", "limit": 5}, True),
    ("list_memories", {"user_id": "ann", "status": "gone"}, False),
    ("search_knowledge", {"query": "install", "top_k": 3}, True),
    ("add_turn", {"user_id": "ann", "session_id": "s1", "role": "tool", "content": "x"}, False),
])
def test_the_schema_and_the_dispatcher_agree(name: str, arguments: dict[str, object],
                                             valid: bool) -> None:
    schema = openai_tools(names=[name])[0]["function"]["parameters"]
    assert jsonschema.Draft202012Validator(schema).is_valid(arguments) is valid
    fake = FakeStrata()
    result = dispatch(client(fake), name, arguments)
    assert ("error" not in result) is valid, result
    assert bool(fake.sent) is valid


def test_a_model_call_reaches_strata_with_the_bound_user() -> None:
    fake = FakeStrata()
    c = client(fake)
    result = dispatch(c, "recall", '{"query": "what should I cook?", "session_id": "s1"}',
                      user_id="ann")
    assert result["context"] == "[facts] allergic to peanuts"
    assert fake.sent == [("POST", "/v1/recall", {
        "user_id": "ann", "query": "what should I cook?", "session_id": "s1",
        "budget_tokens": 500})]
    dispatch(c, "remember", {"key": "diet.allergy", "value": "peanuts"}, user_id="ann")
    dispatch(c, "search_memories", {"query": "peanut", "kind": "fact"}, user_id="ann")
    assert fake.sent[1:] == [
        ("POST", "/v1/users/ann/memories", {"kind": "fact", "key": "diet.allergy",
                                            "value": "peanuts"}),
        ("GET", "/v1/users/ann/memories?kind=fact&q=peanut&limit=20", None)]


def test_a_model_cannot_reach_another_user_or_an_id_outside_the_path() -> None:
    fake = FakeStrata()
    c = client(fake)
    other = dispatch(c, "recall", {"user_id": "bob", "query": "q"}, user_id="ann")
    assert other == {"error": "invalid_input", "detail": "user_id is fixed by the application"}
    assert dispatch(c, "forget", {"memory_id": "../../bob"}, user_id="ann")["error"] == (
        "invalid_input")
    assert fake.sent == []


def test_errors_the_model_can_fix_are_answers_the_rest_are_raised() -> None:
    fake = FakeStrata()
    assert dispatch(client(fake), "forget", {"user_id": "ann", "memory_id": "gone"}) == {
        "error": "not_found", "detail": "404: no memory gone"}
    assert dispatch(client(fake), "nope", {})["error"] == "unknown_tool"
    assert dispatch(client(fake), "recall", "{not json")["error"] == "invalid_input"
    assert dispatch(client(fake), "recall", "[1]")["error"] == "invalid_input"
    fact = dispatch(client(fake), "remember", {"user_id": "ann", "key": "diet.allergy"})
    assert fact["error"] == "invalid_input" and "key and value" in fact["detail"]
    with pytest.raises(Unauthorized):
        dispatch(client(fake, key="wrong"), "recall", {"user_id": "ann", "query": "q"})


def test_async_dispatch_runs_the_same_tools() -> None:
    fake = FakeStrata()

    async def run() -> dict[str, object]:
        async with AsyncClient("http://x", api_key="k",
                               transport=httpx.MockTransport(fake)) as c:
            return await adispatch(c, "list_memories", {"status": "active"}, user_id="ann")

    assert asyncio.run(run()) == {"memories": []}
    assert fake.sent == [("GET", "/v1/users/ann/memories?status=active&limit=20", None)]
    assert set(TOOLS) == {t["function"]["name"] for t in openai_tools()}
