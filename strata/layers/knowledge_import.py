"""One knowledge import, whoever runs it: the HTTP route (``POST /v1/knowledge/documents``)
and the batch job (``jobs.knowledge_import``) alike.

One import of a tenant at a time in the whole cluster (a lock in Redis), then plan, embed,
write pending, validate, flip (``KnowledgeBase``). Only the embedding differs between the
two — the ingress asks the Embedder deployment, the job a Ray Data actor pool — so it comes
in as two functions; the steps and their order live here alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from strata.layers.knowledge import (
    DocumentIn,
    Embed,
    ImportPlan,
    ImportReport,
    KnowledgeBase,
    PlannedChunk,
    ValidationQuestion,
    import_lock_name,
)
from strata.stores.coordination import ClusterLock

__all__ = ["EmbedChunks", "KnowledgeImport"]

logger = logging.getLogger(__name__)

EmbedChunks = Callable[[Sequence[PlannedChunk]], Sequence[Sequence[float]]]


class KnowledgeImport:
    """Imports documents into a tenant's knowledge base, one import per tenant at a time."""

    def __init__(self, kb: KnowledgeBase, lock: ClusterLock) -> None:
        self._kb = kb
        self._lock = lock

    def run(self, tenant: str, documents: Sequence[DocumentIn], embed_chunks: EmbedChunks,
            embed_queries: Embed, validate: Sequence[ValidationQuestion] = (),
            planned: Callable[[ImportPlan], None] | None = None) -> ImportReport:
        """The whole import under the tenant's cluster-wide lock (two imports planned
        against the same versions would both add, and both deprecate, the same chunks).

        ``embed_chunks`` gets the new chunks (only when there are any), ``embed_queries``
        the validation questions; ``planned`` sees the plan before anything is embedded."""
        with self._lock.hold(import_lock_name(tenant)):
            plan = self._kb.plan(tenant, documents)
            logger.info("knowledge import of %s: %d new chunks, %d unchanged, %d to deprecate, "
                        "%d duplicates", tenant, len(plan.add), plan.unchanged,
                        len(plan.deprecate), plan.duplicates_skipped)
            if planned is not None:
                planned(plan)
            vectors = embed_chunks(plan.add) if plan.add else []
            return self._kb.commit(plan, vectors, embed_queries, validate)
