"""Late interaction: a query and a text compared token by token (MaxSim), not as two pooled
vectors.

Each content token of the query is matched with its most similar token of the text; a
text's score is the mean of those best matches. The query's function words and punctuation
are left out (``strata.stores.lexical.content_pieces``): "what", "does" and "?" match the same
words in every text at ~0.9 and only flatten the scores (on the LoCoMo dev turns, MaxSim alone
ranks an evidence turn in the top 10 for 0.727 of the questions with content tokens, 0.702
with every token). A pooled sentence vector blurs a long turn into one direction, so
a turn that answers the question in one clause scores low against it; MaxSim keeps the clause.
The per-query-token maxima are kept (not only their mean) because the maxima of a pair of
turns are the element-wise maximum of the two turns' maxima: one encoding of every turn
scores its exchanges too.

The model is the deployment's embedder (MiniLM's contextual token vectors); an embedder
without token vectors (a remote embeddings API) disables it and recall uses the pooled
cosine.
"""

from __future__ import annotations

import base64
import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from strata.stores.ports import Embedder, QueryEmbedding

__all__ = ["MAX_PACKED_CHARS", "MAX_STORED_TOKENS", "LateScorer", "QueryBatcher", "TokenCache",
           "TokenEmbedder", "embed_queries", "late_scorer", "maxsim", "pack_tokens",
           "pooled_and_tokens", "stored_maxima", "stored_token_limit", "token_maxima",
           "unpack_tokens"]

# (query, texts) → for every text, the best similarity of each query token
LateScorer = Callable[[str, Sequence[str]], list[list[float]]]

# A memory's token vectors are stored with it (int8 per component, one float16 scale per
# token, base64) in the vector store's text field of MAX_PACKED_CHARS characters (Milvus's
# VARCHAR limit, ``strata.stores.milvus.MAX_TEXT``): at 384 components (MiniLM) a token packs
# to ~515 characters and the first 120 fit; at 768 (mpnet) one packs to ~1,027 and only 63
# fit (``stored_token_limit``), or the store refuses the whole write.
MAX_STORED_TOKENS = 120
MAX_PACKED_CHARS = 65_535
_HEADER = np.dtype("<u2")


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


def pooled_and_tokens(embedder: object, texts: Sequence[str], queries: bool = False
                      ) -> tuple[npt.NDArray[np.float32], list[npt.NDArray[np.float32]] | None]:
    """The texts' pooled vectors and token vectors (one forward pass where the embedder
    offers it; None for the token vectors of an embedder without them). ``queries``: the
    texts are queries, whose token vectors are those of their content words where the
    embedder can tell them (``JointEmbedder.encode_with_tokens``)."""
    both = getattr(embedder, "encode_with_tokens", None)
    if both is not None:
        pooled, tokens = both(list(texts), queries=queries)
        return pooled, tokens
    assert isinstance(embedder, Embedder)
    pooled = embedder.encode(list(texts))
    if isinstance(embedder, TokenEmbedder):
        return pooled, embedder.token_vectors(list(texts))
    return pooled, None


def embed_queries(embedder: object, texts: Sequence[str]) -> list[QueryEmbedding]:
    """Each query's pooled vector and content tokens' vectors (``pooled_and_tokens``)."""
    pooled, tokens = pooled_and_tokens(embedder, texts, queries=True)
    if tokens is None:
        return [QueryEmbedding(p.tolist()) for p in pooled]
    return [QueryEmbedding(p.tolist(), t) for p, t in zip(pooled, tokens, strict=True)]


class _Waiting:
    __slots__ = ("done", "error", "result", "text", "wake")

    def __init__(self, text: str) -> None:
        self.text = text
        self.wake = threading.Event()
        self.done = False
        self.result: QueryEmbedding | None = None
        self.error: BaseException | None = None


