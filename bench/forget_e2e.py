"""Forgets end to end, through the shard's turn path (issue #36): for each labelled turn of
the intent corpus, a fresh user holds the memory the turn is about and others, and the turn is
said. A forget row passes when the memory it names is forgotten and no other is (all of them,
for a forget of everything); any other row passes when nothing is forgotten.

Two variants of what the user holds:

* ``plain`` — the memory is the row's labelled target verbatim (else the turn before, else
  the turn), beside one unrelated memory;
* ``hard`` — the memory is the turn before when the row has one (what the user really said),
  else the target said inside a longer sentence by one of three fixed templates per language
  ("About <target> — I told you that last week."), beside four fixed unrelated memories of
  the same user (``DISTRACTORS``), so "the right one and nothing else" meets distractors.

Matchers, in the same run and over the same turns: ``names`` (the target's words only: the
matcher before the match by meaning — the baseline) and ``meaning``
(``forget_match.by_meaning`` as well, the default). Detectors: the rules alone, and the
shipped detector (``learned``: learned + rules). Splits: the development writers (the
detector's training rows: an upper bound) and the held-out writers. A row whose turn
neither the rules nor the shipped detector reads as a forget is counted without being said
(the shard cannot forget anything on it: a pass for a non-forget row, a miss for a forget);
``--all-rows`` says every row, as the first version of this bench did.

    .venv/bin/python bench/forget_e2e.py                 # packaged MiniLM
    .venv/bin/python bench/forget_e2e.py --embedder hash
    .venv/bin/python bench/forget_e2e.py --tune          # choose floor/margin on DEV only
    .venv/bin/python bench/forget_e2e.py --extra-held-out w12_teen  # a new writer, apart
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from intents import DEV, HELD_OUT, load

from strata.errors import InvalidInput
from strata.extract.base import Intent
from strata.extract.intent_model import Utterance, packaged_detector
from strata.extract.intents import detect_intent
from strata.extract.pii import find_pii
from strata.layers.forget_match import EVERYTHING, MatchPolicy, Rival, by_meaning, names
from strata.layers.memories import LongTermMemory
from strata.layers.memory_models import MemoryCreate
from strata.layers.summarize import RuleSummarizer
from strata.models import MemoryKind, Scope
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder, MiniLMEmbedder, WrappedEmbedder
from strata.stores.ports import Embedder
from strata.stores.redis import RedisStore
from strata.stores.redis_ports import ForgetRequest
from strata.stores.redis_server import EmbeddedRedis
from strata.testing.fake_vectors import FakeVectorStore

OTHER = {"en": "I adopted a grey cat named Pixel last spring.",
         "zh": "我去年春天领养了一只叫小灰的猫。"}
# the hard variant's other memories of the user: fixed, unrelated to each other
DISTRACTORS = {
    "en": ["I adopted a grey cat named Pixel last spring.",
           "My sister Ana lives in Porto and works night shifts as a nurse.",
           "I'm training for a half marathon in October, three runs a week.",
           "We repainted the kitchen a pale green over the long weekend."],
    "zh": ["我去年春天领养了一只叫小灰的猫。",
           "我姐姐住在杭州，在医院上夜班当护士。",
           "我在准备十月份的半程马拉松，每周跑三次。",
           "长周末我们把厨房刷成了浅绿色。"]}
# the hard variant's named memory when the row has no turn before: the target said inside a
# longer sentence (the n-th row takes template n mod 3)
TEMPLATES = {
    "en": ["About {t} — I told you that last week.",
           "Just so you have it: {t}, that came up when we talked on Monday.",
           "I mentioned {t} to you a while ago, when I was sorting things out."],
    "zh": ["关于{t}——我上周跟你说过。",
           "顺便说一下：{t}，这是周一聊天时提到的。",
           "我之前整理东西的时候跟你提过{t}。"]}
VARIANTS = ("plain", "hard")
MATCHERS = {"names": MatchPolicy(meaning=False), "meaning": MatchPolicy()}


def held(row: dict[str, Any], n: int, variant: str) -> tuple[str, list[str]]:
    """What the user holds for ``row``: the memory it is about, and the others."""
    if variant == "plain":
        return row.get("target") or row.get("previous") or row["text"], [OTHER[row["lang"]]]
    if row.get("previous"):
        about = row["previous"]
    else:
        about = TEMPLATES[row["lang"]][n % 3].format(t=row.get("target") or row["text"])
    return about, DISTRACTORS[row["lang"]]


class Remembered(WrappedEmbedder[Embedder]):
    """The embedder with each text's vector kept: the distractors and the framing of the
    turns repeat across rows, and the vectors are the same however often they are asked for
    (the bench's CPU goes to the turn path, not to encoding one sentence 2,000 times)."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self._known: dict[str, npt.NDArray[np.float32]] = {}

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._known))
        if missing:
            self._known.update(zip(missing, self.inner.encode(missing), strict=True))
        return np.stack([self._known[t] for t in texts]) if texts else self.inner.encode([])


