"""The local model's forward pass on torch and on ONNX Runtime, in one process, one run.

For LoCoMo questions (recall's query path: pooled vector + content tokens' vectors) in
batches of 1, 2, 8 and 16, and for LoCoMo turns (the write path: pooled + token vectors,
batches of 64), at 1 and 2 threads: wall and CPU milliseconds a text, the ratio torch/onnx,
and the largest difference between the two runtimes' vectors.

    .venv/bin/python bench/embed_runtime.py [--model minilm|mpnet] [--texts 240]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from strata.recall.late import embed_queries
from strata.stores.embedders import MiniLMEmbedder, MPNetEmbedder

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev"


def locomo(texts: int) -> tuple[list[str], list[str]]:
    questions: list[str] = []
    turns: list[str] = []
    for path in sorted(DATA.glob("*.json")):
        conv = json.loads(path.read_text())
        questions += [str(q["question"]) for q in conv["qa"]]
        turns += [str(t["text"]) for key, value in conv.items()
                  if key.startswith("session_") and isinstance(value, list) for t in value]
    return questions[:texts], turns[:texts]


def timed(run: Any, batches: list[list[str]]) -> tuple[float, float]:
    run(batches[0])  # warm
    wall, cpu = time.perf_counter(), time.process_time()
    for batch in batches:
        run(batch)
    n = sum(len(b) for b in batches)
    return ((time.perf_counter() - wall) / n * 1000, (time.process_time() - cpu) / n * 1000)


def query_pass(embedder: Any) -> Any:
    return lambda batch: embed_queries(embedder, batch)


def turn_pass(embedder: Any) -> Any:
    return lambda batch: embedder.encode_with_tokens(batch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=("minilm", "mpnet"), default="minilm")
    parser.add_argument("--texts", type=int, default=240)
    args = parser.parse_args()
    questions, turns = locomo(args.texts)
    cache = Path(tempfile.mkdtemp(prefix="strata-onnx-"))
    cls = MiniLMEmbedder if args.model == "minilm" else MPNetEmbedder
    print(f"{args.model}: {len(questions)} questions, {len(turns)} turns; the graph in {cache}")
    rows = []
    for threads in (1, 2):
        torch_side = cls(threads=threads, runtime="torch")
        started = time.perf_counter()
        onnx_side = (MiniLMEmbedder(threads=threads, runtime="onnx", cache_dir=cache)
                     if args.model == "minilm" else
                     MPNetEmbedder(threads=threads, runtime="onnx", onnx_dir=cache))
        loaded = time.perf_counter() - started
        a, ta = torch_side.encode_with_tokens(turns[:64])
        b, tb = onnx_side.encode_with_tokens(turns[:64])
        gap = max(float(np.abs(a - b).max()),
                  max(float(np.abs(x - y).max()) for x, y in zip(ta, tb, strict=True) if x.size))
        print(f"threads {threads}: ONNX Runtime loaded in {loaded:.1f} s (export included the "
              f"first time); largest vector difference {gap:.2e}")
        shapes: list[tuple[str, int, Any, list[str]]] = [
            ("queries", size, query_pass, questions) for size in (1, 2, 8, 16)]
        shapes.append(("turns", 64, turn_pass, turns))
        for kind, size, make, texts in shapes:
            batches = [texts[i:i + size] for i in range(0, len(texts), size)]
            t_wall, t_cpu = timed(make(torch_side), batches)
            o_wall, o_cpu = timed(make(onnx_side), batches)
            rows.append((threads, kind, size, t_wall, t_cpu, o_wall, o_cpu))
    print("\n| threads | texts | batch | torch wall / CPU ms a text | ONNX wall / CPU ms a text "
          "| torch / ONNX (CPU) |")
    print("|---:|---|---:|---:|---:|---:|")
    for threads, kind, size, t_wall, t_cpu, o_wall, o_cpu in rows:
        print(f"| {threads} | {kind} | {size} | {t_wall:.2f} / {t_cpu:.2f} | "
              f"{o_wall:.2f} / {o_cpu:.2f} | {t_cpu / o_cpu:.2f}× |")


if __name__ == "__main__":
    main()
