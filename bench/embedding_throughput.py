"""Batch-embedding throughput of the knowledge-import job against the raw model.

The job path is ``jobs.embedding.embed_texts`` exactly as ``jobs.knowledge_import`` calls it
(Ray Data ``map_batches`` over an actor pool of ``EmbedBatch``, ``Settings(embedder="minilm")``,
``actors=1``, the pool shaped by ``pool_shape``) on a local one-node Ray (all the machine's
CPUs). The raw path is ``MiniLMEmbedder().encode`` in this process on the same texts, sliced
in the same batch size. Both run in the same repetition (alternating which goes first),
``--reps`` times; the report gives medians of two ratios:

* ``steady``: model load excluded from both. Raw: the encode loop on a loaded (and warmed)
  model. Job: from the moment the pool's model is loaded (``EmbedBatch`` records it) until
  the last vector is in the driver's dict, so Ray Data's scheduling, serialisation and the
  conversion to Python lists are all counted against the job.
* ``end-to-end``: model load included in both. Raw: ``MiniLMEmbedder()`` + encode. Job: the
  whole ``embed_texts`` call (plan, start the actor process, load torch and the model in it,
  embed, tear down).

Ray starts its worker processes at ``nice 15`` (``RAY_worker_niceness``) while this process
runs at ``nice 0``; on a machine shared with other work the actor then gets a fraction of the
CPU the raw loop gets, whatever the pipeline does. ``--worker-niceness`` (default 0: the
same priority as the raw side) sets it for the local Ray this benchmark starts; ``15`` is
Ray's default, for comparison. Each row also reports CPU milliseconds per text on each side,
which do not depend on the scheduling.

``--only job|raw`` runs one side alone as a whole process (Ray start included for the job),
for timing from outside with ``/usr/bin/time -v``. ``--knobs`` tries other pool shapes.

    .venv/bin/python bench/embedding_throughput.py --quick
    .venv/bin/python bench/embedding_throughput.py --texts 1000 --reps 3
    .venv/bin/python bench/embedding_throughput.py --only raw --texts 1000
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

from jobs.embedding import DEFAULT_BATCH, embed_texts
from strata.settings import Settings
from strata.stores.embedders import MiniLMEmbedder

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


def run_job(texts: list[str], settings: Settings, batch_size: int, actors: int = 1,
            cpus: float | None = None, threads: int | None = None) -> dict[str, float]:
    ids = [f"c{i}" for i in range(len(texts))]
    started = time.perf_counter()
    vectors = embed_texts(ids, texts, settings, actors=actors, batch_size=batch_size,
                          progress=False, actor_cpus=cpus, threads=threads)
    elapsed = time.perf_counter() - started
    assert len(vectors) == len(texts)
    return {"total_s": elapsed, "steady_s": vectors.steady_s, "startup_s": vectors.startup_s,
            "cpu_s": vectors.cpu_s}


def run_raw(model: MiniLMEmbedder, texts: list[str], batch_size: int,
            cpu: list[float] | None = None) -> float:
    """Seconds; appends the CPU time of the encode calls to ``cpu`` if given."""
    started = time.perf_counter()
    cpu_s = 0.0
    vectors: dict[str, list[float]] = {}
    for i in range(0, len(texts), batch_size):
        c0 = time.process_time()
        out = model.encode(texts[i:i + batch_size]).tolist()
        cpu_s += time.process_time() - c0
        for j, vector in enumerate(out):  # the same output the job hands back
            vectors[f"c{i + j}"] = vector
    elapsed = time.perf_counter() - started
    assert len(vectors) == len(texts)
    if cpu is not None:
        cpu.append(cpu_s)
    return elapsed


def load_raw(texts: list[str]) -> tuple[MiniLMEmbedder, float]:
    """A fresh model, timed; not warmed up, as the job's actor is not either."""
    t0 = time.perf_counter()
    model = MiniLMEmbedder()
    load_s = time.perf_counter() - t0
    return model, load_s


@ray.remote
class _ThreadProbe:
    """A fresh actor process, like the pool's: what thread count does torch get there?"""

    def threads(self) -> dict[str, Any]:
        import torch
        return {"torch_threads": torch.get_num_threads(),
                "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"), "nice": os.nice(0)}


def load_avg() -> float:
    return round(os.getloadavg()[0], 2)


def start_ray(temp: str, niceness: int | None = None) -> None:
    if niceness is not None:  # read by the raylet this init starts
        os.environ["RAY_worker_niceness"] = str(niceness)  # noqa: SIM112 (Ray spells it so)
    ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False,
             _temp_dir=temp, log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False


