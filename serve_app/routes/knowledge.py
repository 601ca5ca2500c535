"""A tenant's knowledge base over HTTP: ``/v1/knowledge/documents`` (import, admin),
``/v1/knowledge/documents/{doc_id}``, ``/v1/knowledge/search``.

An import is ``strata.layers.knowledge_import.KnowledgeImport`` — the use case the batch job
runs too — with its new chunks embedded by the Embedder deployment.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from urllib.parse import unquote

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from actors.boundary import strata_errors
from actors.shared_embedder import embedder_unavailable
from serve_app.guards import api_router
from serve_app.routes.base import IngressState
from serve_app.routes.deps import Caller
from strata.extract.pii import redact
from strata.layers.knowledge import (
    DocumentIn,
    ImportReport,
    PlannedChunk,
    ValidationQuestion,
)
from strata.layers.knowledge_import import KnowledgeImport
from strata.models import Scope

__all__ = ["EMBED_BATCH", "ImportRequest", "KnowledgeRoutes", "SearchRequest", "router"]

EMBED_BATCH = 256  # texts per call to the Embedder deployment

router = api_router()


class ImportRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    documents: list[DocumentIn] = Field(min_length=1, max_length=1000)
    validate_: list[ValidationQuestion] = Field(default_factory=list, alias="validate")


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=4000)
    top_k: int = Field(default=5, ge=1, le=50)


class ChunkVersion(BaseModel):
    """One chunk of a document, in one version."""

    id: str
    position: int
    version: int
    status: str
    text: str
    embed_model: str
    content_hash: str


class DocumentChunks(BaseModel):
    doc_id: str
    chunks: list[ChunkVersion]


class KnowledgeHit(BaseModel):
    """A current chunk that matched, once per text; ``doc_ids``: every document holding it."""

    id: str
    doc_id: str | None
    doc_ids: list[str] | None
    version: int | None
    text: str
    score: float


class KnowledgeHits(BaseModel):
    results: list[KnowledgeHit]


class KnowledgeRoutes(IngressState):
    """Import, read and search the key's tenant's documents."""

    def _encode(self, texts: Sequence[str]) -> list[list[float]]:
        """Texts embedded by the Embedder deployment, ``EMBED_BATCH`` a call (blocking: the
        import runs on its own thread)."""
        vectors: list[list[float]] = []
        for start in range(0, len(texts), EMBED_BATCH):
            with strata_errors(embedder_unavailable):
                vectors.extend(self._embedder.encode_many.remote(
                    list(texts[start:start + EMBED_BATCH])).result())
        return vectors

    async def import_knowledge(self, tenant: str, documents: list[DocumentIn],
                               validate: list[ValidationQuestion]) -> ImportReport:
        """The import use case, in this replica (also called through the app handle by
        ``strata serve`` for the demo knowledge)."""
        use_case = KnowledgeImport(await self._knowledge(), self._cluster_lock,
                                   self._settings.knowledge_secrets)

        def embed_chunks(chunks: Sequence[PlannedChunk]) -> list[list[float]]:
            return self._encode([c.text for c in chunks])

        report = await asyncio.get_running_loop().run_in_executor(
            self._import_threads, use_case.run, tenant, documents, embed_chunks, self._encode,
            validate)
        if self._kb_snapshot is not None:
            self._kb_snapshot.invalidate(Scope.shared(tenant))
        return report

    @router.post("/v1/knowledge/documents")
    async def post_documents(self, body: ImportRequest, principal: Caller) -> JSONResponse:
        """(admin) Import documents: 200 with the report, or 422 when a validation question
        failed (nothing changed; the report says why)."""
        principal.require_admin()
        report = await self.import_knowledge(principal.tenant, body.documents, body.validate_)
        return JSONResponse(status_code=200 if report.ok else 422,
                            content=report.model_dump(mode="json") | (
                                {} if report.ok else {"error": "validation_failed",
                                                      "detail": report.reason}))

    @router.get("/v1/knowledge/documents/{doc_id:path}", response_model=DocumentChunks)
    async def get_document(self, doc_id: str, principal: Caller) -> DocumentChunks:
        """Every chunk version of a document; ``doc_id`` as imported, its ``/`` as such or
        encoded (``%2F``: a doc id never holds ``%``)."""
        doc_id = unquote(doc_id)
        kb = await self._knowledge()
        rows = await asyncio.to_thread(kb.document, principal.tenant, doc_id)
        return DocumentChunks(doc_id=doc_id, chunks=[ChunkVersion(
            id=r.id, position=r.payload["position"], version=r.payload["version"],
            status=r.status, text=redact(r.text), embed_model=r.embed_model,
            content_hash=r.payload["content_hash"]) for r in rows])

    @router.post("/v1/knowledge/search", response_model=KnowledgeHits)
    async def search_knowledge(self, body: SearchRequest, principal: Caller) -> KnowledgeHits:
        kb = await self._knowledge()
        vector = await self._embed(body.query)
        hits = await asyncio.to_thread(kb.search, principal.tenant, body.query, vector,
                                       body.top_k)
        return KnowledgeHits(results=[KnowledgeHit(
            id=h.record.id, doc_id=h.record.payload.get("doc_id"),
            doc_ids=h.record.payload.get("doc_ids"), version=h.record.payload.get("version"),
            text=redact(h.record.text), score=round(h.score, 5)) for h in hits])
