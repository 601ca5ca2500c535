"""Confirmations end to end through the rule extractor (issue #36): for each labelled row of
the intent corpus whose turn before is a hedged statement with a fact the patterns find,
the row's turn is said after it by the same person; a confirm row passes when the hedged
fact comes out stated, any other row when it does not. Rules only (the reader off) against
the shipped reader (``confirm_reader``), on the development writers and the held-out ones.

    .venv/bin/python bench/confirm_e2e.py
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from intents import DEV, HELD_OUT, load

from strata.extract.fact_rules import match_facts
from strata.extract.intent_model import confirm_reader
from strata.extract.intents import is_hedged, unhedged
from strata.extract.rules import RuleExtractor
from strata.models import Role, Turn


def _stated(extractor: RuleExtractor, previous: str, text: str) -> bool:
    turns = [Turn(user_id="u", session_id="s", turn_id=f"s:{i}", role=Role.USER, content=t)
             for i, t in enumerate((previous, text), start=1)]
    return any(c.key and c.confidence >= 0.6 and c.provenance.turn_ids == ["s:2"]
               for c in extractor.extract(turns))


def main() -> int:
    rows = [r for r in load() if r.get("previous") and is_hedged(r["previous"])
            and match_facts(unhedged(r["previous"]))]
    for split, writers in (("dev", DEV), ("held-out", HELD_OUT)):
        subset = [r for r in rows if r["writer"] in writers]
        for name, extractor in (("rules", RuleExtractor()),
                                ("learned", RuleExtractor(reads_confirm=confirm_reader))):
            n: Counter[str] = Counter()
            for r in subset:
                kind = f"{r['lang']} {'confirm' if r['intent'] == 'confirm' else 'other'}"
                n[kind + " n"] += 1
                n[kind + " pass"] += (_stated(extractor, r["previous"], r["text"])
                                      == (r["intent"] == "confirm"))
            cells = [f"{k}: {n[k + ' pass']}/{n[k + ' n']}" for k in
                     ("en confirm", "zh confirm", "en other", "zh other")]
            print(f"{split:8} {name:7} " + " | ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
