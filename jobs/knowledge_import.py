"""Import a folder of Markdown/text into a tenant's knowledge base.

    python -m jobs.knowledge_import --path DIR [--validate questions.yaml] [--tenant default]
    ray job submit --working-dir . -- python -m jobs.knowledge_import --path docs/

Joins the running Strata cluster (RAY_ADDRESS or auto), plans the import (chunks, dedup,
versions), embeds the new chunks with Ray Data on an actor pool, writes them as pending,
validates, and flips them active — or leaves the previous versions active and says why.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import ray
import yaml

from actors.directory import running_settings
from actors.store_owner import vector_store_for
from jobs.embedding import DEFAULT_BATCH, embed_texts
from strata.layers.knowledge import (
    ImportPlan,
    ImportReport,
    KnowledgeBase,
    PlannedChunk,
    ValidationQuestion,
    read_folder,
)
from strata.layers.knowledge_import import KnowledgeImport
from strata.settings import Settings
from strata.stores.coordination import ClusterLock
from strata.stores.embedders import make_embedder

NAMESPACE = "strata"


def run(path: Path, tenant: str, settings: Settings, validate: list[ValidationQuestion],
        actors: int, batch_size: int = DEFAULT_BATCH, actor_cpus: float | None = None
        ) -> tuple[ImportReport, set[str]]:
    """The whole import (``KnowledgeImport``, the use case the API runs too), its new chunks
    embedded on an actor pool; returns the report and the nodes the embedding ran on."""
    docs = read_folder(path)
    print(f"{len(docs)} documents from {path}", flush=True)
    probe = make_embedder(settings)
    kb = KnowledgeBase(vector_store_for(settings, probe.dim, NAMESPACE), probe.model_id)
    nodes: set[str] = set()

    def embed_chunks(chunks: Sequence[PlannedChunk]) -> list[list[float]]:
        vectors = embed_texts([c.id for c in chunks], [c.text for c in chunks], settings,
                              actors, batch_size, actor_cpus=actor_cpus)
        nodes.update(vectors.nodes)
        return [vectors[c.id] for c in chunks]

    lock = ClusterLock(settings.redis_url, settings.redis_prefix)
    try:  # the lock also keeps imports through the API out meanwhile
        report = KnowledgeImport(kb, lock, settings.knowledge_secrets).run(
            tenant, docs, embed_chunks, lambda qs: [v.tolist() for v in probe.encode(qs)],
            validate, planned=_print_plan)
    finally:
        lock.close()
    print(json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False))
    return report, nodes


def _print_plan(plan: ImportPlan) -> None:
    print(f"plan: {len(plan.add)} new chunks, {plan.unchanged} unchanged, "
          f"{len(plan.deprecate)} to deprecate, {plan.duplicates_skipped} duplicates",
          flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.knowledge_import")
    parser.add_argument("--path", required=True, type=Path)
    parser.add_argument("--tenant", default="default")
    parser.add_argument("--validate", type=Path, default=None,
                        help="YAML list of {question, expect_doc_id}")
    parser.add_argument("--actors", type=int, default=1, help="embedding actors")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH)
    args = parser.parse_args(argv)
    questions = [ValidationQuestion.model_validate(q) for q in
                 (yaml.safe_load(args.validate.read_text()) if args.validate else [])]
    if not ray.is_initialized():
        ray.init(address="auto", namespace=NAMESPACE, log_to_driver=False)
    settings = Settings(**running_settings(NAMESPACE))
    report, _ = run(args.path, args.tenant, settings, questions, args.actors, args.batch_size)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
