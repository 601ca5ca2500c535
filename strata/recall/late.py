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

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["LateScorer", "TokenEmbedder", "late_scorer", "maxsim", "token_maxima"]

# (query, texts) → for every text, the best similarity of each query token
LateScorer = Callable[[str, Sequence[str]], list[list[float]]]


@runtime_checkable
class TokenEmbedder(Protocol):
    """An embedder that can return one unit vector per token of a text."""

    def token_vectors(self, texts: Sequence[str]) -> list[npt.NDArray[np.float32]]: ...


def token_maxima(embedder: TokenEmbedder, query: str, texts: Sequence[str]
                 ) -> list[list[float]]:
    """For every text, the best cosine of each query token against the text's tokens."""
    if not texts:
        return []
    q, *docs = embedder.token_vectors([query, *texts])
    return [(q @ d.T).max(axis=1).tolist() if len(d) and len(q) else [0.0] * len(q)
            for d in docs]


def maxsim(*maxima: Sequence[float]) -> float:
    """The MaxSim score of one text, or of several texts read as one (their union)."""
    best = np.max(np.asarray(maxima, dtype=np.float32), axis=0)
    return float(best.mean()) if best.size else 0.0


def late_scorer(embedder: object) -> LateScorer | None:
    """A scorer over ``embedder``'s token vectors, or None if it has none."""
    if not isinstance(embedder, TokenEmbedder):
        return None
    return lambda query, texts: token_maxima(embedder, query, texts)
