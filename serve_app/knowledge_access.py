"""``KnowledgeAccess``: a tenant's knowledge base as one ingress replica reaches it — the
base itself (``strata.layers.knowledge``), its in-process snapshot for recalls, and the
import use case (``strata.layers.knowledge_import``) with its chunks embedded by the
Embedder deployment."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from serve_app.clients import EmbedderClient, VectorStores
from strata.layers.knowledge import (
    DocumentIn,
    DocumentSummary,
    ImportReport,
    KnowledgeBase,
    PlannedChunk,
    ValidationQuestion,
)
from strata.layers.knowledge_import import KnowledgeImport
from strata.models import Collection, RecallRequest, Scope, SearchHit, StoredRecord
from strata.recall.assembly import LayerCandidates
from strata.recall.recipes import RecallRecipe
from strata.recall.service import RecallService
from strata.settings import Settings
from strata.stores.coordination import ClusterLock
from strata.stores.ports import QueryEmbedding
from strata.stores.snapshot import KnowledgeSnapshot

__all__ = ["EMBED_BATCH", "KnowledgeAccess"]

EMBED_BATCH = 256  # texts per call to the Embedder deployment


class KnowledgeAccess:
    """The key's tenant's documents: import, read, search, and the recall's knowledge layer.
    The base and the snapshot are built on first use (they need the embedder's model)."""

    def __init__(self, settings: Settings, vectors: VectorStores, embedder: EmbedderClient,
                 lock: ClusterLock) -> None:
        self._settings = settings
        self._vectors = vectors
        self._embedder = embedder
        self._lock = lock
        # imports block on the embedder for long: their own threads, not the shared ones
        self._import_threads = ThreadPoolExecutor(2, thread_name_prefix="knowledge-import")
        self._kb: KnowledgeBase | None = None
        self._snapshot: KnowledgeSnapshot | None = None  # the knowledge layer of recalls
        self._recall: RecallService | None = None

    async def base(self) -> KnowledgeBase:
        if self._kb is None:
            info = await self._embedder.info()
            self._kb = KnowledgeBase(await self._vectors.get(), str(info["model_id"]))
        return self._kb

    async def candidates(self, scope: Scope, body: RecallRequest, query: QueryEmbedding,
                         recipe: RecallRecipe) -> LayerCandidates:
        """The knowledge layer's candidates of a recall, from this replica's snapshot."""
        if self._recall is None:
            vectors = await self._vectors.get()
            assert self._embedder.dim is not None  # known once the store is
            self._snapshot = KnowledgeSnapshot(
                vectors, self._embedder.dim, refresh_s=self._settings.knowledge_refresh_s)
            self._recall = RecallService(self._snapshot)
        return await asyncio.to_thread(self._recall.search_knowledge, scope, body,
                                       query.vector, recipe)

    def _encode(self, texts: Sequence[str]) -> list[list[float]]:
        """Texts embedded by the Embedder deployment, ``EMBED_BATCH`` a call (blocking: the
        import runs on its own thread)."""
        vectors: list[list[float]] = []
        for start in range(0, len(texts), EMBED_BATCH):
            vectors.extend(self._embedder.encode_many(list(texts[start:start + EMBED_BATCH])))
        return vectors

    async def import_documents(self, tenant: str, documents: list[DocumentIn],
                               validate: list[ValidationQuestion]) -> ImportReport:
        """The import use case, in this replica; the snapshot is refreshed after it."""
        use_case = KnowledgeImport(await self.base(), self._lock,
                                   self._settings.knowledge_secrets)

        def embed_chunks(chunks: Sequence[PlannedChunk]) -> list[list[float]]:
            return self._encode([c.text for c in chunks])

        report = await asyncio.get_running_loop().run_in_executor(
            self._import_threads, use_case.run, tenant, documents, embed_chunks, self._encode,
            validate)
        if self._snapshot is not None:
            self._snapshot.invalidate(Scope.shared(tenant))
        return report

    async def document(self, tenant: str, doc_id: str) -> list[StoredRecord]:
        """Every chunk version of a document."""
        kb = await self.base()
        return await asyncio.to_thread(kb.document, tenant, doc_id)

    async def documents(self, tenant: str) -> list[DocumentSummary]:
        kb = await self.base()
        return await asyncio.to_thread(kb.documents, tenant)

    async def search(self, tenant: str, query: str, top_k: int) -> list[SearchHit]:
        kb = await self.base()
        vector = await self._embedder.embed(query)
        return await asyncio.to_thread(kb.search, tenant, query, vector, top_k)

    async def chunk(self, tenant: str, chunk_id: str) -> StoredRecord | None:
        """The chunk ``chunk_id`` of the tenant's base, any status (None: no such chunk)."""
        vectors = await self._vectors.get()
        found = await asyncio.to_thread(vectors.get, Collection.KNOWLEDGE,
                                        Scope.shared(tenant), [chunk_id])
        return found[0] if found else None
