"""How much of LoCoMo's evidence the dense search alone finds, by how the query is written.

Every turn of each dev conversation is embedded as Strata stores it (``Speaker: text``, with
the packaged MiniLM); for every question of categories 1–4, the share of its evidence turns
among the ``--k`` nearest turns is averaged per category, for the question as asked and for
the question without the names of the conversation's speakers
(``strata.recall.granularity.without_speakers``, what the personal layers' dense search now
uses). In process, no server; the answers are not read.

    .venv/bin/python bench/locomo_dense_query.py --data ../shared/data/locomo-dev --k 30
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

import numpy as np

from strata.eval.locomo import CATEGORIES, conversation_sessions, turn_text
from strata.recall.speakers import without_speakers
from strata.stores.embedders import MiniLMEmbedder


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--data", type=Path,
                   default=Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev")
    p.add_argument("--k", type=int, default=30)
    args = p.parse_args()
    model = MiniLMEmbedder()
    found: dict[tuple[str, str], list[float]] = defaultdict(list)
    for path in sorted(args.data.glob("*.json")):
        conv = json.loads(path.read_text())
        turns = [t for _, ts in conversation_sessions(conv) for t in ts]
        ids = [t["dia_id"] for t in turns]
        speakers = {t["speaker"] for t in turns}
        matrix = np.asarray(model.encode([f"{t['speaker']}: {turn_text(t)}" for t in turns]))
        questions = [q for q in conv["qa"] if q.get("category") in CATEGORIES and q.get("evidence")]
        asked = [str(q["question"]) for q in questions]
        variants = {"as asked": asked,
                    "without the speakers' names": [without_speakers(a, speakers) or a
                                                    for a in asked]}
        for name, texts in variants.items():
            queries = np.asarray(model.encode(texts))
            for q, vector in zip(questions, queries, strict=True):
                nearest = {ids[i] for i in np.argsort(-(matrix @ vector))[:args.k]}
                share = len(nearest & set(q["evidence"])) / len(q["evidence"])
                found[(name, CATEGORIES[int(q["category"])])].append(share)
                found[(name, "overall")].append(share)
    columns = [*CATEGORIES.values(), "overall"]
    print(f"evidence among the {args.k} nearest turns (dense only, MiniLM)")
    print(f"{'query':<30}" + "".join(f"{c:>13}" for c in columns))
    for name in ("as asked", "without the speakers' names"):
        print(f"{name:<30}" + "".join(f"{statistics.fmean(found[(name, c)]):>13.3f}"
                                      for c in columns))


if __name__ == "__main__":
    main()
