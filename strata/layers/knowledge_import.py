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
from typing import Literal

from strata.errors import InvalidInput
from strata.extract.pii import find_secrets, mask_secrets
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

__all__ = ["EmbedChunks", "KnowledgeImport", "screened"]

logger = logging.getLogger(__name__)

EmbedChunks = Callable[[Sequence[PlannedChunk]], Sequence[Sequence[float]]]


SecretPolicy = Literal["mask", "refuse"]


def _fields(doc: DocumentIn) -> list[str]:
    return [doc.title, doc.text, *(str(v) for v in doc.metadata.values()),
            *(str(k) for k in doc.metadata)]


def screened(documents: Sequence[DocumentIn], policy: SecretPolicy) -> list[DocumentIn]:
    """The documents as the knowledge base may hold them: every agent key of the tenant
    reads a document, so a credential or a card or ID number in one is masked
    (``[REDACTED:<kind>]``) or, with ``policy`` "refuse", the whole import is refused
    before anything is written. Phone numbers and addresses stay: a support line or an
    office address is what a document is for."""
    holding = [d.doc_id for d in documents if any(find_secrets(f) for f in _fields(d) if f)]
    if not holding:
        return list(documents)
    if policy == "refuse":
        raise InvalidInput(f"documents {holding[:10]} hold what looks like a credential or a "
                           "card or ID number; mask it, or set STRATA_KNOWLEDGE_SECRETS=mask")
    logger.warning("knowledge import: masked secrets in %d documents", len(holding))
    return [d.model_copy(update={
        "title": mask_secrets(d.title), "text": mask_secrets(d.text),
        "metadata": {mask_secrets(str(k)): mask_secrets(v) if isinstance(v, str) else v
                     for k, v in d.metadata.items()}}) if d.doc_id in holding else d
        for d in documents]


class KnowledgeImport:
    """Imports documents into a tenant's knowledge base, one import per tenant at a time;
    ``secrets``: what a document holding a secret gets (``screened``)."""

    def __init__(self, kb: KnowledgeBase, lock: ClusterLock,
                 secrets: SecretPolicy = "mask") -> None:
        self._kb = kb
        self._lock = lock
        self._secrets = secrets

    def run(self, tenant: str, documents: Sequence[DocumentIn], embed_chunks: EmbedChunks,
            embed_queries: Embed, validate: Sequence[ValidationQuestion] = (),
            planned: Callable[[ImportPlan], None] | None = None) -> ImportReport:
        """The whole import under the tenant's cluster-wide lock (two imports planned
        against the same versions would both add, and both deprecate, the same chunks).

        ``embed_chunks`` gets the new chunks (only when there are any), ``embed_queries``
        the validation questions; ``planned`` sees the plan before anything is embedded."""
        documents = screened(documents, self._secrets)
        with self._lock.hold(import_lock_name(tenant)):
            plan = self._kb.plan(tenant, documents)
            logger.info("knowledge import of %s: %d new chunks, %d unchanged, %d to deprecate, "
                        "%d duplicates", tenant, len(plan.add), plan.unchanged,
                        len(plan.deprecate), plan.duplicates_skipped)
            if planned is not None:
                planned(plan)
            vectors = embed_chunks(plan.add) if plan.add else []
            return self._kb.commit(plan, vectors, embed_queries, validate)
