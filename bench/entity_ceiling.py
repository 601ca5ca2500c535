"""The candidate ceiling with the entity index (#38): how much of LoCoMo's evidence the
first stage could ever see, today and with the index's reach added.

Per conversation, every turn (``Speaker: text``, as Strata stores it) goes into an
``EntityIndex`` and is embedded with the packaged MiniLM. For each question of categories
1–4, three sets of turns:

* **today's candidates, approximated in process**: the ``--pool`` best turns by reciprocal
  rank fusion of the dense ranking (MiniLM, the query without the speakers' names, as the
  personal layers search) and BM25 over the turns' index terms. The real first stage (30
  turns and 30 exchanges by hybrid search, fused, ~37 candidates) was measured at
  multi-hop 0.65, temporal 0.93, open-domain 0.64, single-hop 0.94 ("Where the rest of
  #20's gap is", ``docs/benchmarks.md``); this run prints its approximation beside them.
* **the index's reach**: the turns the question's entities and asked-for kinds lead to
  (``strata.entities.reach``), whole and capped (the reached turns ordered by the dense
  cosine, the first ``--caps``), since a source that hands recall every turn has no use.
* their union.

The split was fixed before any tuning: conv-26 and conv-41 (``--dev``) were read while
building the lexicon's words and the question patterns; conv-30, conv-42 and conv-43 were
not, and are reported apart. The answers are never read.

    .venv/bin/python bench/entity_ceiling.py --data ../shared/data/locomo-dev
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from strata.entities import EntityIndex, Reach, default_gazetteer, default_lexicon, reach
from strata.eval.locomo import CATEGORIES, conversation_sessions, turn_text
from strata.recall.speakers import without_speakers
from strata.stores.embedders import MiniLMEmbedder
from strata.stores.lexical import bm25_term_scores, tokenize

RRF_K = 60
DEV = ("conv-26", "conv-41")
# what each source of the index is: the reasons ``reach`` gives, by prefix
SOURCES: dict[str, Callable[[str], bool]] = {
    "gazetteer": lambda why: why.startswith(("entity:place:", "level:")),
    "lexicon": lambda why: why.startswith(("entity:thing:", "category:")),
    "proper nouns": lambda why: why.startswith(("entity:name:", "entity:title:", "people:")),
}
REAL_CEILING = {"multi-hop": 0.65, "temporal": 0.93, "open-domain": 0.64, "single-hop": 0.94}


@dataclass
class Row:
    """One question's outcome."""

    conversation: str
    category: str
    evidence: set[str]
    candidates: set[str]
    reached: list[str]  # ordered by the dense cosine, best first
    by_source: dict[str, set[str]] = field(default_factory=dict)
    orders: dict[str, list[str]] = field(default_factory=dict)  # other orders of ``reached``

    def share(self, turns: set[str]) -> float:
        return len(self.evidence & turns) / len(self.evidence)


def _evidence(raw: Sequence[str]) -> set[str]:
    return {e.strip() for item in raw for e in str(item).split(";") if e.strip()}


def _rrf(*rankings: Sequence[int]) -> list[int]:
    score: dict[int, float] = defaultdict(float)
    for ranking in rankings:
        for rank, i in enumerate(ranking):
            score[i] += 1.0 / (RRF_K + rank + 1)
    return sorted(score, key=lambda i: -score[i])


def run_conversation(path: Path, model: MiniLMEmbedder, pool: int,
                     timings: dict[str, list[float]]) -> list[Row]:
    conv = json.loads(path.read_text())
    turns = [t for _, ts in conversation_sessions(conv) for t in ts]
    ids = [str(t["dia_id"]) for t in turns]
    texts = [turn_text(t) for t in turns]
    speakers = sorted({str(t["speaker"]) for t in turns})
    index = EntityIndex(default_gazetteer(), default_lexicon())
    started = time.perf_counter()
    for turn, dia_id, text in zip(turns, ids, texts, strict=True):
        index.add(dia_id, text, "en", speaker=str(turn["speaker"]), speakers=speakers)
    timings["index_turn_s"].append((time.perf_counter() - started) / len(turns))
    vectors = model.encode(texts)
    terms = [tokenize(t) for t in texts]
    rows = []
    for q in conv["qa"]:
        if q.get("category") not in CATEGORIES or not q.get("evidence"):
            continue
        question = str(q["question"])
        dense_query = without_speakers(question, speakers) or question
        cosine = vectors @ model.encode([dense_query])[0]
        dense = list(np.argsort(-cosine))
        bm25 = bm25_term_scores(tokenize(question), terms)
        lexical = [i for i in np.argsort(-np.asarray(bm25)) if bm25[i] > 0]
        candidates = {ids[i] for i in _rrf(dense[:pool], lexical[:pool])[:pool]}
        t0 = time.perf_counter()
        reached: Reach = reach(index, question, "en", speakers)
        timings["reach_s"].append(time.perf_counter() - t0)
        position = {dia_id: i for i, dia_id in enumerate(ids)}
        ordered = sorted(reached.ids(), key=lambda m: -cosine[position[m]])
        by_source = {name: {m for m, why in reached.memories.items() if any(map(test, why))}
                     for name, test in SOURCES.items()}
        rarity = _rarity(reached)
        by_rarity = sorted(ordered, key=lambda m: -rarity[m])  # ties keep the cosine order
        orders = {"cosine": ordered, "rarity": by_rarity,
                  "rrf(cosine, rarity)": [ordered[i] for i in _rrf(
                      range(len(ordered)), [ordered.index(m) for m in by_rarity])]}
        rows.append(Row(path.stem, CATEGORIES[int(q["category"])], _evidence(q["evidence"]),
                        candidates, ordered, by_source, orders))
    return rows


