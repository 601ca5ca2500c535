"""Fixtures of the unit tests: one shard over the in-memory vector store (a module that
needs another shard defines its own ``shard``)."""

from __future__ import annotations

import pytest

from strata.layers.memories import LongTermMemory
from strata.layers.summarize import RuleSummarizer
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.redis import RedisStore
from strata.testing.fake_vectors import FakeVectorStore


@pytest.fixture
def vectors() -> FakeVectorStore:
    store = FakeVectorStore()
    store.ensure_collections(64)
    return store


@pytest.fixture
def shard(redis_store: RedisStore, vectors: FakeVectorStore) -> SessionShardService:
    """A shard with the rule summarizer, its long-term memory on ``vectors`` and a 64-d
    hash embedder."""
    lt = LongTermMemory(vectors, HashEmbedder(64))
    return SessionShardService(0, Settings(), redis_store, RuleSummarizer(), longterm=lambda: lt)
