"""Lexical normalisation and BM25 scoring.

``normalize`` is the one place where text becomes index terms: jieba words (Chinese) and
lower-cased words (English), English words stemmed (Snowball: "researching" and "research"
meet), stop words dropped (function words carry no evidence and, unsaturated, they inflate
every score). Milvus indexes the normalised text with a whitespace tokenizer and its BM25
function; the in-memory store scores the same terms with ``bm25_scores``. The analyzers
of milvus-lite 3.x ignore stemmer and stop filters, which is why this happens client-side.
"""

from __future__ import annotations

import functools
import logging
import math
import re
import threading
from collections import Counter
from collections.abc import Sequence

import jieba
import snowballstemmer

__all__ = ["BM25_B", "BM25_K1", "bm25_scores", "bm25_term_scores", "normalize", "tokenize"]

logger = logging.getLogger(__name__)
jieba.setLogLevel(logging.WARNING)

BM25_K1 = 1.2
BM25_B = 0.75
_WORD = re.compile(r"\w", re.UNICODE)


_LOCAL = threading.local()  # a Snowball stemmer keeps state while it stems: one per thread
_LATIN = re.compile(r"^[a-z][a-z']*$")
STOP_WORDS = frozenset(" ".join((
    "a an the and or but if then so of to in on at by for with from into about as than",
    "is are was were be been being am do does did done doing have has had having",
    "i me my mine we us our you your he him his she her it its they them their this that these",
    "those there here what which who whom whose when where why how would could should can will",
    "shall may might must just also very too not no yes oh ok okay",
    "的 了 吗 呢 吧 啊 呀 么 是 在 和 与 就 都 也 还 又",
)).split())


@functools.lru_cache(maxsize=65_536)  # a vocabulary, not texts: bounded and small
def _stem(word: str) -> str:
    stemmer = getattr(_LOCAL, "stemmer", None)
    if stemmer is None:
        stemmer = _LOCAL.stemmer = snowballstemmer.stemmer("english")
    return str(stemmer.stemWord(word))


def warm() -> None:
    """Load jieba's dictionary now (the first ``tokenize`` of a process otherwise waits
    ~1 s for it; a long-lived process calls this at start)."""
    jieba.initialize()


def tokenize(text: str) -> list[str]:
    """Index terms: jieba/lower-cased words, English stemmed, stop words and punctuation
    dropped."""
    out = []
    for tok in jieba.lcut(text):
        word = tok.strip().lower()
        if not word or not _WORD.search(word) or word in STOP_WORDS:
            continue
        out.append(_stem(word) if _LATIN.match(word) else word)
    return out


def content_pieces(pieces: Sequence[str]) -> list[bool]:
    """Which of a subword tokenizer's pieces (WordPiece: ``##`` continues a word) belong to
    a content word: not punctuation, not a stop word. A query's late-interaction tokens are
    these (``strata.recall.late``): a function word of the question matches the same word in
    every text and only dilutes MaxSim."""
    keep: list[bool] = []
    word: list[str] = []

    def close() -> None:
        text = word[0] + "".join(p[2:] for p in word[1:])
        keep.extend([bool(_WORD.search(text)) and text.lower() not in STOP_WORDS] * len(word))

    for piece in pieces:
        if piece.startswith("##") and word:
            word.append(piece)
            continue
        if word:
            close()
        word = [piece]
    if word:
        close()
    return keep


def normalize(text: str) -> str:
    """The text Milvus indexes for BM25: the terms of ``tokenize``, space-separated."""
    return " ".join(tokenize(text))


def bm25_scores(query: str, documents: Sequence[str]) -> list[float]:
    """BM25 score of ``query`` against each document, with IDF from ``documents``."""
    return bm25_term_scores(tokenize(query), [tokenize(doc) for doc in documents])


def bm25_term_scores(query_terms: Sequence[str],
                     documents: Sequence[Sequence[str]]) -> list[float]:
    """BM25 of already-normalised terms (``normalize(...).split()``) against each document's
    terms, with IDF and average length from ``documents``: what a Milvus server's BM25
    function computes, for a server without it (``strata.stores.milvus_features``)."""
    if not documents:
        return []
    lengths = [len(doc) for doc in documents]
    avg_len = (sum(lengths) / len(documents)) or 1.0
    wanted = set(query_terms)
    counts = [Counter(t for t in doc if t in wanted) for doc in documents]
    n_docs = len(documents)
    scores = [0.0] * n_docs
    for term in wanted:
        df = sum(1 for doc in counts if term in doc)
        if df == 0:
            continue
        idf = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
        for i, doc in enumerate(counts):
            tf = doc.get(term, 0)
            if tf:
                norm = tf + BM25_K1 * (1 - BM25_B + BM25_B * lengths[i] / avg_len)
                scores[i] += idf * tf * (BM25_K1 + 1) / norm
    return scores