def _rarity(reached: Reach) -> dict[str, float]:
    """How specific each reached memory's reasons are: the sum over its reasons of one over
    how many memories that reason reaches (a named entity of three turns outweighs the
    "activity" category of sixty)."""
    size: dict[str, int] = defaultdict(int)
    for why in reached.memories.values():
        for reason in why:
            size[reason] += 1
    return {m: sum(1.0 / size[r] for r in why) for m, why in reached.memories.items()}


def _union(rows: list[Row], order: str, n: int) -> float:
    return _mean([r.share(r.candidates | set(r.orders[order][:n])) for r in rows])


def orders_table(rows: list[Row], caps: Sequence[int], title: str) -> list[str]:
    """The union with the first N reached turns, by each way of ordering them."""
    names = list(rows[0].orders) if rows else []
    head = ["order of the reached turns", *[f"{c}: ≤{n}" for c in CATEGORIES.values()
                                            for n in caps], *[f"all: ≤{n}" for n in caps]]
    out = [f"### {title}", "", "| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for name in names:
        cells = [name]
        for category in [*CATEGORIES.values(), "all"]:
            part = [r for r in rows if category in ("all", r.category)]
            cells += [f"{_union(part, name, n):.3f}" for n in caps]
        out.append("| " + " | ".join(cells) + " |")
    return out


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def table(rows: list[Row], caps: Sequence[int], title: str) -> list[str]:
    head = (["category", "n", "candidates", "reach (all)", "turns reached", "union (all)"]
            + [f"union, reach ≤{c}" for c in caps] + ["gain ≤" + str(caps[-1])])
    out = [f"### {title}", "", "| " + " | ".join(head) + " |",
           "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
    groups = [(name, [r for r in rows if r.category == name]) for name in CATEGORIES.values()]
    for name, part in [*groups, ("all", rows)]:
        if not part:
            continue
        cand = _mean([r.share(r.candidates) for r in part])
        capped = [_mean([r.share(r.candidates | set(r.reached[:c])) for r in part])
                  for c in caps]
        cells = [name, str(len(part)), f"{cand:.3f}",
                 f"{_mean([r.share(set(r.reached)) for r in part]):.3f}",
                 f"{_mean([float(len(r.reached)) for r in part]):.1f}",
                 f"{_mean([r.share(r.candidates | set(r.reached)) for r in part]):.3f}",
                 *[f"{v:.3f}" for v in capped], f"{capped[-1] - cand:+.3f}"]
        out.append("| " + " | ".join(cells) + " |")
    return out


def ablation(rows: list[Row], cap: int, title: str) -> list[str]:
    head = ["source alone", *CATEGORIES.values(), "all"]
    out = [f"### {title}", "", "| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for source in SOURCES:
        for order in ("cosine", "rarity"):
            cells = [f"{source} ({order} order)"]
            for name in [*CATEGORIES.values(), "all"]:
                part = [r for r in rows if name in ("all", r.category)]
                gain = _mean([r.share(r.candidates | set([m for m in r.orders[order]
                                                           if m in r.by_source[source]][:cap]))
                              - r.share(r.candidates) for r in part])
                cells.append(f"{gain:+.3f}")
            out.append("| " + " | ".join(cells) + " |")
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--data", type=Path,
                   default=Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev")
    p.add_argument("--pool", type=int, default=30, help="today's candidates: this many turns")
    p.add_argument("--caps", default="10,20", help="the reach's first N turns by cosine")
    p.add_argument("--dev", default=",".join(DEV), help="the conversations read while tuning")
    p.add_argument("--limit", type=int, default=None, help="only the first N conversations")
    args = p.parse_args(argv)
    caps = [int(c) for c in args.caps.split(",")]
    dev = set(args.dev.split(","))
    model = MiniLMEmbedder()
    timings: dict[str, list[float]] = defaultdict(list)
    started = time.perf_counter()
    default_gazetteer()
    default_lexicon()
    load_s = time.perf_counter() - started
    rows: list[Row] = []
    for path in sorted(args.data.glob("*.json"))[:args.limit]:
        rows += run_conversation(path, model, args.pool, timings)
    lines = [*table([r for r in rows if r.conversation in dev], caps,
                    f"developed on ({', '.join(sorted(dev))})"), "",
             *table([r for r in rows if r.conversation not in dev], caps,
                    "held out (not read while tuning)"), "",
             *table(rows, caps, "all five"), "",
             *orders_table([r for r in rows if r.conversation in dev], caps,
                           "the union by the order of the reached turns, developed on"), "",
             *orders_table([r for r in rows if r.conversation not in dev], caps,
                           "the union by the order of the reached turns, held out"), "",
             *ablation(rows, caps[-1], f"each source alone, reach ≤{caps[-1]}: gain over "
                       "the candidates, all five"), ""]
    reach_ms = sorted(t * 1000 for t in timings["reach_s"])
    lines.append(f"today's candidates: {args.pool} turns (dense ∪ BM25 by RRF, in process); "
                 f"the real first stage's ceiling: {REAL_CEILING}")
    lines.append(f"gazetteer + lexicon load {load_s:.1f} s; index build "
                 f"{1 / _mean(timings['index_turn_s']):.0f} turns/s; reach p50 "
                 f"{reach_ms[len(reach_ms) // 2]:.2f} ms, p95 "
                 f"{reach_ms[int(len(reach_ms) * 0.95)]:.2f} ms per question")
    print("\n".join(lines))
    return {"rows": len(rows)}


if __name__ == "__main__":
    main()
