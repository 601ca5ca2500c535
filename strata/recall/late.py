"""Late interaction: a query and a text compared token by token (MaxSim), not as two pooled
vectors.

Each query token is matched with its most similar token of the text; a text's score is the
mean of those best matches. A pooled sentence vector blurs a long turn into one direction, so
a turn that answers the question in one clause scores low against it; MaxSim keeps the clause.
The per-query-token maxima are kept (not only their mean) because the maxima of a pair of
turns are the element-wise maximum of the two turns' maxima: one encoding of every turn
scores its exchanges too.

The model is the deployment's embedder (MiniLM's contextual token vectors); an embedder
without token vectors (a remote embeddings API) disables it and recall uses the pooled
cosine.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["LateScorer", "TokenCache", "TokenEmbedder", "late_scorer", "maxsim",
           "token_maxima"]

# (query, texts) → for every text, the best similarity of each query token
LateScorer = Callable[[str, Sequence[str]], list[list[float]]]


@runtime_checkable
class TokenEmbedder(Protocol):
    """An embedder that can return one unit vector per token of a text."""

    def token_vectors(self, texts: Sequence[str]) -> list[npt.NDArray[np.float32]]: ...


class TokenCache:
    """Recently encoded texts' token vectors (float16), keyed by a hash of the text, so the
    same user's memories recalled again within minutes are not encoded again. Bounded in
    entries and in age: a forgotten memory's vectors are gone after ``ttl_s`` at the latest,
    and no text is kept."""

    def __init__(self, embedder: TokenEmbedder, max_entries: int = 4096,
                 ttl_s: float = 300.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._embedder = embedder
        self._max = max_entries
        self._ttl = ttl_s
        self._clock = clock
        self._entries: OrderedDict[bytes, tuple[float, npt.NDArray[np.float16]]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def token_vectors(self, texts: Sequence[str]) -> list[npt.NDArray[np.float32]]:
        keys = [hashlib.blake2b(t.encode("utf-8"), digest_size=16).digest() for t in texts]
        now = self._clock()
        found: dict[int, npt.NDArray[np.float32]] = {}
        with self._lock:
            for i, key in enumerate(keys):
                entry = self._entries.get(key)
                if entry is not None and now - entry[0] <= self._ttl:
                    self._entries.move_to_end(key)
                    found[i] = entry[1].astype(np.float32)
            self.hits += len(found)
            self.misses += len(texts) - len(found)
        todo = [i for i in range(len(texts)) if i not in found]
        if todo:
            fresh = self._embedder.token_vectors([texts[i] for i in todo])
            with self._lock:
                for i, vectors in zip(todo, fresh, strict=True):
                    found[i] = vectors
                    self._entries[keys[i]] = (now, vectors.astype(np.float16))
                    self._entries.move_to_end(keys[i])
                while len(self._entries) > self._max:
                    self._entries.popitem(last=False)
        return [found[i] for i in range(len(texts))]

    def __len__(self) -> int:
        return len(self._entries)


def token_maxima(embedder: TokenEmbedder, query: str, texts: Sequence[str],
                 cache: TokenCache | None = None) -> list[list[float]]:
    """For every text, the best cosine of each query token against the text's tokens."""
    if not texts:
        return []
    q = embedder.token_vectors([query])[0]
    docs = (cache if cache is not None else embedder).token_vectors(texts)
    return [(q @ d.T).max(axis=1).tolist() if len(d) and len(q) else [0.0] * len(q)
            for d in docs]


def maxsim(*maxima: Sequence[float]) -> float:
    """The MaxSim score of one text, or of several texts read as one (their union)."""
    best = np.max(np.asarray(maxima, dtype=np.float32), axis=0)
    return float(best.mean()) if best.size else 0.0


def late_scorer(embedder: object, cache_entries: int = 0) -> LateScorer | None:
    """A scorer over ``embedder``'s token vectors (with a ``TokenCache`` of that many
    entries), or None if it has none."""
    if not isinstance(embedder, TokenEmbedder):
        return None
    cache = TokenCache(embedder, cache_entries) if cache_entries > 0 else None
    return lambda query, texts: token_maxima(embedder, query, texts, cache)
