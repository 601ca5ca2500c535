"""Embedders: the real MiniLM model is semantic; the hash double is deterministic."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest

from strata.errors import EmbedderError
from strata.recall.late import embed_queries, late_scorer, maxsim
from strata.stores.embedders import HashEmbedder, MiniLMEmbedder, OpenAIEmbedder, WriteEmbedder
from strata.stores.lexical import content_pieces
from strata.tokens import count_tokens


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize(
    ("anchor", "paraphrase", "unrelated"),
    [
        ("I am allergic to peanuts", "Peanuts give me an allergic reaction",
         "The train to Boston leaves at noon"),
        ("我住在北京", "我的家在北京市", "明天的股票市场会下跌"),
    ],
)
def test_minilm_paraphrase_beats_unrelated(minilm: MiniLMEmbedder, anchor: str,
                                           paraphrase: str, unrelated: str) -> None:
    vecs = minilm.encode([anchor, paraphrase, unrelated])
    assert vecs.shape == (3, 384) and vecs.dtype == np.float32
    assert cos(vecs[0], vecs[1]) > cos(vecs[0], vecs[2]) + 0.1


def test_minilm_empty_and_normalized(minilm: MiniLMEmbedder) -> None:
    assert minilm.encode([]).shape == (0, 384)
    assert abs(float(np.linalg.norm(minilm.encode(["hello"])[0])) - 1.0) < 1e-4
    assert minilm.model_id == "all-MiniLM-L6-v2"


def test_minilm_token_vectors_drive_late_interaction(minilm: MiniLMEmbedder) -> None:
    tokens = minilm.token_vectors(["pottery class", "I signed up for a pottery class"])
    assert [t.shape[1] for t in tokens] == [384, 384]
    assert len(tokens[1]) > len(tokens[0]) >= 2  # [CLS] and [SEP] are left out
    assert np.allclose(np.linalg.norm(tokens[1], axis=1), 1.0, atol=1e-4)
    late = late_scorer(minilm)
    assert late is not None
    answer = ("Thanks for the tip about the traffic and the weather on the way home, I will "
              "keep it in mind. By the way, last month I got hurt and had to take a break "
              "from pottery.")
    unrelated = "The train to Boston leaves at noon and the museum opens at nine on Sundays."
    first, second = late("Why did she take a break from pottery?", [answer, unrelated])
    assert len(first) == len(second) > 0
    assert maxsim(first) > maxsim(second) + 0.1
    assert maxsim(first, second) >= max(maxsim(first), maxsim(second))


def test_only_embedders_with_token_vectors_give_late_interaction() -> None:
    assert late_scorer(HashEmbedder(32)) is not None
    assert late_scorer(OpenAIEmbedder("http://127.0.0.1:9", "k", "m", dim=8)) is None


def test_hash_embedder_deterministic_and_chinese_aware() -> None:
    emb = HashEmbedder(128)
    a, b, c = emb.encode(["我住在北京", "我住在北京市", "天气很好"])
    assert np.array_equal(a, HashEmbedder(128).encode(["我住在北京"])[0])
    assert cos(a, b) > cos(a, c)
    assert emb.dim == 128 and emb.model_id == "hash-ngram-128"


def _fake_openai(fail_first: int) -> tuple[httpx.MockTransport, list[int]]:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) <= fail_first:
            return httpx.Response(503, json={"error": "busy"})
        body = json.loads(request.content)
        data = [{"index": i, "embedding": [float(len(t)), 1.0, 0.0]}
                for i, t in enumerate(body["input"])]
        return httpx.Response(200, json={"data": list(reversed(data))})

    return httpx.MockTransport(handler), calls


def test_openai_embedder_batches_orders_and_retries() -> None:
    transport, calls = _fake_openai(fail_first=1)
    emb = OpenAIEmbedder("http://x/v1", "k", "m", dim=3, batch_size=2, retries=2,
                         transport=transport)
    out = emb.encode(["a", "bbb", "cc"])
    assert out.shape == (3, 3)
    expected = np.array([1.0, 3.0, 2.0]) / np.sqrt(np.array([1.0, 3.0, 2.0]) ** 2 + 1)
    assert np.allclose(out[:, 0], expected, atol=1e-5)
    assert len(calls) == 3  # one retried 503, then two batches


def test_openai_embedder_gives_up_with_clear_error() -> None:
    transport, _ = _fake_openai(fail_first=100)
    emb = OpenAIEmbedder("http://x/v1", "k", "m", dim=3, retries=1, transport=transport)
    with pytest.raises(EmbedderError, match="embedding endpoint failed"):
        emb.encode(["a"])


def test_token_counter() -> None:
    assert count_tokens("") == 0
    assert count_tokens("我住在北京") == 5
    assert count_tokens("hello world") >= 2
    assert count_tokens("a" * 400) == 100


def test_the_write_embedder_gives_both_from_one_pass(minilm: MiniLMEmbedder) -> None:
    texts = ["I signed up for a pottery class", "我住在北京"]
    paired = WriteEmbedder(minilm)
    assert np.allclose(paired.encode(texts), minilm.encode(texts), atol=1e-5)
    for kept, direct in zip(paired.token_vectors(texts), minilm.token_vectors(texts),
                            strict=True):
        assert kept.shape == direct.shape and np.allclose(kept, direct, atol=1e-4)


def test_the_direct_forward_pass_gives_sentence_transformers_vectors(
        minilm: MiniLMEmbedder) -> None:
    texts = ["Where did Caroline move from?", "我上个月搬到上海了。", "ok",
             "A much longer sentence about a pottery class on Saturday mornings " * 3]
    reference = minilm._model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    pooled, tokens = minilm.encode_with_tokens(texts)
    assert np.allclose(pooled, reference, atol=1e-5)
    features = minilm._model.encode(texts, output_value=None)
    for text, rows, feat in zip(texts, tokens, features, strict=True):
        n = int(feat["attention_mask"].sum())
        want = feat["token_embeddings"][:n].numpy()[1:-1]
        want = want / np.linalg.norm(want, axis=1, keepdims=True)
        assert rows.shape == want.shape and np.allclose(rows, want, atol=1e-5), text


def test_content_pieces_drop_function_words_and_punctuation() -> None:
    pieces = ["what", "activities", "does", "melanie", "part", "##ake", "in", "?"]
    assert content_pieces(pieces) == [False, True, False, True, True, True, False, False]
    assert content_pieces(["我", "住", "在", "哪", "个", "城", "市", "？"]) == [
        True, True, False, True, True, True, True, False]
    assert content_pieces([]) == []
    assert content_pieces(["##ing"]) == [True]  # a stray continuation starts a word


def test_a_query_keeps_the_token_vectors_of_its_content_words(minilm: MiniLMEmbedder) -> None:
    query = "What activities does Melanie partake in?"
    (every,) = minilm.token_vectors([query])
    (embedded,) = embed_queries(WriteEmbedder(minilm), [query])
    assert embedded.tokens is not None and len(every) == 8
    # what, does, in, ? are gone; activities, melanie, part, ##ake stay, unchanged
    assert np.allclose(embedded.tokens, every[[1, 3, 4, 5]], atol=1e-6)
    assert np.allclose(embedded.vector, minilm.encode([query])[0], atol=1e-5)
    (only_stop,) = embed_queries(minilm, ["what is it?"])  # nothing left: every token stays
    assert only_stop.tokens is not None and len(only_stop.tokens) == 4
