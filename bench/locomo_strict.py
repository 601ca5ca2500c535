"""Stricter LoCoMo checks than ``strata eval locomo``'s R@k, on users an earlier eval ingested.

R@10 counts an evidence turn as found when an item from it is in the recalled context. Two
checks here say whether the text that matters reached the model:

- *R@10 whole*: an evidence item counts only if its whole text is in the context (a line cut
  to fit does not);
- *answer in context*: the share of questions with a short gold answer (≤ 40 characters)
  whose answer string appears in the context (case-insensitive).

Run against a running Strata, with the tag an earlier ``strata eval locomo`` printed::

    .venv/bin/python bench/locomo_strict.py --url http://127.0.0.1:8320 --tag 252273 \\
        --data ../shared/data/locomo-dev [--recipe hybrid]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from strata import Client
from strata.eval.locomo import CATEGORIES, _hits, _known_ids


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--api-key", default=os.environ.get("STRATA_API_KEY", "dev"))
    p.add_argument("--tag", required=True, help="the users' tag from strata eval locomo")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--recipe", default=None)
    p.add_argument("--budget", type=int, default=500)
    args = p.parse_args(argv)
    client = Client(args.url, api_key=args.api_key, timeout_s=60)
    recall_any, recall_whole, answered = [], [], []
    for path in sorted(args.data.glob("*.json")):
        data = json.loads(path.read_text())
        user = f"locomo-{path.stem}-{args.tag}"
        to_dia, _ = _known_ids(data)
        for q in data["qa"]:
            if q.get("category") not in CATEGORIES or not q.get("evidence"):
                continue
            evidence = set(q["evidence"])
            resp = client.recall(user, str(q["question"]), top_k=10,
                                 budget_tokens=args.budget, recipe=args.recipe)
            found, whole = set(), set()
            for item, hit in zip(resp["items"], _hits(resp["items"], to_dia), strict=True):
                found |= hit & evidence
                if item["text"] in resp["context"]:
                    whole |= hit & evidence
            recall_any.append(len(found) / len(evidence))
            recall_whole.append(len(whole) / len(evidence))
            answer = str(q.get("answer", "")).strip().lower()
            if answer and len(answer) <= 40:
                answered.append(answer in resp["context"].lower())
    print(json.dumps({"questions": len(recall_any),
                      "recall_at_10": round(statistics.fmean(recall_any), 4),
                      "recall_at_10_whole": round(statistics.fmean(recall_whole), 4),
                      "answer_questions": len(answered),
                      "answer_in_context": round(statistics.fmean(answered), 4)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
