"""The real first stage's candidate ceiling on LoCoMo, per category: the share of each
question's evidence turns that are ever a candidate of a recall (any layer, any position),
through the HTTP API with ``debug`` (every candidate returned, each looked up by its text).

Users are those an earlier ``strata eval locomo`` ingested (``--reuse-tag``). The
conversations read while tuning (``--dev``) are reported apart from the others. The
answers are never read.

    .venv/bin/python bench/locomo_candidates.py --url http://127.0.0.1:8361 --reuse-tag fd8af2 \\
        --data ../shared/data/locomo-dev --recipes hybrid,entities
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from strata.client import Client
from strata.eval.locomo import CATEGORIES, conversation_sessions, turn_text

DEV = ("conv-26", "conv-41")


def shares(client: Client, path: Path, tag: str, recipe: str,
           budget: int = 500) -> list[tuple[str, str, float, int]]:
    """(conversation, category, evidence share among the candidates, candidates) per
    question."""
    conv = json.loads(path.read_text())
    texts = {str(t["dia_id"]): turn_text(t) for _, ts in conversation_sessions(conv)
             for t in ts}
    user = f"locomo-{path.stem}-{tag}"
    out = []
    for q in conv["qa"]:
        if q.get("category") not in CATEGORIES or not q.get("evidence"):
            continue
        evidence = [e for e in q["evidence"] if e in texts]
        if not evidence:
            continue
        resp = client.recall(user, str(q["question"]), top_k=10, budget_tokens=budget,
                             recipe=recipe, debug=True)
        found = {line for c in resp["debug"]["candidates"] for line in str(c["text"]).split("\n")}
        share = sum(1 for e in evidence if texts[e] in found) / len(evidence)
        out.append((path.stem, CATEGORIES[int(q["category"])], share,
                    len(resp["debug"]["candidates"])))
    return out


def table(rows: list[tuple[str, str, float, int]], title: str) -> list[str]:
    out = [f"{title}: " + ", ".join(
        f"{c} {statistics.fmean(r[2] for r in rows if r[1] == c):.3f} "
        f"(n {sum(1 for r in rows if r[1] == c)})"
        for c in CATEGORIES.values() if any(r[1] == c for r in rows))
        + f"; all {statistics.fmean(r[2] for r in rows):.3f}; "
        f"candidates a question {statistics.fmean(r[3] for r in rows):.1f}"]
    return out


def main() -> dict[str, Any]:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--api-key", default="dev")
    p.add_argument("--reuse-tag", required=True)
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--recipes", default="hybrid")
    p.add_argument("--dev", default=",".join(DEV))
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    dev = set(args.dev.split(","))
    client = Client(args.url, api_key=args.api_key, timeout_s=120)
    report: dict[str, Any] = {}
    for recipe in args.recipes.split(","):
        started = time.monotonic()
        rows = [r for path in sorted(args.data.glob("*.json"))
                for r in shares(client, path, args.reuse_tag, recipe)]
        by: dict[str, dict[str, float]] = defaultdict(dict)
        for part, chosen in (("dev", [r for r in rows if r[0] in dev]),
                             ("held out", [r for r in rows if r[0] not in dev]),
                             ("all", rows)):
            print("\n".join(table(chosen, f"{recipe}, {part}")))
            for c in CATEGORIES.values():
                cat = [r[2] for r in chosen if r[1] == c]
                if cat:
                    by[part][c] = round(statistics.fmean(cat), 4)
            by[part]["all"] = round(statistics.fmean(r[2] for r in chosen), 4)
        print(f"({recipe}: {len(rows)} questions in {time.monotonic() - started:.0f} s)")
        report[recipe] = by
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
