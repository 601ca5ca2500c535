"""Recall's optional LLM path (``strata.recall.expansion``): the statements an
OpenAI-compatible model writes for a question are searched beside it, in the user's shard;
anything failed or malformed searches the question alone. The model is a double here — an
HTTP server speaking the chat-completions shape; ``STRATA_TEST_LLM_BASE_URL`` runs the last
test against a real endpoint."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from strata.layers.memories import LongTermMemory
from strata.layers.memory_models import MemoryCreate
from strata.layers.summarize import RuleSummarizer
from strata.models import Layer, MemoryKind, RecallRequest, Scope
from strata.recall.assembly import assemble
from strata.recall.expansion import LLMQueryExpander, make_expander
from strata.recall.recipes import DEFAULT, RecallRecipe
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.hot import HotIndexStore
from strata.stores.redis import RedisStore
from strata.testing.fake_vectors import FakeVectorStore

U = Scope(tenant="t", user="u")
EMB = HashEmbedder(64)
QUESTION = "What activities does Melanie partake in?"
SWIMMING = "Melanie: I'm off to go swimming with the kids. Talk soon!"


def expander(reply: object, status: int = 200, most: int = 4) -> LLMQueryExpander:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        assert body["messages"][0]["content"].startswith("You help a memory search")
        content = reply if isinstance(reply, str) else json.dumps(reply)
        return httpx.Response(status, json={"choices": [{"message": {"content": content}}]})

    return LLMQueryExpander("http://llm/v1", "", "m", most=most,
                            transport=httpx.MockTransport(handler))


def test_statements_are_cleaned_deduplicated_and_capped() -> None:
    out = expander({"statements": [
        "Melanie:  I went   swimming with the kids", QUESTION.upper(), "",
        "melanie: i went swimming with the kids", "Melanie: I signed up for a pottery class",
        "x" * 500, "Melanie: I go camping"]}, most=3).expand(QUESTION, {"Melanie", "Caroline"})
    assert out == ["Melanie: I went swimming with the kids",
                   "Melanie: I signed up for a pottery class", "x" * 300]


def test_a_failed_or_malformed_answer_gives_no_statements() -> None:
    def timeout(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    slow = LLMQueryExpander("http://llm/v1", "", "m", transport=httpx.MockTransport(timeout))
    for bad in (expander("not json"), expander({"statements": "one"}),
                expander({"statements": ["a"] * 40}), expander({"oops": 1}, status=500),
                expander({"choices": []}), slow):
        assert bad.expand(QUESTION, {"Melanie"}) == []
    assert expander({"statements": ["never asked"]}).expand("  ", set()) == []


def test_the_same_question_asks_the_model_once_but_a_failure_is_asked_again() -> None:
    asked: list[str] = []
    fail = [True]

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(json.loads(request.content)["messages"][1]["content"])
        if fail[0]:
            return httpx.Response(503, json={"error": "busy"})
        reply = json.dumps({"statements": ["Melanie: I went swimming"]})
        return httpx.Response(200, json={"choices": [{"message": {"content": reply}}]})

    llm = LLMQueryExpander("http://llm/v1", "", "m", transport=httpx.MockTransport(handler))
    assert llm.expand(QUESTION, {"Melanie"}) == []
    fail[0] = False
    for _ in range(3):
        assert llm.expand(f" {QUESTION}", ["Melanie"]) == ["Melanie: I went swimming"]
    assert llm.expand(QUESTION, {"Caroline"}) == ["Melanie: I went swimming"]
    assert [a.split("\n")[0] for a in asked] == [
        "People in the conversations: Melanie", "People in the conversations: Melanie",
        "People in the conversations: Caroline"]


def test_the_rules_are_the_default() -> None:
    assert make_expander(Settings()) is None
    assert isinstance(make_expander(Settings(query_expander="openai")), LLMQueryExpander)
    with pytest.raises(ValueError):
        Settings(query_expansions=0)


class FakeChat:
    """An OpenAI-compatible chat endpoint on 127.0.0.1 that answers every request with
    ``reply`` (an HTTP 500 when it is None) and keeps the requests' bodies."""

    def __init__(self) -> None:
        self.reply: dict[str, Any] | None = None
        self.requests: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append({"path": self.path, **body})
                if fake.reply is None:
                    self.send_response(500)
                    self.end_headers()
                    return
                data = json.dumps({"choices": [{"message": {
                    "content": json.dumps(fake.reply)}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def chat() -> Iterator[FakeChat]:
    fake = FakeChat()
    yield fake
    fake.close()


def shard_with_turns(redis_store: RedisStore, settings: Settings) -> SessionShardService:
    durable = FakeVectorStore()
    durable.ensure_collections(64)
    lt = LongTermMemory(HotIndexStore(durable, 64, tokens=lambda: EMB), EMB)
    shard = SessionShardService(0, settings, redis_store, RuleSummarizer(), longterm=lambda: lt)
    for speaker, text in [
            ("Melanie", SWIMMING),
            ("Caroline", "Caroline: Hey Melanie! How is your week going?"),
            ("Melanie", "Melanie: Busy at work, the deadlines keep coming."),
            ("Caroline", "Caroline: I finally finished the library for the kids' books."),
            ("Melanie", "Melanie: We had pizza for dinner and watched a film.")]:
        shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text=text,
                                            metadata={"speaker": speaker}))
    return shard


def recall(shard: SessionShardService, query: str = QUESTION, recipe: RecallRecipe = DEFAULT
           ) -> tuple[list[str], list[Any], list[str]]:
    """The items' texts, the candidates and the statements the debug output lists."""
    request = RecallRequest(user_id=U.user, query=query, layers=[Layer.EPISODES], debug=True)
    answer = shard.recall_memory(U, request, None, recipe=recipe)
    response = assemble(request, answer.decision, answer.working, answer.found, recipe,
                        lambda: answer.most_used)
    assert response.debug is not None
    return ([i.text for i in response.items], answer.found.candidates,
            list(response.debug["statements"]))


def test_a_statement_finds_what_the_question_shares_no_words_with(
        redis_store: RedisStore, chat: FakeChat) -> None:
    rules, asked_alone, none = recall(shard_with_turns(redis_store, Settings()))
    assert rules[0] != SWIMMING and none == []  # nothing links "activities" to swimming
    [alone] = [c for c in asked_alone if c.text == SWIMMING]

    statements = ["Melanie: I'm off to go swimming with the kids",
                  "Melanie: I signed up for a pottery class"]
    chat.reply = {"statements": statements}
    shard = shard_with_turns(redis_store, Settings(
        query_expander="openai", openai_base_url=chat.url, openai_chat_model="m"))
    whole = DEFAULT.model_copy(update={"expansion_weight": 1.0})
    texts, candidates, listed = recall(shard, recipe=whole)
    assert texts[0] == SWIMMING and listed == statements
    [found] = [c for c in candidates if c.text == SWIMMING]
    assert found.breakdown.statement == 1  # the first statement found it
    assert found.parts["statement"] == 1.0  # as the debug output shows it
    # by default a statement's candidates count × 0.8: the better of that and the question's
    _, candidates, _ = recall(shard)
    [weighed] = [c for c in candidates if c.text == SWIMMING]
    assert weighed.score == pytest.approx(max(alone.score,
                                              DEFAULT.expansion_weight * found.score))
    asked = chat.requests[0]
    assert len(chat.requests) == 1  # the second recall of the question: the kept answer
    assert asked["path"] == "/v1/chat/completions" and asked["model"] == "m"
    assert asked["messages"][1]["content"] == (
        f"People in the conversations: Caroline, Melanie\nQuestion: {QUESTION}")


def test_a_failing_model_leaves_the_question_searched_alone(
        redis_store: RedisStore, chat: FakeChat) -> None:
    expected = recall(shard_with_turns(redis_store, Settings()), "how is the library going?")
    assert expected[2] == []
    chat.reply = None  # every request: HTTP 500
    shard = shard_with_turns(redis_store, Settings(
        query_expander="openai", openai_base_url=chat.url, openai_chat_model="m"))
    texts, candidates, listed = recall(shard, "how is the library going?")
    assert listed == []
    assert len(chat.requests) == 1
    assert texts == expected[0]
    assert [c.id for c in candidates] == [c.id for c in expected[1]]
    assert [c.score for c in candidates] == pytest.approx([c.score for c in expected[1]])
    assert all(c.breakdown.statement is None for c in candidates)


def test_a_real_model_writes_statements_in_the_schema() -> None:
    base_url = os.environ.get("STRATA_TEST_LLM_BASE_URL")
    if not base_url:
        pytest.skip("no OpenAI-compatible endpoint configured "
                    "(set STRATA_TEST_LLM_BASE_URL and STRATA_TEST_LLM_MODEL)")
    real = LLMQueryExpander(base_url, os.environ.get("STRATA_TEST_LLM_API_KEY", ""),
                            os.environ.get("STRATA_TEST_LLM_MODEL", ""), most=4, timeout_s=60)
    out = real.expand(QUESTION, {"Melanie", "Caroline"})
    assert 1 <= len(out) <= 4
    assert all(s.startswith("Melanie:") for s in out)
