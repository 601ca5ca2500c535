"""Intent detectors on writers they never saw (issue #36): rules, learned, learned+rules.

The corpus has twenty writers: the ``DEV`` fourteen ship with the package as the detector's
training rows (``strata/extract/intent_corpus``), the ``HELD_OUT`` two, the ``NEW_WRITER``,
the ``NEWEST_WRITER`` two and the ``FRESH_WRITER`` stay in the tests (``tests/data/intents``).
The split was fixed before any tuning: ``DEV`` writers are developed on (leave-one-writer-out
inside them picks the settings), ``HELD_OUT`` writers are read by detectors trained on ``DEV``
only; ``NEW_WRITER``, ``NEWEST_WRITER`` and ``FRESH_WRITER`` (added after the features and
thresholds were frozen) are read in aggregate, at the end.
Prints precision and recall per intent and language, and the added cost per turn. Columns:
the rules; the learned model with the old features (character n-grams) and with the new
(plus word n-grams), each with the rules as a second opinion on forget; "shipped", what the
shards run (``packaged_detector``: new features, forget cue, per-label thresholds); and
"shipped before", the same detector trained on the thirteen DEV writers before w41 (what
shipped on 2026-12-06 before w41 joined).

    .venv/bin/python bench/intents.py            # the held-out tables (and LOWO on DEV)
    .venv/bin/python bench/intents.py --dev-only # leave-one-writer-out inside DEV only
    # and the LLM detector beside them (strata.extract.llm_intents; bench/local_llm.py serves
    # one), on the first N held-out rows of each intent x language (every column, same rows)
    .venv/bin/python bench/intents.py --llm-url http://127.0.0.1:18089/v1 --llm-limit 10
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from strata.chat import ChatClient
from strata.extract.intent_model import (
    ARTIFACT,
    ARTIFACT_BAR,
    DOUBTED_BAR,
    FORGET_SAID,
    INTENTS,
    LABEL_THRESHOLDS,
    SHIPPED_FORGET_BAR,
    CombinedIntents,
    IntentDetector,
    LearnedIntents,
    RuleIntents,
    Utterance,
    doubted,
)
from strata.extract.llm_intents import LLMIntents

CORPUS = (Path(__file__).parents[1] / "strata" / "extract" / "intent_corpus",
          Path(__file__).parents[1] / "tests" / "data" / "intents")
DEV = ("w1_terse", "w2_formal", "w3_mixed", "w4_elder", "w10_voice", "w11_coach", "w13_parent",
       "w25_gamer", "w26_smallbiz", "w33_developer", "w34_health_journal", "w36_night_nurse",
       "w37_office_manager", "w41_retired_engineer")
PREVIOUS_DEV = DEV[:13]  # the development writers before w41 joined (2026-12-06)
HELD_OUT = ("w5_friends", "w6_shopper")
NEW_WRITER = ("w12_teen",)  # held out, and read only after the choices were frozen
# held out: w27 written 2026-12-04 with w25/w26 and read after that afternoon's choices; w35
# written with w33/w34 (2026-12-04, evening), read once after the evening's choices
NEWEST_WRITER = ("w27_students_abroad", "w35_traveller")
# held out: written with w41 (2026-12-06), read once, after that session's choices (--fresh)
FRESH_WRITER = ("w42_startup_founder",)


def load() -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted(p for d in CORPUS for p in d.glob("*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def utterances(rows: Sequence[dict[str, Any]]) -> list[Utterance]:
    return [Utterance(r["text"], r.get("previous")) for r in rows]


def scores(rows: Sequence[dict[str, Any]], predicted: Sequence[str]
           ) -> dict[tuple[str, str], tuple[float, float, int]]:
    """(intent, lang) → (precision, recall, support)."""
    out = {}
    for lang in ("en", "zh"):
        pairs = [(r["intent"], p) for r, p in zip(rows, predicted, strict=True)
                 if r["lang"] == lang]
        for intent in INTENTS:
            tp = sum(t == intent and p == intent for t, p in pairs)
            said = sum(p == intent for _, p in pairs)
            real = sum(t == intent for t, _ in pairs)
            out[(intent, lang)] = (tp / said if said else 0.0, tp / real if real else 0.0, real)
    return out


def table(results: dict[str, dict[tuple[str, str], tuple[float, float, int]]]) -> str:
    names = list(results)
    head = "| intent | lang | n | " + " | ".join(f"{n} P / R" for n in names) + " |"
    lines = [head, "|" + "---|" * (3 + len(names))]
    for intent in INTENTS:
        for lang in ("en", "zh"):
            n = results[names[0]][(intent, lang)][2]
            cells = [f"{results[k][(intent, lang)][0]:.2f} / {results[k][(intent, lang)][1]:.2f}"
                     for k in names]
            lines.append(f"| {intent} | {lang} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def detectors(train: Sequence[dict[str, Any]]) -> dict[str, IntentDetector]:
    old = LearnedIntents(train, words=False)
    new = LearnedIntents(train)
    before = [r for r in train if r["writer"] in PREVIOUS_DEV]
    out: dict[str, IntentDetector] = {
        "rules": RuleIntents(), "learned old+rules": CombinedIntents(old),
        "learned new+rules": CombinedIntents(new),
        # what the shards run (packaged_detector): a learned-only forget needs the cue, and
        # each label its threshold
        "shipped": CombinedIntents(new, cue=FORGET_SAID, thresholds=LABEL_THRESHOLDS,
                                   forget_threshold=SHIPPED_FORGET_BAR, rule_backed=DOUBTED_BAR,
                                   doubt=doubted, artifact=ARTIFACT, artifact_bar=ARTIFACT_BAR)}
    if before:  # the same, trained on the earlier writers only (in a LOWO fold that leaves
        # out a newer writer, the same rows as "shipped": every fold has every column)
        out["shipped before"] = CombinedIntents(
            LearnedIntents(before), cue=FORGET_SAID, thresholds=LABEL_THRESHOLDS,
            forget_threshold=SHIPPED_FORGET_BAR, rule_backed=DOUBTED_BAR, doubt=doubted,
            artifact=ARTIFACT, artifact_bar=ARTIFACT_BAR)
    return out


def run(fitted: dict[str, IntentDetector], test: Sequence[dict[str, Any]]
        ) -> dict[str, list[str]]:
    return {name: [r.intent for r in d.read(utterances(test))] for name, d in fitted.items()}


def leave_one_writer_out(rows: Sequence[dict[str, Any]], writers: Sequence[str]
                         ) -> dict[str, dict[tuple[str, str], tuple[float, float, int]]]:
    """Each writer predicted by detectors trained on the others; pooled."""
    test_rows: list[dict[str, Any]] = []
    pooled: dict[str, list[str]] = {}
    for writer in writers:
        test = [r for r in rows if r["writer"] == writer]
        train = [r for r in rows if r["writer"] in writers and r["writer"] != writer]
        for name, predicted in run(detectors(train), test).items():
            pooled.setdefault(name, []).extend(predicted)
        test_rows.extend(test)
    return {name: scores(test_rows, predicted) for name, predicted in pooled.items()}


def cost_per_turn(fitted: dict[str, IntentDetector], sample: Sequence[dict[str, Any]]
                  ) -> dict[str, float]:
    """p50 and p95 ms of one turn read alone (as the turn path reads it), per detector."""
    out = {}
    for name, detector in fitted.items():
        timings = []
        for row in sample:
            started = time.perf_counter()
            detector.read([Utterance(row["text"], row.get("previous"))])
            timings.append((time.perf_counter() - started) * 1000)
        timings.sort()
        out[f"{name} p50"] = statistics.median(timings)
        out[f"{name} p95"] = timings[int(len(timings) * 0.95)]
    return out


def conversation_turns(folder: Path) -> list[Utterance]:
    """Every turn of the LoCoMo conversations in ``folder``, with the turn before it:
    ordinary talk between friends, where no turn asks an agent to forget anything."""
    out = []
    for path in sorted(folder.glob("*.json")):
        conversation = json.loads(path.read_text(encoding="utf-8"))
        for key, session in conversation.items():
            if not (key.startswith("session_") and isinstance(session, list)):
                continue
            previous = None
            for turn in session:
                out.append(Utterance(turn["text"], previous))
                previous = turn["text"]
    return out


def stratified(rows: Sequence[dict[str, Any]], per_cell: int | None) -> list[dict[str, Any]]:
    """The first ``per_cell`` rows (in corpus order) of each intent x language; all: None."""
    if per_cell is None:
        return list(rows)
    taken: Counter[tuple[str, str]] = Counter()
    out = []
    for row in rows:
        cell = (row["intent"], row["lang"])
        if taken[cell] < per_cell:
            taken[cell] += 1
            out.append(row)
    return out


def llm_column(args: argparse.Namespace, fitted: dict[str, IntentDetector],
               test: Sequence[dict[str, Any]]) -> None:
    """Every detector, the LLM's among them, on the same (stratified) held-out rows; the
    LLM's cost per turn (one call a turn) and how often the rules answered for it."""
    subset = stratified(test, args.llm_limit)
    print(f"\n## HELD-OUT writers with the LLM detector ({args.llm_model} at {args.llm_url}): "
          f"{len(subset)} rows, the first {args.llm_limit or 'all'} of each intent x lang")
    llm = LLMIntents(ChatClient(args.llm_url, "", args.llm_model, args.llm_timeout_s))
    predicted = run(fitted, subset)
    timings: list[float] = []
    readings = []
    for i, u in enumerate(utterances(subset), 1):
        started = time.perf_counter()
        readings.extend(llm.read([u]))
        timings.append((time.perf_counter() - started) * 1000)
        if i % 20 == 0 or i == len(subset):
            print(f"  llm: {i}/{len(subset)} turns, {sum(timings) / 1000:.0f} s so far",
                  file=sys.stderr, flush=True)
    predicted["llm"] = [r.intent for r in readings]
    print(table({name: scores(subset, p) for name, p in predicted.items()}))
    hard = [i for i, r in enumerate(subset) if r.get("hard_negative") and r["intent"] != "forget"]
    print(f"\nhard negatives in the subset read as forget (of {len(hard)}): " + ", ".join(
        f"{name} {sum(p[i] == 'forget' for i in hard)}" for name, p in predicted.items()))
    forgets = [(r, o) for r, o in zip(subset, readings, strict=True)
               if r["intent"] == "forget" and o.intent == "forget" and o.by == "llm"]
    said_all = [r for r, o in forgets if o.scope == "all"]
    real_all = [r for r, _ in forgets if r.get("scope") == "all"]
    print(f"llm scope 'all' on forgets it read: said {len(said_all)}, right "
          f"{sum(r.get('scope') == 'all' for r in said_all)}, of {len(real_all)} real")
    timings.sort()
    print(f"llm cost per turn (ms, one call a turn, {len(timings)} turns): p50 "
          f"{statistics.median(timings):.0f}, p95 {timings[int(len(timings) * 0.95)]:.0f}, "
          f"total {sum(timings) / 1000:.0f} s; fallbacks to the rules {llm.fallbacks} of "
          f"{llm.calls}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dev-only", action="store_true")
    parser.add_argument("--conversations", type=Path,
                        default=Path(__file__).parents[2] / "shared" / "data" / "locomo-dev",
                        help="LoCoMo conversations: forgets read in ordinary talk")
    parser.add_argument("--llm-url", help="an OpenAI-compatible endpoint: add the LLM column")
    parser.add_argument("--llm-model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--llm-limit", type=int,
                        help="the LLM table on the first N held-out rows of each intent x lang")
    parser.add_argument("--llm-timeout-s", type=float, default=120.0)
    parser.add_argument("--no-new-writer", action="store_true",
                        help=f"do not read {NEW_WRITER} (it is read once, at the end)")
    parser.add_argument("--newest", action="store_true",
                        help=f"also read {NEWEST_WRITER} (once, after the choices)")
    parser.add_argument("--fresh", action="store_true",
                        help=f"also read {FRESH_WRITER} (once, after the choices)")
    args = parser.parse_args()
    rows = load()
    print(f"corpus: {len(rows)} rows, {Counter(r['writer'] for r in rows)}")
    print("\n## leave-one-writer-out inside DEV", DEV)
    print(table(leave_one_writer_out(rows, DEV)))
    if args.dev_only:
        return
    train = [r for r in rows if r["writer"] in DEV]
    test = [r for r in rows if r["writer"] in HELD_OUT]
    fitted = detectors(train)
    print("\n## HELD-OUT writers", HELD_OUT, "(trained on DEV only)")
    print(table({name: scores(test, predicted) for name, predicted in run(fitted, test).items()}))
    print("\n## hard negatives among held-out rows: wrongly read as forget")
    hard = [r for r in test if r.get("hard_negative") and r["intent"] != "forget"]
    for name, predicted in run(fitted, hard).items():
        print(f"{name}: {sum(p == 'forget' for p in predicted)} of {len(hard)}")
    if args.conversations.is_dir():
        talk = conversation_turns(args.conversations)
        print(f"\n## ordinary conversation ({args.conversations.name}, {len(talk)} turns): "
              "turns read as forget (there are none) and as change")
        for name, detector in fitted.items():
            read = [r.intent for r in detector.read(talk)]
            print(f"{name}: forget {read.count('forget')}, change {read.count('change')}")
    print("\n## cost per turn (ms), one turn a call, 300 held-out turns")
    for name, ms in cost_per_turn(fitted, test[:300]).items():
        print(f"{name}: {ms:.3f}")
    if args.llm_url:
        llm_column(args, fitted, test)
    if not args.no_new_writer:
        new_writer(rows, fitted, NEW_WRITER)
    if args.newest:
        new_writer(rows, fitted, NEWEST_WRITER)
    if args.fresh:
        new_writer(rows, fitted, FRESH_WRITER)


def new_writer(rows: Sequence[dict[str, Any]], fitted: dict[str, IntentDetector],
               writers: Sequence[str]) -> None:
    """A new held-out writer's figures, in aggregate only (its rows are never printed)."""
    test = [r for r in rows if r["writer"] in writers]
    if not test:
        return
    print("\n## NEW held-out writer", writers, f"({len(test)} rows; trained on DEV only)")
    print(table({name: scores(test, predicted) for name, predicted in run(fitted, test).items()}))
    hard = [r for r in test if r.get("hard_negative") and r["intent"] != "forget"]
    print(f"hard negatives read as forget (of {len(hard)}): " + ", ".join(
        f"{name} {sum(p == 'forget' for p in predicted)}"
        for name, predicted in run(fitted, hard).items()))


if __name__ == "__main__":
    main()
