"""The knowledge base: chunking, dedup, versioned imports with validation, search.

Chunks are 300–500 characters along paragraphs and sentences (Chinese and English
punctuation) with overlap. Versions are kept per (doc_id, position) and content hash:
unchanged chunks are untouched; a changed chunk gets a new version and the old one becomes
``deprecated`` (kept for audit); removed positions become deprecated. New chunks are
``pending`` until the whole import (and its validation) succeeds, then flipped to ``active``.
A failed validation deletes the pending chunks and leaves the previous versions active.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from strata.errors import InvalidInput, NotFound
from strata.models import (
    Collection,
    MemoryStatus,
    RecordFilter,
    Scope,
    SearchHit,
    StoredRecord,
    check_id,
    utcnow,
)
from strata.stores.ports import VectorStore

__all__ = ["DocumentIn", "DocumentSummary", "Embed", "ImportPlan", "ImportReport",
           "KnowledgeBase", "PlannedChunk", "ValidationQuestion", "chunk_text", "collapse_hits",
           "content_hash", "import_lock_name", "read_folder"]

logger = logging.getLogger(__name__)
CHUNK_MIN, CHUNK_MAX, OVERLAP = 300, 500, 60
NEAR_DUP_JACCARD = 0.9
_SENTENCE_END = re.compile(r"(?<=[。！？!?；;])|(?<=[.])\s+")

Embed = Callable[[list[str]], list[list[float]]]


class DocumentIn(BaseModel):
    doc_id: str = Field(min_length=1, max_length=300)
    title: str = ""
    text: str = Field(min_length=1, max_length=2_000_000)
    metadata: dict[str, Any] = Field(default_factory=dict)


class ValidationQuestion(BaseModel):
    question: str = Field(min_length=1)
    expect_doc_id: str


def import_lock_name(tenant: str) -> str:
    """The cluster-wide lock one tenant's imports take (API and job alike): two imports
    planned against the same versions would both add, and both deprecate, the same chunks."""
    return f"knowledge-import:{tenant}"


def read_folder(path: Path) -> list[DocumentIn]:
    """Markdown and text files below ``path``; the doc_id is the relative path sans suffix."""
    docs = []
    for file in sorted(Path(path).rglob("*")):
        if file.suffix.lower() in (".md", ".markdown", ".txt") and file.is_file():
            text = file.read_text(encoding="utf-8")
            if text.strip():
                doc_id = str(file.relative_to(path).with_suffix("")).replace("\\", "/")
                docs.append(DocumentIn(doc_id=doc_id, title=file.stem, text=text))
    return docs


def _check_doc_id(doc_id: str) -> None:
    """A document id is an id whose parts may be separated by ``/`` (a path)."""
    try:
        check_id("doc_id", doc_id.replace("/", "-"))
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


def content_hash(text: str) -> str:
    return hashlib.sha256(re.sub(r"\s+", " ", text.strip()).encode()).hexdigest()[:32]


def _sentences(paragraph: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(paragraph) if s and s.strip()]


def chunk_text(text: str, min_chars: int = CHUNK_MIN, max_chars: int = CHUNK_MAX,
               overlap: int = OVERLAP) -> list[str]:
    """Pack sentences into chunks of ≤ max_chars, starting a new chunk at paragraph breaks
    once the current one has min_chars; each chunk repeats the previous one's last sentence
    (if it is ≤ overlap characters) for context. Overlong sentences are split hard."""
    chunks: list[str] = []
    current = ""
    for paragraph in re.split(r"\n\s*\n", text):
        if current and len(current) >= min_chars:
            chunks.append(current)
            current = _tail(current, overlap)
        for sentence in _sentences(paragraph):
            while len(sentence) > max_chars:
                head, sentence = sentence[:max_chars], sentence[max_chars:]
                if current:
                    chunks.append(current)
                chunks.append(head)
                current = ""
            joiner = "" if not current or re.search(r"[\u4e00-\u9fff]$", current) else " "
            if len(current) + len(joiner) + len(sentence) > max_chars and current:
                chunks.append(current)
                current = _tail(current, overlap)
                joiner = " " if current else ""
            current = f"{current}{joiner}{sentence}"
    if current.strip():
        chunks.append(current)
    return [c.strip() for c in chunks if c.strip()]


def _tail(chunk: str, overlap: int) -> str:
    last = _sentences(chunk)[-1] if _sentences(chunk) else ""
    return last if 0 < len(last) <= overlap else ""


def collapse_hits(hits: Sequence[SearchHit]) -> list[SearchHit]:
    """One hit per chunk text (case and whitespace aside), the best scored, best first; its
    payload's ``doc_ids`` lists every document that holds the text."""
    best: dict[str, SearchHit] = {}
    for hit in sorted(hits, key=lambda h: h.score, reverse=True):
        key = " ".join(hit.record.text.lower().split())
        doc_id = str(hit.record.payload.get("doc_id", ""))
        if key not in best:
            record = hit.record.model_copy(update={"payload": {
                **hit.record.payload, "doc_ids": [doc_id]}})
            best[key] = hit.model_copy(update={"record": record})
        elif doc_id not in best[key].record.payload["doc_ids"]:
            best[key].record.payload["doc_ids"].append(doc_id)
    return list(best.values())


