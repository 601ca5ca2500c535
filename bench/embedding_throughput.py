"""Batch-embedding throughput of the knowledge-import job against the raw model.

The job path is ``jobs.embedding.embed_texts`` exactly as ``jobs.knowledge_import`` calls it
(Ray Data ``map_batches`` over an actor pool of ``EmbedBatch``, ``Settings(embedder="minilm")``,
``actors=1``, ``batch_size=64``) on a local one-node Ray (``num_cpus=2``). The raw path is
``MiniLMEmbedder().encode`` in batches of 64 in this process, on the same texts. Both run in
the same repetition (alternating which goes first), ``--reps`` times; the report gives medians.

``embed_texts`` pays a fixed cost per call (plan the dataset, start the actor, load the model
in it, tear down): measured separately with warm-up calls on ``--overhead-texts`` texts, and
subtracted for an "overhead-adjusted" steady-state figure.

``--knobs`` also runs variants of the same ``map_batches`` call (batch size, CPUs per actor,
actor count) to see what closes the gap, and probes the torch thread count inside an actor.

    .venv/bin/python bench/embedding_throughput.py --quick      # smoke run (~1-2 min)
    .venv/bin/python bench/embedding_throughput.py --knobs      # full run (~10 min on a quiet box)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ray

from jobs.embedding import EmbedBatch, embed_texts
from strata.settings import Settings
from strata.stores.embedders import MiniLMEmbedder

RAW_BATCH = 64

_TOPICS = ("billing", "single sign-on", "the export API", "retention policies", "webhooks",
           "rate limits", "the mobile app", "audit logs", "workspace roles", "data residency",
           "invoices", "the CLI", "backups", "search indexing", "notifications")
_SENTENCES = (
    "To configure {t}, open the admin console and choose Settings, then {t}.",
    "Only workspace owners can change {t}; members see a read-only view.",
    "Changes to {t} take effect within {n} minutes and are recorded in the audit log.",
    "If {t} fails, the service retries up to {n} times with exponential back-off.",
    "The limit for {t} is {n} requests per minute per API key on the standard plan.",
    "Enterprise customers can request a custom configuration of {t} from support.",
    "Note that {t} is not available in the EU region before version {n}.2.",
    "For troubleshooting {t}, collect the request id from the response headers.",
    "Deleting a project also removes its {t} after a grace period of {n} days.",
    "The dashboard shows the status of {t} with a green, amber or red badge.",
    "Use the filter bar to narrow {t} by date, owner, or tag before exporting.",
    "Administrators receive an email when {t} changes or when a quota reaches {n}%.",
)


def make_texts(n: int, seed: int = 7) -> list[str]:
    """Knowledge-base-like chunks of 300-500 characters (product-docs prose)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        target = rng.randint(300, 500)
        topic = rng.choice(_TOPICS)
        parts = [f"Section {i}: {topic}."]
        while len(" ".join(parts)) < target:
            t = topic if rng.random() < 0.6 else rng.choice(_TOPICS)
            parts.append(rng.choice(_SENTENCES).format(t=t, n=rng.randint(2, 90)))
        out.append(" ".join(parts)[:target])
    return out


def run_job(texts: list[str], settings: Settings) -> float:
    ids = [f"c{i}" for i in range(len(texts))]
    started = time.perf_counter()
    vectors = embed_texts(ids, texts, settings, actors=1, progress=False)
    elapsed = time.perf_counter() - started
    assert len(vectors) == len(texts)
    return elapsed


def run_variant(texts: list[str], settings: Settings, batch_size: int, actors: int,
                num_cpus: float) -> float:
    """The same pipeline as ``embed_texts`` with explicit knobs (same output handling)."""
    started = time.perf_counter()
    ds = ray.data.from_items([{"id": f"c{i}", "text": t} for i, t in enumerate(texts)])
    out = ds.map_batches(EmbedBatch, fn_constructor_kwargs={"settings": settings.model_dump(
        mode="json")}, batch_size=batch_size, concurrency=actors, batch_format="numpy",
        num_cpus=num_cpus)
    vectors = {str(row["id"]): [float(x) for x in row["vector"]] for row in out.iter_rows()}
    elapsed = time.perf_counter() - started
    assert len(vectors) == len(texts)
    return elapsed


def run_raw(model: MiniLMEmbedder, texts: list[str]) -> float:
    started = time.perf_counter()
    rows = 0
    for i in range(0, len(texts), RAW_BATCH):
        rows += len(model.encode(texts[i:i + RAW_BATCH]))
    elapsed = time.perf_counter() - started
    assert rows == len(texts)
    return elapsed


@ray.remote
class _ThreadProbe:
    """A fresh actor process, like the pool's: what thread count does torch get there?"""

    def threads(self) -> dict[str, Any]:
        import torch
        return {"torch_threads": torch.get_num_threads(),
                "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")}


