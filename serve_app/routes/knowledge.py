"""A tenant's knowledge base over HTTP: ``/v1/knowledge/documents`` (import, admin),
``/v1/knowledge/documents/{doc_id}``, ``/v1/knowledge/search``.

An import is ``strata.layers.knowledge_import.KnowledgeImport`` — the use case the batch job
runs too — with its new chunks embedded by the Embedder deployment; the routes reach the
base through ``KnowledgeAccess`` (``serve_app.knowledge_access``), the replica's one.
"""

from __future__ import annotations

from urllib.parse import unquote

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from serve_app.guards import api_router
from serve_app.routes.deps import Caller, Knowledge
from strata.extract.pii import redact
from strata.layers.knowledge import DocumentIn, ValidationQuestion

__all__ = ["ImportRequest", "SearchRequest", "router"]

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


# Import, read and search the key's tenant's documents (``KnowledgeAccess``).
@router.post("/v1/knowledge/documents")
async def post_documents(body: ImportRequest, principal: Caller,
                         knowledge: Knowledge) -> JSONResponse:
    """(admin) Import documents: 200 with the report, or 422 when a validation question
    failed (nothing changed; the report says why)."""
    principal.require_admin()
    report = await knowledge.import_documents(principal.tenant, body.documents,
                                              body.validate_)
    return JSONResponse(status_code=200 if report.ok else 422,
                        content=report.model_dump(mode="json") | (
                            {} if report.ok else {"error": "validation_failed",
                                                  "detail": report.reason}))


@router.get("/v1/knowledge/documents/{doc_id:path}", response_model=DocumentChunks)
async def get_document(doc_id: str, principal: Caller, knowledge: Knowledge) -> DocumentChunks:
    """Every chunk version of a document; ``doc_id`` as imported, its ``/`` as such or
    encoded (``%2F``: a doc id never holds ``%``)."""
    doc_id = unquote(doc_id)
    rows = await knowledge.document(principal.tenant, doc_id)
    return DocumentChunks(doc_id=doc_id, chunks=[ChunkVersion(
        id=r.id, position=r.payload["position"], version=r.payload["version"],
        status=r.status, text=redact(r.text), embed_model=r.embed_model,
        content_hash=r.payload["content_hash"]) for r in rows])


@router.post("/v1/knowledge/search", response_model=KnowledgeHits)
async def search_knowledge(body: SearchRequest, principal: Caller,
                           knowledge: Knowledge) -> KnowledgeHits:
    hits = await knowledge.search(principal.tenant, body.query, body.top_k)
    return KnowledgeHits(results=[KnowledgeHit(
        id=h.record.id, doc_id=h.record.payload.get("doc_id"),
        doc_ids=h.record.payload.get("doc_ids"), version=h.record.payload.get("version"),
        text=redact(h.record.text), score=round(h.score, 5)) for h in hits])