def _shingles(text: str, n: int = 5) -> set[str]:
    flat = re.sub(r"\s+", " ", text.lower())
    return {flat[i:i + n] for i in range(max(1, len(flat) - n + 1))}


class PlannedChunk(BaseModel):
    id: str
    doc_id: str
    position: int
    version: int
    title: str
    text: str
    content_hash: str
    metadata: dict[str, Any] = Field(default_factory=dict)


class ImportPlan(BaseModel):
    """What an import will change, decided before any write."""

    tenant: str
    add: list[PlannedChunk] = Field(default_factory=list)
    deprecate: list[str] = Field(default_factory=list)
    unchanged: int = 0
    duplicates_skipped: int = 0


class ImportReport(BaseModel):
    ok: bool
    added: int = 0
    deprecated: int = 0
    unchanged: int = 0
    duplicates_skipped: int = 0
    validation: list[dict[str, Any]] = Field(default_factory=list)
    reason: str | None = None


class DocumentSummary(BaseModel):
    """One document of a tenant's knowledge base: its versions and chunk statuses."""

    doc_id: str
    title: str = ""
    latest_version: int
    versions: list[int]
    chunks: dict[str, int] = Field(description="chunk count per status")
    updated_at: float
    embed_models: list[str]


class KnowledgeBase:
    """Versioned documents of each tenant (its shared scope)."""

    def __init__(self, vectors: VectorStore, embed_model: str) -> None:
        self._vectors = vectors
        self._embed_model = embed_model

    def _current(self, scope: Scope, doc_id: str) -> list[StoredRecord]:
        return self._vectors.query(Collection.KNOWLEDGE, scope, RecordFilter(
            statuses=[MemoryStatus.ACTIVE], payload_equals={"doc_id": doc_id}), 10_000)

    def plan(self, tenant: str, documents: Sequence[DocumentIn]) -> ImportPlan:
        scope = Scope.shared(tenant)
        plan = ImportPlan(tenant=tenant)
        seen_hashes: set[str] = set()
        seen_shingles: list[set[str]] = []
        for doc in documents:
            _check_doc_id(doc.doc_id)
            current = {int(r.payload["position"]): r for r in self._current(scope, doc.doc_id)}
            chunks = chunk_text(doc.text)
            for position, text in enumerate(chunks):
                digest = content_hash(text)
                old = current.get(position)
                if old is not None and old.payload.get("content_hash") == digest:
                    plan.unchanged += 1
                    seen_hashes.add(digest)
                    continue
                shingles = _shingles(text)
                if digest in seen_hashes or any(
                        len(shingles & s) / max(1, len(shingles | s)) >= NEAR_DUP_JACCARD
                        for s in seen_shingles):
                    plan.duplicates_skipped += 1
                    if old is not None:
                        plan.deprecate.append(old.id)
                    continue
                seen_hashes.add(digest)
                seen_shingles.append(shingles)
                version = int(old.payload["version"]) + 1 if old is not None else 1
                plan.add.append(PlannedChunk(
                    id=f"{doc.doc_id}#{position}@v{version}-{digest[:8]}", doc_id=doc.doc_id,
                    position=position, version=version, title=doc.title, text=text,
                    content_hash=digest, metadata=doc.metadata))
                if old is not None:
                    plan.deprecate.append(old.id)
            plan.deprecate.extend(r.id for p, r in current.items() if p >= len(chunks))
        return plan

    def commit(self, plan: ImportPlan, vectors: Sequence[Sequence[float]], embed_query: Embed,
               validate: Sequence[ValidationQuestion] = ()) -> ImportReport:
        """Write pending chunks, validate, then flip (or roll back on a failed validation)."""
        scope = Scope.shared(plan.tenant)
        now = utcnow().timestamp()
        records = [StoredRecord(
            id=c.id, text=c.text, vector=list(v), status=MemoryStatus.PENDING, created_at=now,
            updated_at=now, confidence=1.0, embed_model=self._embed_model,
            payload={"doc_id": c.doc_id, "position": c.position, "version": c.version,
                     "title": c.title, "content_hash": c.content_hash, "metadata": c.metadata})
            for c, v in zip(plan.add, vectors, strict=True)]
        if records:
            self._vectors.upsert(Collection.KNOWLEDGE, scope, records)
        self._vectors.flush(Collection.KNOWLEDGE)
        results = self._validate(scope, plan, embed_query, validate)
        failed = [r for r in results if not r["passed"]]
        if failed:
            self._vectors.delete(Collection.KNOWLEDGE, scope, [r.id for r in records])
            self._vectors.flush(Collection.KNOWLEDGE)
            return ImportReport(ok=False, validation=results, reason=(
                f"{len(failed)} validation question(s) failed; the previous versions stay "
                f"active: " + "; ".join(f"{r['question']!r} expected {r['expect_doc_id']}, "
                                        f"got {r['top_doc_ids']}" for r in failed)))
        self._set_status(scope, [r.id for r in records], MemoryStatus.ACTIVE)
        self._set_status(scope, plan.deprecate, MemoryStatus.DEPRECATED)
        self._vectors.flush(Collection.KNOWLEDGE)
        return ImportReport(ok=True, added=len(records), deprecated=len(plan.deprecate),
                            unchanged=plan.unchanged, duplicates_skipped=plan.duplicates_skipped,
                            validation=results)

    def _validate(self, scope: Scope, plan: ImportPlan, embed_query: Embed,
                  questions: Sequence[ValidationQuestion]) -> list[dict[str, Any]]:
        if not questions:
            return []
        leaving = set(plan.deprecate)
        vecs = embed_query([q.question for q in questions])
        results = []
        for q, vec in zip(questions, vecs, strict=True):
            hits = self._vectors.search_hybrid(Collection.KNOWLEDGE, scope, vec, q.question, 10,
                                               RecordFilter(statuses=[MemoryStatus.ACTIVE,
                                                                      MemoryStatus.PENDING]))
            docs = [h.record.payload.get("doc_id") for h in hits if h.record.id not in leaving]
            top = list(dict.fromkeys(docs))[:3]
            results.append({"question": q.question, "expect_doc_id": q.expect_doc_id,
                            "top_doc_ids": top, "passed": q.expect_doc_id in top})
        return results

    def _set_status(self, scope: Scope, ids: list[str], status: MemoryStatus) -> None:
        for start in range(0, len(ids), 500):
            rows = self._vectors.get(Collection.KNOWLEDGE, scope, ids[start:start + 500])
            for row in rows:
                row.status = status
                row.updated_at = utcnow().timestamp()
            if rows:
                self._vectors.upsert(Collection.KNOWLEDGE, scope, rows)

    def search(self, tenant: str, query: str, vector: Sequence[float], top_k: int
               ) -> list[SearchHit]:
        """Active chunks only, each text once: a chunk imported under several documents is
        the best-scored copy, its payload's ``doc_ids`` naming every document holding it."""
        active = RecordFilter(statuses=[MemoryStatus.ACTIVE])
        hits = self._vectors.search_hybrid(Collection.KNOWLEDGE, Scope.shared(tenant), vector,
                                           query, top_k * 2, active)
        return collapse_hits(hits)[:top_k]

    def documents(self, tenant: str, limit: int = 10_000) -> list[DocumentSummary]:
        """Every document of a tenant (all versions and statuses), by doc_id."""
        rows = self._vectors.query(Collection.KNOWLEDGE, Scope.shared(tenant), None, limit)
        by_doc: dict[str, list[StoredRecord]] = {}
        for row in rows:
            by_doc.setdefault(str(row.payload["doc_id"]), []).append(row)
        summaries = []
        for doc_id, chunks in sorted(by_doc.items()):
            versions = sorted({int(c.payload["version"]) for c in chunks})
            statuses: dict[str, int] = {}
            for c in chunks:
                statuses[c.status] = statuses.get(c.status, 0) + 1
            newest = max(chunks, key=lambda c: c.updated_at)
            summaries.append(DocumentSummary(
                doc_id=doc_id, title=str(newest.payload.get("title") or ""),
                latest_version=versions[-1], versions=versions, chunks=statuses,
                updated_at=newest.updated_at,
                embed_models=sorted({c.embed_model for c in chunks})))
        return summaries

    def document(self, tenant: str, doc_id: str) -> list[StoredRecord]:
        """Every chunk of a document, all versions and statuses, by position then version."""
        _check_doc_id(doc_id)
        rows = self._vectors.query(Collection.KNOWLEDGE, Scope.shared(tenant),
                                   RecordFilter(payload_equals={"doc_id": doc_id}), 10_000)
        if not rows:
            raise NotFound(f"no document {doc_id!r}")
        return sorted(rows, key=lambda r: (r.payload["position"], r.payload["version"]))