def load_avg() -> float:
    return round(os.getloadavg()[0], 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="300 texts, 1 rep, no knobs")
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--overhead-texts", type=int, default=64)
    parser.add_argument("--knobs", action="store_true", help="also try batch/CPU/actor knobs")
    parser.add_argument("--knob-texts", type=int, default=1000)
    parser.add_argument("--knob-reps", type=int, default=2)
    parser.add_argument("--variants", type=str, default="0,1,2,3,4",
                        help="which knob variants to run (indices)")
    parser.add_argument("--skip-main", action="store_true", help="knobs only")
    parser.add_argument("--json", type=str, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.texts, args.reps, args.knob_texts, args.knob_reps = 300, 1, 300, 1

    texts = make_texts(args.texts)
    lens = [len(t) for t in texts]
    settings = Settings(embedder="minilm")
    temp = tempfile.mkdtemp(prefix="rbemb_", dir="/tmp")
    result: dict[str, Any] = {
        "texts": args.texts, "reps": args.reps, "chars_median": statistics.median(lens),
        "python": platform.python_version(), "ray": ray.__version__, "cpus": os.cpu_count(),
        "load_avg_start": load_avg()}
    print(json.dumps(result), flush=True)
    try:
        ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=temp,
                 log_to_driver=False, configure_logging=False)
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False

        # Fixed per-call cost of the job: plan + actor start + model load + teardown.
        small = texts[:args.overhead_texts]
        overhead = [run_job(small, settings) for _ in range(2)]
        result["overhead_first_call_s"] = round(overhead[0], 2)
        result["overhead_warm_call_s"] = round(overhead[1], 2)
        print(f"overhead: first {overhead[0]:.1f}s, warm {result['overhead_warm_call_s']}s "
              f"({args.overhead_texts} texts)", flush=True)

        probe = {}
        for cpus in (1, 2):
            actor = _ThreadProbe.options(num_cpus=cpus).remote()  # type: ignore[attr-defined]
            probe[str(cpus)] = ray.get(actor.threads.remote())
            ray.kill(actor)
        result["actor_threads"] = probe
        t0 = time.perf_counter()
        raw_model = MiniLMEmbedder()
        result["raw_model_load_s"] = round(time.perf_counter() - t0, 2)
        raw_model.encode(texts[:RAW_BATCH])  # warm-up
        import torch
        result["driver_torch_threads"] = torch.get_num_threads()
        print(f"threads: driver {torch.get_num_threads()}, actors {probe}", flush=True)

        reps = []
        for rep in range(0 if args.skip_main else args.reps):
            order = ("job", "raw") if rep % 2 == 0 else ("raw", "job")
            times: dict[str, float] = {}
            for what in order:
                times[what] = (run_job(texts, settings) if what == "job"
                               else run_raw(raw_model, texts))
            row = {"rep": rep + 1, "order": "/".join(order), "load": load_avg(),
                   "job_s": round(times["job"], 2), "raw_s": round(times["raw"], 2),
                   "job_per_s": round(args.texts / times["job"], 1),
                   "raw_per_s": round(args.texts / times["raw"], 1),
                   "ratio": round(times["raw"] / times["job"], 3),
                   "ratio_adj": round(times["raw"] / max(1e-9, times["job"]
                                                         - result["overhead_warm_call_s"]), 3)}
            reps.append(row)
            print(json.dumps(row), flush=True)
        result["reps_detail"] = reps
        if reps:
            med = {k: statistics.median(r[k] for r in reps)
                   for k in ("job_per_s", "raw_per_s", "ratio", "ratio_adj", "job_s", "raw_s")}
            result["median"] = med
            print("median:", json.dumps(med), flush=True)

        if args.knobs:
            ktexts = texts[:args.knob_texts]
            variants = [  # (label, batch_size, actors, num_cpus per actor)
                ("job default: bs 64, 1 actor, 1 CPU", 64, 1, 1.0),
                ("bs 256, 1 actor, 1 CPU", 256, 1, 1.0),
                ("bs 64, 1 actor, 2 CPUs", 64, 1, 2.0),
                ("bs 256, 1 actor, 2 CPUs", 256, 1, 2.0),
                ("bs 64, 2 actors, 1 CPU each", 64, 2, 1.0),
            ]
            knob_rows = []
            chosen = {int(i) for i in args.variants.split(",")}
            for index, (label, bs, actors, cpus) in enumerate(variants):
                if index not in chosen:
                    continue
                vt, rt = [], []
                for _ in range(args.knob_reps):
                    vt.append(run_variant(ktexts, settings, bs, actors, cpus))
                    rt.append(run_raw(raw_model, ktexts))
                v, r = statistics.median(vt), statistics.median(rt)
                row = {"variant": label, "texts": len(ktexts), "load": load_avg(),
                       "job_per_s": round(len(ktexts) / v, 1),
                       "raw_per_s": round(len(ktexts) / r, 1), "ratio": round(r / v, 3),
                       "ratio_adj": round(r / max(1e-9, v - result["overhead_warm_call_s"]),
                                          3)}
                knob_rows.append(row)
                print(json.dumps(row), flush=True)
            result["knobs"] = knob_rows
        result["load_avg_end"] = load_avg()
    finally:
        if ray.is_initialized():
            ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
