"""A user's corrections of knowledge-base chunks: when a user explicitly corrects (or gives
feedback on) a chunk, that goes into the user's long-term memory and changes how the chunk is
presented to that user from then on.

A correction is that user's fact, keyed by the chunk it corrects (``knowledge.correction:<chunk
id>``; a second correction of the same chunk supersedes the first, with history, like any
fact). The knowledge base itself never changes: when a later recall of that user puts the
chunk in the context, the correction is shown right under it, and only to that user. A new
version of the document has new chunk ids, so an old correction no longer attaches (it stays
the user's memory, listed and deletable like any other).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from strata.layers.memory_models import MemoryCreate
from strata.models import (
    Collection,
    MemoryKind,
    MemoryStatus,
    RecordFilter,
    Scope,
    Source,
    StoredRecord,
    check_name,
)
from strata.stores.ports import VectorStore

__all__ = ["PREFIX", "CorrectionIn", "correction_create", "corrections_of"]

PREFIX = "knowledge.correction:"  # the key of a correction fact: this, then the chunk id
_MOST = 2000  # active facts read per recall that routes knowledge (the hot index's, in memory)


class CorrectionIn(BaseModel):
    """Body of ``POST /v1/users/{user_id}/knowledge/corrections``."""

    model_config = ConfigDict(extra="forbid")

    chunk_id: str = Field(description="the knowledge item's id, as a recall returned it")
    text: str = Field(min_length=1, max_length=2000, description="what the user says instead")

    @field_validator("chunk_id")
    @classmethod
    def _chunk_id(cls, value: str) -> str:
        return check_name("chunk_id", value)


def correction_create(chunk: StoredRecord, text: str, session_id: str | None = None
                      ) -> MemoryCreate:
    """The fact that records ``text`` as this user's correction of ``chunk``."""
    doc_id = str(chunk.payload.get("doc_id") or "?")
    return MemoryCreate(kind=MemoryKind.FACT, key=f"{PREFIX}{chunk.id}", value=text,
                        text=f"Correction to {doc_id}: {text}", source=Source.USER_STATED,
                        session_id=session_id)


def corrections_of(vectors: VectorStore, scope: Scope) -> dict[str, StoredRecord]:
    """The user's active corrections, by the chunk id each corrects."""
    rows = vectors.query(Collection.FACTS, scope,
                         RecordFilter(statuses=[MemoryStatus.ACTIVE]), _MOST)
    return {key[len(PREFIX):]: r for r in rows
            if (key := str(r.payload.get("key") or "")).startswith(PREFIX)
            and float(r.payload.get("weight", 1.0)) > 0}
