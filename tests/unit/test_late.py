"""Late interaction helpers: MaxSim unions and the bounded, expiring token cache."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from strata.recall.late import TokenCache, late_scorer, maxsim, token_maxima
from strata.stores.embedders import HashEmbedder


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