class QueryBatcher:
    """Queries that arrive together are embedded together, with no waiting window.

    The first caller embeds its query at once. Callers that arrive while a forward pass is
    running queue up; when it ends, the first of them embeds every queued query in one
    batch (up to ``max_batch``). One forward pass over 8 short queries costs less than half
    of 8 passes over one (docs/benchmarks.md), so under concurrent recalls the model's CPU
    per query falls while a lone query is not delayed."""

    def __init__(self, embed: Callable[[list[str]], list[QueryEmbedding]],
                 max_batch: int = 16) -> None:
        self._embed = embed
        self._max = max_batch
        self._lock = threading.Lock()
        self._queue: list[_Waiting] = []
        self._running = False
        self.batches = 0
        self.queries = 0

    def embed(self, text: str) -> QueryEmbedding:
        return self.embed_all([text])[0]

    def embed_all(self, texts: Sequence[str]) -> list[QueryEmbedding]:
        """Several texts of one caller, queued together (one forward pass unless the batch
        is full)."""
        if not texts:
            return []
        mine = [_Waiting(text) for text in texts]
        with self._lock:
            self._queue.extend(mine)
            lead, self._running = not self._running, True
        for i, me in enumerate(mine):  # every one, even after an error: a queued one that
            if not (lead and i == 0):  # is woken to lead must lead, or the queue stalls
                me.wake.wait()  # a result, or the turn to lead the next batch
            if not me.done:
                self._lead()
        error = next((me.error for me in mine if me.error is not None), None)
        if error is not None:
            raise error
        out = [me.result for me in mine]
        assert all(r is not None for r in out)
        return [r for r in out if r is not None]

    def _lead(self) -> None:
        with self._lock:
            batch, self._queue = self._queue[:self._max], self._queue[self._max:]
        try:
            results: list[QueryEmbedding | None] = list(self._embed([w.text for w in batch]))
            error = None
        except BaseException as exc:  # every waiter of the batch gets it
            results, error = [None] * len(batch), exc
        with self._lock:
            following = self._queue[0] if self._queue else None
            self._running = following is not None
            self.batches += 1
            self.queries += len(batch)
        for waiting, result in zip(batch, results, strict=True):
            waiting.result, waiting.error, waiting.done = result, error, True
            waiting.wake.set()
        if following is not None:
            following.wake.set()  # not done: it leads the next batch


def stored_token_limit(dim: int) -> int:
    """How many of a text's first token vectors of ``dim`` components are stored: at most
    ``MAX_STORED_TOKENS``, and no more than pack into ``MAX_PACKED_CHARS`` (a header, then
    2 + ``dim`` bytes a token, base64). Without the second bound a 768-d model's longer
    texts packed past the store's field, every write of their extraction job failed and the
    job was retried until dropped (docs/benchmarks.md, "the mpnet row, third attempt")."""
    budget = MAX_PACKED_CHARS // 4 * 3 - 2 * _HEADER.itemsize  # bytes under the base64
    return max(0, min(MAX_STORED_TOKENS, budget // (2 + dim)))


def pack_tokens(vectors: npt.NDArray[np.float32]) -> str:
    """A text's unit token vectors as a compact string: row count, per-row float16 scales,
    then int8 components (each row scaled by its largest magnitude); the first
    ``stored_token_limit`` rows, so the string fits the store's field at any dimension."""
    rows = np.asarray(vectors, dtype=np.float32)
    if rows.ndim != 2:
        return ""
    rows = rows[:stored_token_limit(rows.shape[1])]
    if not len(rows):
        return ""
    scale = np.abs(rows).max(axis=1)
    scale = np.where(scale == 0, 1.0, scale).astype(np.float32)
    quantized = np.round(rows / scale[:, None] * 127).astype(np.int8)
    blob = (np.asarray([len(rows), rows.shape[1]], dtype=_HEADER).tobytes()
            + scale.astype("<f2").tobytes() + quantized.tobytes())
    return base64.b64encode(blob).decode("ascii")


def unpack_tokens(packed: str | bytes) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]:
    """``pack_tokens``'s int8 rows and their scales (row = int8 · scale), from the string
    or from its base64-decoded bytes."""
    if not packed:
        return np.zeros((0, 0), dtype=np.int8), np.zeros(0, dtype=np.float32)
    blob = base64.b64decode(packed) if isinstance(packed, str) else packed
    n, dim = (int(x) for x in np.frombuffer(blob[:4], dtype=_HEADER))
    scale = np.frombuffer(blob[4:4 + 2 * n], dtype="<f2").astype(np.float32) / 127.0
    rows = np.frombuffer(blob[4 + 2 * n:4 + 2 * n + n * dim], dtype=np.int8).reshape(n, dim)
    return rows, scale


def stored_maxima(query: npt.NDArray[np.float32], rows: npt.NDArray[np.int8],
                  scale: npt.NDArray[np.float32]) -> list[float]:
    """For each query token, its best cosine against a stored text's token vectors."""
    if not len(rows) or not len(query):
        return [0.0] * len(query)
    sims = (query @ rows.T.astype(np.float32)) * scale[None, :]
    return [float(x) for x in sims.max(axis=1)]


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
