"""Lexical tokenization and BM25 scoring shared by the in-memory store.

Milvus's built-in BM25 (jieba tokenizer + lowercase filter) does the same job inside
milvus-lite and Milvus; this module mirrors it so the in-memory double ranks alike.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Sequence

import jieba

__all__ = ["BM25_B", "BM25_K1", "bm25_scores", "tokenize"]

logger = logging.getLogger(__name__)
jieba.setLogLevel(logging.WARNING)

BM25_K1 = 1.2
BM25_B = 0.75
_WORD = re.compile(r"\w", re.UNICODE)


def tokenize(text: str) -> list[str]:
    """Lower-cased words (English) and jieba words (Chinese), punctuation dropped."""
    return [tok.lower() for tok in jieba.lcut(text) if _WORD.search(tok)]


def bm25_scores(query: str, documents: Sequence[str]) -> list[float]:
    """BM25 score of ``query`` against each document, with IDF from ``documents``."""
    docs = [Counter(tokenize(doc)) for doc in documents]
    if not docs:
        return []
    lengths = [sum(doc.values()) for doc in docs]
    avg_len = (sum(lengths) / len(docs)) or 1.0
    n_docs = len(docs)
    scores = [0.0] * n_docs
    for term in set(tokenize(query)):
        df = sum(1 for doc in docs if term in doc)
        if df == 0:
            continue
        idf = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
        for i, doc in enumerate(docs):
            tf = doc.get(term, 0)
            if tf:
                norm = tf + BM25_K1 * (1 - BM25_B + BM25_B * lengths[i] / avg_len)
                scores[i] += idf * tf * (BM25_K1 + 1) / norm
    return scores