@dataclass
class Call:
    """One ``forget_matching`` call the tuning run saw: the request and the ranked pool."""

    target: str
    said: str
    extent: str | None
    ids: list[str] = field(default_factory=list)
    rivals: list[Rival] = field(default_factory=list)


class Recorder(LongTermMemory):
    """Records each forget's ranked pool and hides nothing, so that what one call hides
    never changes what the next sees: the tuning grid replays the calls offline."""

    calls: list[Call]

    def forget_matching(self, scope: Scope, target: str, viewer: str | None = None,
                        speaker: str | None = None, before: ForgetRequest | None = None,
                        said: str = "", extent: str | None = None) -> dict[str, float]:
        call = Call(target, said, extent)
        if target != EVERYTHING:
            pool = self.forget_rivals(scope, target, said, viewer, speaker, before)
            call.ids = [record.id for _, record, _ in pool]
            call.rivals = [rival for _, _, rival in pool]
        self.calls.append(call)
        return {}


def build(detector: str, embedder: Embedder, redis: RedisStore, policy: MatchPolicy,
          recorder: bool = False) -> tuple[SessionShardService, LongTermMemory]:
    vectors = FakeVectorStore()
    vectors.ensure_collections(embedder.dim)
    lt = (Recorder(vectors, embedder) if recorder
          else LongTermMemory(vectors, embedder, forget_policy=policy))
    shard = SessionShardService(0, Settings(intent_detector=detector), redis, RuleSummarizer(),
                                longterm=lambda: lt)
    return shard, lt


def say(shard: SessionShardService, scope: Scope, row: dict[str, Any], n: int, variant: str
        ) -> tuple[str, list[str], set[str]] | None:
    """The user of ``row`` set up and the turn said: (named id, other ids, forgotten ids);
    None when the memory holds a secret (never stored, so nothing to forget)."""
    about, others = held(row, n, variant)
    try:
        named = shard.create_memory(scope, MemoryCreate(kind=MemoryKind.EPISODE, text=about))
    except InvalidInput:  # a secret ("my VPN password hint"): never stored to forget
        return None
    other_ids = [shard.create_memory(scope, MemoryCreate(kind=MemoryKind.EPISODE, text=t))
                 ["memory"]["id"] for t in others]
    if row.get("previous"):
        shard.append_turn(scope, "s", "user", row["previous"])
    ack = shard.append_turn(scope, "s", "user", row["text"])
    return named["memory"]["id"], other_ids, set(ack.intents.forgotten)


def passes(row: dict[str, Any], named: str, others: Sequence[str], gone: set[str]) -> bool:
    if row["intent"] != "forget":
        return not gone
    if row.get("scope") == "all":  # a forget of everything takes the others too
        return named in gone
    return named in gone and not gone.intersection(others)


def run(rows: list[dict[str, Any]], detector: str, embedder: Embedder, redis: RedisStore,
        variant: str, policy: MatchPolicy, run_id: str, said_forget: set[int] | None = None
        ) -> Counter[str]:
    """One run; its users (``run_id``-n) are its own: the Redis is shared by all runs, and a
    user of an earlier run would bring its session's turns and forget log along. With
    ``said_forget`` (the rows ``could_forget`` keeps), a row outside it is counted without
    being said: no detector reads a forget in its turn, so the shard forgets nothing on it
    (a pass for a non-forget row, a miss for a forget) whatever the matcher."""
    shard, _ = build(detector, embedder, redis, policy)
    out: Counter[str] = Counter()
    for n, row in enumerate(rows):
        key = f"{row['lang']} {'forget' if row['intent'] == 'forget' else 'other'}"
        if said_forget is not None and n not in said_forget:
            if find_pii(held(row, n, variant)[0]):  # what ``say`` would refuse to store
                out["skipped"] += 1
                continue
            out[f"{key} n"] += 1
            out[f"{key} pass"] += row["intent"] != "forget"
            out["counted"] += 1
            continue
        scope = Scope(tenant="bench", user=f"{run_id}-{n}")
        said = say(shard, scope, row, n, variant)
        if said is None:
            out["skipped"] += 1
            continue
        out[f"{key} n"] += 1
        out[f"{key} pass"] += passes(row, *said)
    return out


def cells(counts: Counter[str]) -> str:
    return " | ".join(f"{k}: {counts[k + ' pass']}/{counts[k + ' n']} "
                      f"({counts[k + ' pass'] / max(1, counts[k + ' n']):.2f})"
                      for k in ("en forget", "zh forget", "en other", "zh other"))


def could_forget(rows: list[dict[str, Any]]) -> list[int]:
    """The rows whose turn the rules or the shipped detector read as a forget (the turn
    path reads the same turn with the same turn before): the only ones on which the shard
    can forget anything, whatever the matcher."""
    read = packaged_detector().read([Utterance(r["text"], r.get("previous")) for r in rows])
    return [n for n, (r, reading) in enumerate(zip(rows, read, strict=True))
            if reading.intent == "forget" or detect_intent(r["text"]) is Intent.FORGET]


