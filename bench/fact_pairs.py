"""Facts worth keeping, measured like the intents (issue #36): precision and recall of the
(category, value) pairs the extraction keeps, on a labelled corpus written by writers the
rules were never shown (``tests/data/facts``).

The split was fixed before any row was read: ``DEV`` (sixteen writers: w7 LoCoMo-style chat
among friends, w14 voice notes, w15 group chat, the nine added on 2026-12-04, w38-w40 on
2026-12-05 and w43 on 2026-12-06, read first as unseen writers by the reader then shipped) is
developed on — its rows are also the packaged training rows of the learned reader
(``strata/extract/fact_corpus``), so the default path's DEV figures are training figures and
``--lowo`` gives the honest ones (the reader fitted on the other DEV writers); ``HELD_OUT``
(w8 assistant-user, w9 mixed registers) is only ever read as aggregate figures;
``NEW_HELD_OUT`` (w16 forum) is read with ``--final``, and ``NEWEST_HELD_OUT`` (w24
interviews, w32 long posts) with ``--newest`` and ``FRESH_HELD_OUT`` (w44 family chat) with
``--fresh``, after the choices are frozen. ``--errors`` lists misses and false facts, and only
for ``DEV`` rows.

Each row is one turn of a speaker (``speaker``; the turns before it, ``previous``, are the
context). Two extraction paths are measured on the same rows:
- ``rules``: ``RuleExtractor()`` alone;
- ``default``: the extractor ``make_extractor(Settings())`` builds (the shipped session-end
  path: the rules with the learned confirmation reader and the learned fact reader,
  ``strata/extract/fact_model.py``).
Both are followed by the shipped ``WriteFilter`` (what reaches the store); forget candidates
and keyless facts are left out (they are requests, not facts).

A fact's key gives its category by ``strata.extract.fact_keys.category_of`` (its table is
the one place that mapping is written); a key of no category (``note:``, ``decision:``,
``project.*``) is a false fact (a ``note:`` from advice is exactly what the corpus should
catch).
Values match loosely (``values_match``), the value with the words of its key after the
category (``_matched_text``: "pet.dog:luna" = "Luna" is "Luna dog luna"): lower-cased,
punctuation and stance words
("dislikes", "不喜欢", "no longer likes") and English stop words dropped, English words
crudely stemmed (-s, -es, -ing, -ed); a pair matches when the shorter side's tokens
(English) or characters (Chinese) are at least half found in the other's. Per row, each gold
pair is matched by at most one predicted pair of the same category (greedy).

    .venv/bin/python bench/fact_pairs.py              # dev and held-out tables, both paths
    .venv/bin/python bench/fact_pairs.py --lowo       # dev: the reader fitted without the writer
    .venv/bin/python bench/fact_pairs.py --final      # also w16, once, at the end
    .venv/bin/python bench/fact_pairs.py --final --newest --paths rules,eight,no-joint,default
    .venv/bin/python bench/fact_pairs.py --errors 40  # dev misses and false facts
    PYTHONPATH=/tmp/before .venv/bin/python bench/fact_pairs.py --paths rules  # old rules
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from strata.extract.base import Candidate, Extractor, Intent
from strata.extract.fact_keys import category_of
from strata.extract.filters import WriteFilter
from strata.extract.llm import make_extractor
from strata.extract.rules import RuleExtractor
from strata.models import MemoryKind, Role, Turn, utcnow
from strata.settings import Settings

CORPUS = Path(__file__).parents[1] / "tests" / "data" / "facts"
DEV = ("w7_friends_chat", "w14_voice_notes", "w15_group_chat", "w19_dating_app",
       "w20_support_chat", "w21_language_exchange", "w22_workplace_chat", "w23_family_group",
       "w28_travel_hostel", "w29_fitness_app", "w30_neighbourhood", "w31_assistant_user",
       "w38_discord_gamers", "w39_parents_forum", "w40_catchup_friends", "w43_reddit_threads")
PREVIOUS_DEV = DEV[:3]  # the development writers before 2026-12-04's five
EIGHT_DEV = DEV[:8]  # the development writers before 2026-12-04 evening's four (w28-w31)
HELD_OUT = ("w8_assistant_user", "w9_mixed_registers")
NEW_HELD_OUT = ("w16_forum",)
# w24 written 2026-12-04 afternoon, read after that day's choices; w32 written with w28-w31
# (2026-12-04, evening), read once after the evening's choices
NEWEST_HELD_OUT = ("w24_interviews", "w32_long_posts")
# written with w43 (2026-12-06), read once after that session's choices (--fresh)
FRESH_HELD_OUT = ("w44_whatsapp_family",)
NEGATIVE_KINDS = ("advice", "question", "quote", "hypothetical", "other_person", "reminder",
                  "smalltalk", "sarcasm/joke", "sarcasm", "joke")

_DISLIKE = re.compile(r"^(?:dislikes|no longer likes|doesn't like|does not like)\s+|"
                      r"^(?:不喜欢|不再喜欢|讨厌)", re.I)
_STOP = {"a", "an", "the", "my", "our", "his", "her", "their", "to", "of", "in", "at", "on",
         "for", "with", "and", "is", "are", "i", "me", "it", "as", "from", "by", "s"}


def _stem(word: str) -> str:
    for suffix in ("ing", "es", "ed", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _units(value: str) -> list[str]:
    text = _DISLIKE.sub("", value.strip().lower())
    units = [_stem(w) for w in re.findall(r"[a-z0-9']+", text) if w not in _STOP]
    return units + re.findall(r"[\u4e00-\u9fff]", text)


def values_match(predicted: str, gold: str) -> bool:
    """Loose value match (module docstring): half of the shorter side found in the other."""
    a, b = _units(predicted), _units(gold)
    if not a or not b:
        return False
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    found = sum(1 for u in short if u in long_)
    return found / len(short) >= 0.5


def load(writers: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    for writer in writers:
        path = CORPUS / f"{writer}.jsonl"
        if path.exists():
            rows += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
                     if line.strip()]
    return rows


def _turn(row: dict[str, Any], n: int) -> Turn:
    metadata = {"speaker": row["speaker"]} if row.get("speaker") else {}
    return Turn(turn_id=f"r{n}", session_id=f"s{n}", user_id="u", role=Role.USER,
                content=row["text"], metadata=metadata,
                created_at=utcnow() - timedelta(minutes=1))


def _previous(row: dict[str, Any]) -> str | None:
    before = row.get("previous")
    if isinstance(before, list):
        before = before[-1] if before else None
    return str(before) if before else None


def predicted_pairs(extractor: Extractor, row: dict[str, Any], n: int
                    ) -> list[tuple[str, str, str]]:
    """(category, value, key) of the facts the path keeps for one row."""
    turn = _turn(row, n)
    if isinstance(extractor, RuleExtractor):
        cands: list[Candidate] = extractor.extract([turn], previous=_previous(row))
    else:
        cands = extractor.extract([turn])
    kept = WriteFilter().apply(cands).kept
    return [(category_of(c.key or "", c.value or ""), _matched_text(c.key or "", c.value or ""),
             c.key or "") for c in kept
            if c.kind is MemoryKind.FACT and c.key and c.intent is not Intent.FORGET]


def _matched_text(key: str, value: str) -> str:
    """What a fact's value is compared by: the value and the key's words after its category
    ("pet.dog:luna" = "Luna" → "Luna dog luna"; "constraint.allergy:cats" = "allergic" →
    "allergic allergy cats"): the key names what the value is about."""
    tail = re.split(r"[.:]", key, maxsplit=1)[1:] if ("." in key or ":" in key) else []
    return " ".join([value, *(re.split(r"[.:]", tail[0]) if tail else [])])


def match_row(predicted: Sequence[tuple[str, str, str]], gold: Sequence[dict[str, str]]
              ) -> tuple[int, list[int], list[int]]:
    """True positives, and the indexes of unmatched predicted and gold pairs."""
    free = list(range(len(gold)))
    false = []
    for i, (category, value, _) in enumerate(predicted):
        hit = next((g for g in free if gold[g]["category"] == category
                    and values_match(value, gold[g]["value"])), None)
        if hit is None:
            false.append(i)
        else:
            free.remove(hit)
    return len(predicted) - len(false), false, free


class Tally:
    """Counts of one slice of rows."""

    def __init__(self) -> None:
        self.rows = self.gold = self.predicted = self.tp = self.false_rows = 0

    def add(self, gold: int, predicted: int, tp: int) -> None:
        self.rows += 1
        self.gold += gold
        self.predicted += predicted
        self.tp += tp
        self.false_rows += int(predicted > tp)

    def line(self, name: str) -> str:
        p = self.tp / self.predicted if self.predicted else float("nan")
        r = self.tp / self.gold if self.gold else float("nan")
        return (f"  {name:<26} rows {self.rows:>4}  gold {self.gold:>4}  kept {self.predicted:>4}"
                f"  tp {self.tp:>4}  P {p:5.3f}  R {r:5.3f}  rows with a false fact "
                f"{self.false_rows:>3}")


def evaluate(extractor: Extractor, rows: Sequence[dict[str, Any]],
             errors: Callable[[dict[str, Any], list[tuple[str, str, str]], list[int],
                               list[int]], None] | None = None
             ) -> tuple[dict[str, Tally], list[float]]:
    tallies: dict[str, Tally] = defaultdict(Tally)
    costs = []
    for n, row in enumerate(rows):
        start, cpu = time.perf_counter(), time.process_time()
        predicted = predicted_pairs(extractor, row, n)
        costs.append((time.perf_counter() - start) * 1000)
        cpu_costs.append((time.process_time() - cpu) * 1000)
        gold = row.get("facts") or []
        tp, false, missed = match_row(predicted, gold)
        kind = str(row.get("kind") or "?")
        for name in ("all", f"lang {row['lang']}", f"writer {row['writer']}", f"kind {kind}"):
            tallies[name].add(len(gold), len(predicted), tp)
        for cat in {g["category"] for g in gold} | {p[0] for p in predicted}:
            g_n = sum(1 for g in gold if g["category"] == cat)
            p_n = [i for i, p in enumerate(predicted) if p[0] == cat]
            tallies[f"category {cat}"].add(g_n, len(p_n), sum(1 for i in p_n if i not in false))
        if errors is not None and (false or missed):
            errors(row, predicted, false, missed)
    return tallies, costs


cpu_costs: list[float] = []  # the CPU time of each row read, in the order of the wall costs


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def report(name: str, tallies: dict[str, Tally], costs: list[float]) -> None:
    cpu = cpu_costs[-len(costs):]
    print(f"{name}: p50 {statistics.median(costs):.2f} ms / p95 {_pct(costs, 0.95):.2f} ms / "
          f"p99 {_pct(costs, 0.99):.2f} ms per row (wall); CPU p50 {statistics.median(cpu):.2f}"
          f" / p95 {_pct(cpu, 0.95):.2f} ms (on a shared machine the CPU time is the cost)")
    negatives = [tallies[k] for k in tallies if k.startswith("kind ")
                 and k[5:] in NEGATIVE_KINDS]
    print(f"  hard negatives with a fact kept: {sum(t.false_rows for t in negatives)} of "
          f"{sum(t.rows for t in negatives)} rows")
    order = sorted(tallies, key=lambda k: (k.split()[0] != "all", k.split()[0], k))
    for key in order:
        if key.startswith("kind ") and key[5:] in NEGATIVE_KINDS:
            print(tallies[key].line(key + " (neg)"))
        else:
            print(tallies[key].line(key))


def _error_printer(most: int) -> Callable[[dict[str, Any], list[tuple[str, str, str]],
                                           list[int], list[int]], None]:
    shown = [0]

    def errors(row: dict[str, Any], predicted: list[tuple[str, str, str]],
               false: list[int], missed: list[int]) -> None:
        if shown[0] >= most:
            return
        shown[0] += 1
        print(f"  [{row['kind']}] {row['speaker']}: {row['text']}")
        for i in false:
            print(f"      FALSE {predicted[i][2]} = {predicted[i][1]!r}")
        for g in missed:
            print(f"      MISS  {row['facts'][g]}")
    return errors


def lowo(writers: Sequence[str], **reader: Any) -> tuple[dict[str, Tally], list[float]]:
    """Leave-one-writer-out over ``writers``: each writer's rows read by the rules with the
    learned reader fitted from the other writers' rows (and the default path's settings
    otherwise); the pooled tallies and costs."""
    from strata.extract.fact_model import LearnedFacts
    from strata.extract.intent_model import confirm_reader

    pooled: dict[str, Tally] = defaultdict(Tally)
    costs: list[float] = []
    for writer in writers:
        train = load([w for w in writers if w != writer])
        extractor = RuleExtractor(reads_confirm=confirm_reader,
                                  reads_facts=LearnedFacts(train, **reader))
        tallies, each = evaluate(extractor, load([writer]))
        costs += each
        for name, tally in tallies.items():
            into = pooled[name]
            into.rows += tally.rows
            into.gold += tally.gold
            into.predicted += tally.predicted
            into.tp += tally.tp
            into.false_rows += tally.false_rows
    return pooled, costs


def before_extractor() -> Extractor:
    """The default path as it was before 2026-12-04: the learned reader fitted on the three
    earlier development writers, without the knowledge marks, at its thresholds then (0.55,
    a value's surest token 0.8); today's value spans (no run across punctuation, no edge
    determiners) are in both."""
    from strata.extract.fact_model import LearnedFacts
    from strata.extract.intent_model import confirm_reader

    return RuleExtractor(reads_confirm=confirm_reader,
                         reads_facts=LearnedFacts(load(PREVIOUS_DEV), knowledge=False,
                                                     threshold=0.55, run_threshold=0.8))


def eight_writers_extractor() -> Extractor:
    """The default path's reader fitted on the eight development writers before w28-w31
    without the joint tagger: what shipped at 2026-12-04 evening's start."""
    from strata.extract.fact_model import LearnedFacts
    from strata.extract.intent_model import confirm_reader

    return RuleExtractor(reads_confirm=confirm_reader,
                         reads_facts=LearnedFacts(load(EIGHT_DEV), joint=0.0))


def no_joint_extractor() -> Extractor:
    """The default path's reader fitted on every development writer without the joint
    tagger (the ablation of ``LearnedFacts``'s ``joint``)."""
    from strata.extract.fact_model import LearnedFacts
    from strata.extract.intent_model import confirm_reader

    return RuleExtractor(reads_confirm=confirm_reader,
                         reads_facts=LearnedFacts(load(DEV), joint=0.0))


def no_knowledge_extractor() -> Extractor:
    """The default path's reader fitted on every development writer, without the knowledge
    marks (the ablation of the lexicon and gazetteer features)."""
    from strata.extract.fact_model import LearnedFacts
    from strata.extract.intent_model import confirm_reader

    return RuleExtractor(reads_confirm=confirm_reader,
                         reads_facts=LearnedFacts(load(DEV), knowledge=False))


def locomo_facts(data: Path, extractor: Extractor) -> list[Candidate]:
    """The facts ``extractor`` keeps (after the ``WriteFilter``) from LoCoMo conversations,
    each session read as one batch of its speakers' turns (as a session's end reads it)."""
    kept: list[Candidate] = []
    for path in sorted(data.glob("*.json")):
        conv = json.loads(path.read_text(encoding="utf-8"))
        sessions = sorted((k for k in conv if re.fullmatch(r"session_\d+", k)),
                          key=lambda k: int(k.split("_")[1]))
        for name in sessions:
            turns = [Turn(turn_id=str(t.get("dia_id") or f"{name}:{i}"),
                          session_id=f"{path.stem}:{name}", user_id="u", role=Role.USER,
                          content=str(t["text"]), metadata={"speaker": str(t["speaker"])},
                          created_at=utcnow()) for i, t in enumerate(conv[name])]
            cands = WriteFilter().apply(extractor.extract(turns)).kept
            kept += [c for c in cands if c.kind is MemoryKind.FACT and c.key
                     and c.intent is not Intent.FORGET]
    return kept


def locomo_report(data: Path, paths: dict[str, Extractor], sample: int) -> None:
    """How many facts each path keeps on LoCoMo, by category, and a sample of the facts the
    learned reader added (``metadata.read_by``)."""
    turns = sum(len(v) for p in data.glob("*.json")
                for k, v in json.loads(p.read_text(encoding="utf-8")).items()
                if re.fullmatch(r"session_\d+", k))
    for path, extractor in paths.items():
        facts = locomo_facts(data, extractor)
        cats = Counter(category_of(c.key or "", c.value or "") for c in facts)
        learned = [c for c in facts if c.metadata.get("read_by") == "fact_model"]
        print(f"[locomo {path}] {turns} turns: {len(facts)} facts kept "
              f"({len(learned)} added by the learned reader); by category: "
              + ", ".join(f"{k} {n}" for k, n in cats.most_common()))
        for c in learned[:sample]:
            print(f"    {c.speaker}: {c.key} = {c.value!r}  ← {c.text[:90]!r}")


def _path(name: str) -> Extractor:
    """The extraction path of that name (``--paths``)."""
    if name == "rules":
        return RuleExtractor()
    if name == "before":
        return before_extractor()
    if name == "no-joint":
        return no_joint_extractor()
    if name == "eight":
        return eight_writers_extractor()
    if name == "no-knowledge":
        return no_knowledge_extractor()
    return make_extractor(Settings())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--paths", default="rules,default",
                        help="comma-separated: rules, before, no-knowledge, default")
    parser.add_argument("--errors", type=int, default=0,
                        help="print up to N dev rows with a miss or a false fact")
    parser.add_argument("--dev-only", action="store_true")
    parser.add_argument("--lowo", action="store_true",
                        help="dev only: rules vs the learned reader fitted without the writer")
    parser.add_argument("--final", action="store_true",
                        help="also the new held-out writer (w16): read once, at the end")
    parser.add_argument("--newest", action="store_true",
                        help="also the newest held-out writers (w24, w32): read after the choices")
    parser.add_argument("--fresh", action="store_true",
                        help="also the freshest held-out writer (w44): read after the choices")
    parser.add_argument("--locomo", type=Path, default=None,
                        help="a LoCoMo directory: count the facts each path keeps there")
    parser.add_argument("--sample", type=int, default=25)
    parser.add_argument("--reader", default="",
                        help="with --lowo: the learned reader's settings, e.g. "
                             "threshold=0.5,knowledge=0")
    parser.add_argument("--rules-too", action="store_true",
                        help="with --lowo: also the rules alone")
    args = parser.parse_args()
    reader = {k: int(v) if v.isdigit() else float(v)
              for k, v in (kv.split("=") for kv in args.reader.split(",") if kv)}
    if args.locomo is not None:
        locomo_report(args.locomo, {p: _path(p) for p in args.paths.split(",")}, args.sample)
        return
    if args.lowo:
        rows = load(DEV)
        print(f"== dev, leave-one-writer-out ({', '.join(DEV)}; {len(rows)} rows)")
        if args.rules_too:
            tallies, costs = evaluate(RuleExtractor(), rows)
            report("[dev] rules", tallies, costs)
        tallies, costs = lowo(DEV, **reader)
        report(f"[dev LOWO] rules+learned {args.reader}", tallies, costs)
        return
    paths = {path: _path(path) for path in args.paths.split(",")}
    splits = {"dev": load(DEV)} if args.dev_only else {"dev": load(DEV),
                                                       "held-out": load(HELD_OUT)}
    if args.final:
        splits["new held-out"] = load(NEW_HELD_OUT)
    if args.newest:
        splits["newest held-out"] = load(NEWEST_HELD_OUT)
    if args.fresh:
        splits["fresh held-out"] = load(FRESH_HELD_OUT)
    for split, rows in splits.items():
        print(f"== {split} ({', '.join(sorted(Counter(r['writer'] for r in rows)))}; "
              f"{len(rows)} rows, {sum(len(r.get('facts') or []) for r in rows)} gold pairs)")
        for path, extractor in paths.items():
            # held-out rows are never shown
            shown = _error_printer(args.errors if split == "dev" else 0)
            tallies, costs = evaluate(extractor, rows, shown if args.errors else None)
            report(f"[{split}] {path}", tallies, costs)


if __name__ == "__main__":
    main()
