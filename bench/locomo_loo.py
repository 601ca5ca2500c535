"""Leave-one-conversation-out choice among recall recipes on LoCoMo (issue #20's honest tuning).

Each input is the JSON report of ``strata eval locomo --k 10 --recipe <name> --out <file>``
over the same conversations. For every conversation, the recipe with the best R@10 (``--by
mrr``: MRR; ``--by both``: R@10 + MRR; ``--by turn``: R@10 + the turn MRR, which does not
count a merged pair of turns as one position) on the *other* conversations is chosen and scored
on the held-out one; the table shows each fold's
choice, its held-out figure and the in-sample figure of the same recipe, so over-fitting shows
as a gap. The last line is the recipe chosen on all conversations (what would be the default).

    .venv/bin/python bench/locomo_loo.py hybrid.json x-cap2.json x-cap3.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any


def per_question(report: dict[str, Any]) -> list[tuple[str, str, float, float, float]]:
    """(conversation, category, recall, reciprocal rank, reciprocal turn rank) of every
    question."""
    out = []
    for q in report["questions"]:
        recall = len(q["found"]) / len(q["evidence"]) if q["evidence"] else 0.0
        rank, turn = q.get("first_hit_rank"), q.get("first_hit_turn")
        out.append((q["conversation"], q["category"], recall, 1.0 / rank if rank else 0.0,
                    1.0 / turn if turn else 0.0))
    return out


def mean(rows: list[tuple[str, str, float, float, float]], col: int) -> float:
    return statistics.fmean(r[col] for r in rows) if rows else 0.0


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("reports", nargs="+", type=Path)
    p.add_argument("--by", choices=("recall", "mrr", "both", "turn"), default="recall",
                   help="what a fold chooses by (default R@10)")
    args = p.parse_args()

    def objective(rows: list[tuple[str, str, float, float, float]]) -> float:
        if args.by == "recall":
            return mean(rows, 2)
        if args.by == "turn":
            return mean(rows, 2) + mean(rows, 4)
        return mean(rows, 3) + (mean(rows, 2) if args.by == "both" else 0.0)

    runs = {}
    for path in args.reports:
        report = json.loads(path.read_text())
        runs[f"{report['recipe']} ({path.name})"] = per_question(report)
    convs = sorted({r[0] for rows in runs.values() for r in rows})
    print(f"{'recipe':<32}" + "".join(f"{c:>9}" for c in convs) + f"{'all R@10':>10}{'MRR':>7}")
    for name, rows in runs.items():
        print(f"{name:<32}" + "".join(f"{mean([r for r in rows if r[0] == c], 2):>9.3f}"
                                      for c in convs)
              + f"{mean(rows, 2):>10.4f}{mean(rows, 3):>7.4f}")
    print("\nleave one conversation out (choose on the other four, score the held-out one):")
    held: list[tuple[str, str, float, float, float]] = []
    for conv in convs:
        def train_score(name: str, conv: str = conv) -> float:
            return objective([r for r in runs[name] if r[0] != conv])
        best = max(runs, key=train_score)
        test = [r for r in runs[best] if r[0] == conv]
        held.extend(test)
        print(f"  held out {conv}: chose {best}; train {args.by} {train_score(best):.4f}, "
              f"held-out R@10 {mean(test, 2):.4f}, MRR {mean(test, 3):.4f}")
    by_cat: dict[str, list[float]] = defaultdict(list)
    for r in held:
        by_cat[r[1]].append(r[2])
    print(f"  held-out overall: R@10 {mean(held, 2):.4f}, MRR {mean(held, 3):.4f}; "
          + ", ".join(f"{c} {statistics.fmean(v):.3f}" for c, v in sorted(by_cat.items())))
    chosen = max(runs, key=lambda n: objective(runs[n]))
    print(f"chosen on all conversations: {chosen} (in-sample R@10 {mean(runs[chosen], 2):.4f}, "
          f"MRR {mean(runs[chosen], 3):.4f})")


if __name__ == "__main__":
    main()
