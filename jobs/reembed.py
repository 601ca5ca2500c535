"""Re-embed the knowledge base with another embedding model, with no downtime.

    python -m jobs.reembed --embedder openai        # or minilm / mpnet / hash
    python -m jobs.reembed --embedder sentence-transformers --st-model-path /models/my-model
    ray job submit -- python -m jobs.reembed --embedder minilm

With milvus-lite the work runs inside the StoreOwner (the only process that may open the
file); with a Milvus server it runs here. Searches keep answering from the old collection
until the alias swaps. Restart Strata with the same STRATA_EMBEDDER afterwards so queries
are embedded by the new model.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import ray

from actors.bootstrap import vector_dim
from actors.directory import running_settings
from actors.remote import named_actor
from actors.store_owner import OWNER_NAME
from strata.runtime import open_milvus
from strata.settings import Settings
from strata.stores.reembed import ReembedReport, reembed_with

NAMESPACE = "strata"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.reembed")
    parser.add_argument("--embedder", required=True,
                        choices=["minilm", "mpnet", "hash", "openai", "sentence-transformers"])
    parser.add_argument("--st-model-path", default=None, help=(
        "with --embedder sentence-transformers: the model's local directory, as every node "
        "sees it"))
    args = parser.parse_args(argv)
    if not ray.is_initialized():
        ray.init(address="auto", namespace=NAMESPACE, log_to_driver=False)
    base = Settings(**running_settings(NAMESPACE))
    update: dict[str, object] = {"embedder": args.embedder}
    if args.st_model_path:
        update["st_model_path"] = Path(args.st_model_path)
    target = base.model_copy(update=update)
    if base.milvus_is_lite:
        owner = named_actor(OWNER_NAME, NAMESPACE)
        report = ReembedReport.model_validate(ray.get(owner.reembed.remote(target)))
    else:
        report = reembed_with(open_milvus(base, vector_dim(base)), target,
                              on_batch=lambda n: print(f"{n} chunks re-embedded", flush=True))
    print(json.dumps(report.model_dump()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