def tune(rows: list[dict[str, Any]], embedder: Embedder, redis: RedisStore) -> None:
    """The grid of floor x margin x dense weight, replayed on DEV's recorded pools."""
    asked = could_forget(rows)
    forget_rows = sum(r["intent"] == "forget" for r in rows)
    print(f"DEV: {len(rows)} rows, {forget_rows} forgets; {len(asked)} read as forget",
          flush=True)
    recorded: list[tuple[str, dict[str, Any], str, list[str], list[Call]]] = []
    for variant in VARIANTS:
        shard, lt = build("learned", embedder, redis, MatchPolicy(), recorder=True)
        assert isinstance(lt, Recorder)
        for n in asked:
            lt.calls = []
            said = say(shard, Scope(tenant="tune", user=f"{variant}-{n}"), rows[n], n, variant)
            if said is not None:
                recorded.append((variant, rows[n], said[0], said[1], lt.calls))

    def fails(policy: MatchPolicy, lang: str) -> Counter[str]:
        out: Counter[str] = Counter()
        for variant, row, named, others, calls in recorded:
            if row["lang"] != lang:
                continue
            gone: set[str] = set()
            for call in calls:
                if call.target == EVERYTHING:
                    gone |= {named, *others}
                    continue
                chosen = by_meaning(call.target, call.said, call.extent, call.rivals, policy)
                chosen |= {i for i, r in enumerate(call.rivals)
                           if names(call.target, r.words, r.dense_target)}
                gone |= {call.ids[i] for i in chosen}
            kind = "forget" if row["intent"] == "forget" else "other"
            out[f"{variant} {kind}"] += not passes(row, named, others, gone)
        return out

    for lang in ("en", "zh"):
        base = fails(MatchPolicy(meaning=False), lang)
        print(f"{lang} names only: forget misses plain {base['plain forget']} hard "
              f"{base['hard forget']}; other turns failing plain {base['plain other']} hard "
              f"{base['hard other']}")
        results = []
        weights = (0.3, 0.5, 0.7) if lang == "en" else (0.5,)  # no cosine in Chinese
        for weight, floor, margin in itertools.product(
                weights, (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5),
                (0.05, 0.1, 0.15, 0.2, 0.25, 0.3)):
            policy = MatchPolicy(floor=floor, margin=margin, floor_zh=floor, margin_zh=margin,
                                 dense_weight=weight)
            got = fails(policy, lang)
            results.append(((got["plain other"] + got["hard other"],
                             got["plain forget"] + got["hard forget"], -floor, -margin),
                            weight, floor, margin, got))
        for _, weight, floor, margin, got in sorted(results)[:8]:
            print(f"{lang} w {weight} floor {floor} margin {margin}: forget misses plain "
                  f"{got['plain forget']} hard {got['hard forget']}; other turns failing plain "
                  f"{got['plain other']} hard {got['hard other']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embedder", choices=["minilm", "hash"], default="minilm")
    parser.add_argument("--tune", action="store_true",
                        help="choose the meaning match's floor and margin on DEV only")
    parser.add_argument("--extra-held-out", nargs="*", default=[],
                        help="new held-out writers, read apart (aggregate figures only)")
    parser.add_argument("--splits", nargs="*", default=["dev", "held-out"])
    parser.add_argument("--all-rows", action="store_true", help="say every row's turn, "
                        "also those no detector reads as a forget (counted unsaid otherwise)")
    parser.add_argument("--limit", type=int, default=0, help="the first N rows of each split "
                        "and language (a smoke run)")
    args = parser.parse_args()
    embedder: Embedder = Remembered(MiniLMEmbedder() if args.embedder == "minilm"
                                    else HashEmbedder(64))
    rows = load()
    splits = {"dev": DEV, "held-out": HELD_OUT}
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(Path(tmp)).start()
        try:
            redis = RedisStore(server.url, prefix="bench:")
            if args.tune:
                tune([r for r in rows if r["writer"] in DEV], embedder, redis)
                return
            chosen = [(s, splits[s]) for s in args.splits]
            chosen += [(f"new {w}", (w,)) for w in args.extra_held_out]
            for split, writers in chosen:
                subset = [r for r in rows if r["writer"] in writers]
                if args.limit:
                    subset = [r for lang in ("en", "zh") for r in [
                        r for r in subset if r["lang"] == lang and r["intent"] == "forget"
                    ][:args.limit] + [r for r in subset if r["lang"] == lang
                                      and r["intent"] != "forget"][:args.limit]]
                runs = [("rules", "plain", "names"), ("rules", "plain", "meaning")] + [
                    ("learned", variant, matcher) for variant in VARIANTS for matcher in MATCHERS]
                said_forget = None if args.all_rows else set(could_forget(subset))
                for detector, variant, matcher in runs:
                    started = time.perf_counter()
                    counts = run(subset, detector, embedder, redis, variant, MATCHERS[matcher],
                                 run_id=f"{split.replace(' ', '-')}-{detector}-"
                                 f"{variant}-{matcher}",
                                 said_forget=said_forget)
                    took = time.perf_counter() - started
                    print(f"{split:8} {detector:7} {variant:5} {matcher:7} " + cells(counts)
                          + f" [{counts['skipped']} skipped, {counts['counted']} counted "
                          f"unsaid, {took:.0f} s]", flush=True)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
