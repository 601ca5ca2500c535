"""The rules' forgets on the development writers, and what a veto by the model would keep
(issue #36): leave-one-writer-out inside ``DEV`` (each writer's rows read by a model fitted
on the other six), for each turn the rules read as a forget — right or wrong by its label,
the model's probability of forget, and whether ``intent_model.doubted`` puts it in doubt.
Prints, per language, the forgets kept and wrong under: no veto, a veto under 0.2 for all,
and a veto under 0.2 for doubted turns only (what the shards run); ``--list`` prints the
doubted turns. Reads ``DEV`` rows only.

    .venv/bin/python bench/rule_forgets.py
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from intents import DEV, load, utterances

from strata.extract.intent_model import LearnedIntents, RuleIntents, doubted

Read = tuple[str, bool, float, bool, str]  # lang, right, p(forget), doubted, text


def rules_forgets() -> list[Read]:
    rows = [r for r in load() if r["writer"] in DEV]
    out: list[Read] = []
    for writer in DEV:
        test = [r for r in rows if r["writer"] == writer]
        model = LearnedIntents([r for r in rows if r["writer"] != writer])
        said = utterances(test)
        for row, ruled, probs in zip(test, RuleIntents().read(said), model.probabilities(said),
                                     strict=True):
            if ruled.intent == "forget":
                out.append((row["lang"], row["intent"] == "forget", probs.get("forget", 0.0),
                            doubted(row["text"]), row["text"]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print the doubted turns")
    args = parser.parse_args()
    read = rules_forgets()
    policies: dict[str, Callable[[Read], bool]] = {
        "no veto": lambda r: True,
        "veto under 0.2": lambda r: r[2] >= 0.2,
        "veto under 0.2 if doubted (shipped)": lambda r: not (r[3] and r[2] < 0.2)}
    print("| lang | policy | kept | right | wrong |\n|---|---|---:|---:|---:|")
    for lang in ("en", "zh"):
        mine = [r for r in read if r[0] == lang]
        for name, keeps in policies.items():
            kept = [r for r in mine if keeps(r)]
            right = sum(r[1] for r in kept)
            print(f"| {lang} | {name} | {len(kept)} | {right} | {len(kept) - right} |")
    if args.list:
        for lang, right, p, doubt, text in read:
            if doubt:
                print(lang, "right" if right else "WRONG", f"{p:.2f}", text[:80])


if __name__ == "__main__":
    main()