def only(what: str, texts: list[str], batch_size: int, niceness: int | None) -> int:
    """One side alone, whole process: for timing from outside."""
    started = time.perf_counter()
    if what == "raw":
        model, load_s = load_raw(texts)
        embed_s = run_raw(model, texts, batch_size)
        print(json.dumps({"raw_load_s": round(load_s, 2), "raw_embed_s": round(embed_s, 2),
                          "texts_per_s": round(len(texts) / embed_s, 1)}))
    else:
        temp = tempfile.mkdtemp(prefix="rbemb_", dir="/tmp")
        try:
            start_ray(temp, niceness)
            job = run_job(texts, Settings(embedder="minilm"), batch_size)
        finally:
            ray.shutdown()
            shutil.rmtree(temp, ignore_errors=True)
        print(json.dumps({k: round(v, 2) for k, v in job.items()}
                         | {"texts_per_s": round(len(texts) / job["steady_s"], 1)}))
    print(f"whole process {time.perf_counter() - started:.1f}s", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="300 texts, 1 rep, no knobs")
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH)
    parser.add_argument("--only", choices=("job", "raw"), default=None)
    parser.add_argument("--knobs", action="store_true", help="also try other pool shapes")
    parser.add_argument("--worker-niceness", type=int, default=0,
                        help="nice value of Ray's workers (Ray's default is 15)")
    parser.add_argument("--json", type=str, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.texts, args.reps = 300, 1
    texts = make_texts(args.texts)
    if args.only:
        return only(args.only, texts, args.batch_size, args.worker_niceness)
    lens = [len(t) for t in texts]
    settings = Settings(embedder="minilm")
    temp = tempfile.mkdtemp(prefix="rbemb_", dir="/tmp")
    result: dict[str, Any] = {
        "texts": args.texts, "reps": args.reps, "batch_size": args.batch_size,
        "chars_median": statistics.median(lens), "python": platform.python_version(),
        "ray": ray.__version__, "cpus": os.cpu_count(), "load_avg_start": load_avg(),
        "worker_niceness": args.worker_niceness, "driver_niceness": os.nice(0)}
    print(json.dumps(result), flush=True)
    try:
        start_ray(temp, args.worker_niceness)
        probe = {}
        for cpus in (1, 2):
            actor = _ThreadProbe.options(num_cpus=cpus).remote()  # type: ignore[attr-defined]
            probe[str(cpus)] = ray.get(actor.threads.remote())
            ray.kill(actor)
        result["actor_threads_by_num_cpus"] = probe
        reps = []
        for rep in range(args.reps):
            order = ("job", "raw") if rep % 2 == 0 else ("raw", "job")
            job: dict[str, float] = {}
            raw_load = raw_s = 0.0
            raw_cpu: list[float] = []
            for what in order:
                if what == "job":
                    job = run_job(texts, settings, args.batch_size)
                else:
                    model, raw_load = load_raw(texts)
                    raw_s = run_raw(model, texts, args.batch_size, raw_cpu)
                    del model
            n = args.texts
            row = {"rep": rep + 1, "order": "/".join(order), "load": load_avg(),
                   "job_total_s": round(job["total_s"], 2),
                   "job_startup_s": round(job["startup_s"], 2),
                   "job_steady_s": round(job["steady_s"], 2),
                   "raw_load_s": round(raw_load, 2), "raw_s": round(raw_s, 2),
                   "job_per_s": round(n / job["steady_s"], 1),
                   "raw_per_s": round(n / raw_s, 1),
                   "ratio_steady": round(raw_s / job["steady_s"], 3),
                   "ratio_end_to_end": round((raw_load + raw_s) / job["total_s"], 3),
                   "job_cpu_ms_per_text": round(1000 * job["cpu_s"] / n, 1),
                   "raw_cpu_ms_per_text": round(1000 * raw_cpu[0] / n, 1)}
            reps.append(row)
            print(json.dumps(row), flush=True)
        result["reps_detail"] = reps
        keys = ("job_per_s", "raw_per_s", "ratio_steady", "ratio_end_to_end", "job_total_s",
                "job_startup_s", "raw_load_s", "job_cpu_ms_per_text", "raw_cpu_ms_per_text")
        result["median"] = {k: statistics.median(float(r[k]) for r in reps) for k in keys}
        print("median:", json.dumps(result["median"]), flush=True)
        if args.knobs:
            result["knobs"] = knobs(texts, settings, args.batch_size)
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


def knobs(texts: list[str], settings: Settings, batch_size: int) -> list[dict[str, Any]]:
    """Other pool shapes, each paired with a raw run: (label, batch, actors, cpus, threads)."""
    variants = [("old default: 1 actor, 1 CPU, 1 thread, batch 64", 64, 1, 1.0, 1),
                ("1 actor, 1 CPU, 2 threads", batch_size, 1, 1.0, 2),
                ("2 actors, 1 CPU, 1 thread each", batch_size, 2, 1.0, 1)]
    rows = []
    model, _ = load_raw(texts)
    for label, bs, actors, cpus, threads in variants:
        job = run_job(texts, settings, bs, actors, cpus, threads)
        raw_s = run_raw(model, texts, bs)
        row = {"variant": label, "load": load_avg(),
               "job_per_s": round(len(texts) / job["steady_s"], 1),
               "raw_per_s": round(len(texts) / raw_s, 1),
               "ratio_steady": round(raw_s / job["steady_s"], 3)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


if __name__ == "__main__":
    sys.exit(main())
