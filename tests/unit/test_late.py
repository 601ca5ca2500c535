"""Late interaction helpers: MaxSim unions and the bounded, expiring token cache."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

from strata.recall.late import (
    MAX_PACKED_CHARS,
    MAX_STORED_TOKENS,
    QueryBatcher,
    TokenCache,
    late_scorer,
    maxsim,
    pack_tokens,
    token_maxima,
    unpack_tokens,
)
from strata.stores.embedders import HashEmbedder
from strata.stores.ports import QueryEmbedding


class Counting(HashEmbedder):
    def __init__(self) -> None:
        super().__init__(32)
        self.encoded: list[str] = []

    def token_vectors(self, texts: Sequence[str]) -> list[npt.NDArray[np.float32]]:
        self.encoded.extend(texts)
        return super().token_vectors(texts)


def test_maxsim_of_a_union_is_the_elementwise_best() -> None:
    assert maxsim([0.9, 0.1], [0.2, 0.8]) == np.float32(0.85)
    assert maxsim([0.5, 0.5]) == 0.5


def test_cache_encodes_a_text_once_until_it_expires_or_is_evicted() -> None:
    now = [0.0]
    embedder = Counting()
    cache = TokenCache(embedder, max_entries=2, ttl_s=60, clock=lambda: now[0])
    texts = ["pottery class on Tuesdays", "hiking in the mountains"]
    plain = token_maxima(embedder, "pottery", texts)
    embedder.encoded.clear()
    cached = token_maxima(embedder, "pottery", texts, cache)
    again = token_maxima(embedder, "pottery", texts, cache)
    assert embedder.encoded == ["pottery", *texts, "pottery"]  # the texts once, queries always
    assert np.allclose(cached, plain, atol=1e-3) and np.allclose(again, plain, atol=1e-3)
    assert (cache.hits, cache.misses) == (2, 2)
    now[0] = 61.0  # expired: encoded again
    embedder.encoded.clear()
    cache.token_vectors(texts[:1])
    assert embedder.encoded == texts[:1]
    cache.token_vectors(["a third text"])  # bounded: the oldest entry goes
    assert len(cache) == 2
    embedder.encoded.clear()
    cache.token_vectors(texts[1:])
    assert embedder.encoded == texts[1:]


def test_late_scorer_with_a_cache() -> None:
    late = late_scorer(HashEmbedder(32), cache_entries=8)
    assert late is not None
    first = late("pottery class", ["pottery class", "mountain hike"])
    assert maxsim(first[0]) > maxsim(first[1])
    assert np.allclose(late("pottery class", ["pottery class", "mountain hike"]), first,
                       atol=1e-3)  # the cached vectors are float16


def test_the_query_batcher_embeds_concurrent_queries_together_and_a_lone_one_at_once(
        ) -> None:
    calls: list[list[str]] = []
    first_running = threading.Event()
    release = threading.Event()

    def embed(texts: list[str]) -> list[QueryEmbedding]:
        calls.append(list(texts))
        if texts == ["a"]:  # the leader's pass runs until released
            first_running.set()
            release.wait(5)
        return [QueryEmbedding([float(len(t))]) for t in texts]

    batcher = QueryBatcher(embed)
    assert batcher.embed("alone").vector == [5.0] and calls == [["alone"]]  # not delayed
    calls.clear()
    results: dict[str, list[float]] = {}

    def ask(text: str) -> None:
        results[text] = batcher.embed(text).vector

    leader = threading.Thread(target=ask, args=("a",))
    leader.start()
    assert first_running.wait(5)
    others = [threading.Thread(target=ask, args=("b" * n,)) for n in range(2, 6)]
    for t in others:
        t.start()
    while len(batcher._queue) < 4:  # the four wait behind the running pass
        threading.Event().wait(0.01)
    release.set()
    for t in [leader, *others]:
        t.join(5)
    assert calls[0] == ["a"] and sorted(calls[1]) == sorted("b" * n for n in range(2, 6))
    assert results == {"a": [1.0], **{"b" * n: [float(n)] for n in range(2, 6)}}


def test_the_query_batcher_hands_an_error_to_every_waiter_and_keeps_working() -> None:
    fail = [True]

    def embed(texts: list[str]) -> list[QueryEmbedding]:
        if fail[0]:
            raise RuntimeError("model gone")
        return [QueryEmbedding([1.0]) for _ in texts]

    batcher = QueryBatcher(embed)
    with pytest.raises(RuntimeError):
        batcher.embed("x")
    fail[0] = False
    assert batcher.embed("x").vector == [1.0]


def test_one_callers_queries_go_in_one_pass_even_behind_a_running_one() -> None:
    calls: list[list[str]] = []
    first_running, release = threading.Event(), threading.Event()

    def embed(texts: list[str]) -> list[QueryEmbedding]:
        calls.append(list(texts))
        if texts == ["lead"]:
            first_running.set()
            release.wait(5)
        return [QueryEmbedding([float(len(t))]) for t in texts]

    batcher = QueryBatcher(embed, max_batch=3)
    assert [e.vector for e in batcher.embed_all(["ab", "abc"])] == [[2.0], [3.0]]
    assert calls == [["ab", "abc"]]
    calls.clear()
    leader = threading.Thread(target=batcher.embed, args=("lead",))
    leader.start()
    assert first_running.wait(5)
    got: list[list[float]] = []
    waiter = threading.Thread(target=lambda: got.extend(
        e.vector for e in batcher.embed_all(["w1", "w22", "w333", "w4444"])))
    waiter.start()
    deadline = time.monotonic() + 5
    while len(batcher._queue) < 4 and time.monotonic() < deadline:
        threading.Event().wait(0.01)
    release.set()
    for t in (leader, waiter):
        t.join(5)
    assert got == [[2.0], [3.0], [4.0], [5.0]]  # in order, over two passes of at most 3
    assert calls == [["lead"], ["w1", "w22", "w333"], ["w4444"]]


def test_a_failed_pass_of_several_queries_leaves_the_batcher_working() -> None:
    fail = [True]

    def embed(texts: list[str]) -> list[QueryEmbedding]:
        if fail[0]:
            raise RuntimeError("model gone")
        return [QueryEmbedding([float(len(t))]) for t in texts]

    batcher = QueryBatcher(embed, max_batch=1)  # one caller's two texts take two passes
    assert batcher.embed_all([]) == []  # nothing to embed: nothing held
    with pytest.raises(RuntimeError):
        batcher.embed_all(["ab", "abc"])
    fail[0] = False
    assert [e.vector for e in batcher.embed_all(["ab", "abc"])] == [[2.0], [3.0]]


@pytest.mark.parametrize(("dim", "kept"), [(384, MAX_STORED_TOKENS), (768, 63), (1024, 47)])
def test_packed_token_vectors_fit_the_stores_field_at_any_dimension(dim: int, kept: int) -> None:
    """MiniLM's 384 components keep 120 tokens; mpnet's 768 packed 120 tokens into 123,208
    characters, past Milvus's 65,535-character field, and its extraction jobs failed."""
    rows = np.random.default_rng(dim).standard_normal((300, dim)).astype(np.float32)
    packed = pack_tokens(rows / np.linalg.norm(rows, axis=1, keepdims=True))
    assert len(packed) <= MAX_PACKED_CHARS
    stored, scale = unpack_tokens(packed)
    assert stored.shape == (kept, dim) and len(scale) == kept


def test_the_packed_limit_is_the_vector_stores_text_field() -> None:
    from strata.stores.milvus import MAX_TEXT

    assert MAX_PACKED_CHARS == MAX_TEXT
