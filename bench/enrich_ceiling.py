"""Write-time enrichment with a local LLM (#38): what keywords written once per turn, off the
recall path, add to the first stage on LoCoMo — measured in process, on a subset.

The diagnosis of #38: a third of multi-hop and open-domain evidence is never a candidate,
because the question and the evidence share neither words nor anything MiniLM sees as
similar ("patriotic" / "serving my country", a console / a game's title). Here an LLM reads
each turn once (``Speaker: text``, as Strata stores it) and writes up to ten keywords a later
question might use that the turn does not contain (the kind or genre of what it names, the
interests, traits, values, jobs or life events it implies): the request of
``STRATA_ENRICHER=openai`` (``strata.extract.enrich``). The prompt and its three examples
are written for chat in general (none is a LoCoMo turn) and were fixed before any question
was scored; the answers are never read.

For each question of categories 1-4, each turn ranked by:

* ``dense``: MiniLM cosine of the question without the speakers' names to the turn;
* ``bm25``: BM25 over the turn's index terms (``strata.stores.lexical``);
* ``bm25+kw``: BM25 over the turn's terms and its keywords';
* ``dense+kw``: MiniLM cosine to ``turn \\n keywords``;
* ``kw``: BM25 over the keywords alone (a source of its own).

and the variants fuse them by reciprocal rank fusion (k = 60): ``today`` = dense ∪ bm25 (the
approximation of the personal layers' first stage that ``bench/entity_ceiling.py`` uses),
then each enriched variant. Per category: the share of evidence among the first ``--pool``
fused turns (the candidate ceiling) and among the first 10 (R@10 of the fused order alone —
no late interaction, excerpts or boosts, so it is not the service's R@10), and the MRR of
the first evidence turn.

The model is any OpenAI-compatible endpoint (``bench/local_llm.py`` serves the local
Qwen2.5-Coder-1.5B); replies are cached in ``--cache`` (JSON lines), so a second run reads no
model::

    .venv-llm/bin/python bench/local_llm.py --port 18089 &
    .venv/bin/python bench/enrich_ceiling.py --conversations conv-26,conv-30 \\
        --cache /tmp/enrich.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import time
import urllib.request
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from strata.eval.locomo import CATEGORIES, conversation_sessions, turn_text
from strata.extract.enrich import FREQUENCY_PENALTY, MAX_TOKENS, messages_for
from strata.recall.speakers import without_speakers
from strata.stores.embedders import MiniLMEmbedder
from strata.stores.lexical import bm25_term_scores, tokenize

RRF_K = 60
DEV = ("conv-26", "conv-41")  # read while building the entity index (bench/entity_ceiling.py)
VARIANTS: dict[str, tuple[str, ...]] = {
    "today (dense ∪ bm25)": ("dense", "bm25"),
    "dense ∪ bm25+kw": ("dense", "bm25+kw"),
    "dense+kw ∪ bm25": ("dense+kw", "bm25"),
    "dense+kw ∪ bm25+kw": ("dense+kw", "bm25+kw"),
    "dense ∪ bm25 ∪ kw": ("dense", "bm25", "kw"),
}


class Keywords:
    """Each text's keywords from the model, cached by the text's hash."""

    def __init__(self, url: str, cache: Path, model: str = "local") -> None:
        self._url, self._cache, self._model = url.rstrip("/"), cache, model
        self._known: dict[str, str] = {}
        if cache.exists():
            for line in cache.read_text().splitlines():
                row = json.loads(line)
                self._known[row["key"]] = row["keywords"]
        self.asked, self.seconds = 0, 0.0

    def __call__(self, text: str) -> str:
        key = hashlib.sha256(text.encode()).hexdigest()
        if key not in self._known:
            body = {"model": self._model, "temperature": 0, "max_tokens": MAX_TOKENS,
                    "frequency_penalty": FREQUENCY_PENALTY, "messages": messages_for(text)}
            request = urllib.request.Request(self._url + "/chat/completions",
                                             data=json.dumps(body).encode(),
                                             headers={"Content-Type": "application/json"})
            started = time.perf_counter()
            with urllib.request.urlopen(request, timeout=600) as response:
                reply = json.load(response)["choices"][0]["message"]["content"]
            self.seconds += time.perf_counter() - started
            self.asked += 1
            self._known[key] = " ".join(str(reply).split())
            with self._cache.open("a") as f:
                f.write(json.dumps({"key": key, "text": text, "keywords": self._known[key]})
                        + "\n")
        return self._known[key]


def _rrf(rankings: Sequence[Sequence[int]], pool: int) -> list[int]:
    score: dict[int, float] = defaultdict(float)
    for ranking in rankings:
        for rank, i in enumerate(ranking[:pool]):
            score[i] += 1.0 / (RRF_K + rank + 1)
    return sorted(score, key=lambda i: -score[i])


def _lexical(query: list[str], terms: list[list[str]]) -> list[int]:
    scores = np.asarray(bm25_term_scores(query, terms))
    return [int(i) for i in np.argsort(-scores) if scores[i] > 0]


def _evidence(raw: Sequence[str]) -> set[str]:
    return {e.strip() for item in raw for e in str(item).split(";") if e.strip()}


def run(path: Path, model: MiniLMEmbedder, keywords: Keywords, pool: int
        ) -> list[tuple[str, dict[str, tuple[float, float, float]]]]:
    """(category, {variant: (pool share, top-10 share, reciprocal rank)}) per question."""
    conv = json.loads(path.read_text())
    turns = [t for _, ts in conversation_sessions(conv) for t in ts]
    ids = [str(t["dia_id"]) for t in turns]
    texts = [turn_text(t) for t in turns]
    speakers = sorted({str(t["speaker"]) for t in turns})
    started = time.perf_counter()
    words = []
    for n, text in enumerate(texts, 1):
        words.append(keywords(text))
        if n % 50 == 0:
            print(f"  {path.stem}: {n}/{len(texts)} turns' keywords "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
    plain = model.encode(texts)
    enriched = model.encode([f"{t}\n{w}" for t, w in zip(texts, words, strict=True)])
    terms = [tokenize(t) for t in texts]
    terms_kw = [tokenize(f"{t} {w}") for t, w in zip(texts, words, strict=True)]
    kw_only = [tokenize(w) for w in words]
    rows = []
    for q in conv["qa"]:
        if q.get("category") not in CATEGORIES or not q.get("evidence"):
            continue
        question = str(q["question"])
        evidence = _evidence(q["evidence"])
        query = model.encode([without_speakers(question, speakers) or question])[0]
        asked = tokenize(question)
        rankings = {"dense": [int(i) for i in np.argsort(-(plain @ query))],
                    "dense+kw": [int(i) for i in np.argsort(-(enriched @ query))],
                    "bm25": _lexical(asked, terms), "bm25+kw": _lexical(asked, terms_kw),
                    "kw": _lexical(asked, kw_only)}
        outcome = {}
        for name, sources in VARIANTS.items():
            fused = [ids[i] for i in _rrf([rankings[s] for s in sources], pool)]
            first = next((rank for rank, m in enumerate(fused, 1) if m in evidence), None)
            outcome[name] = (len(evidence & set(fused[:pool])) / len(evidence),
                             len(evidence & set(fused[:10])) / len(evidence),
                             1.0 / first if first else 0.0)
        rows.append((CATEGORIES[int(q["category"])], outcome))
    return rows


def table(rows: list[tuple[str, dict[str, tuple[float, float, float]]]], pool: int,
          title: str) -> list[str]:
    cats = [c for c in CATEGORIES.values() if any(r[0] == c for r in rows)]
    head = ["variant", *[f"{c} (n={sum(r[0] == c for r in rows)})" for c in cats],
            f"all (n={len(rows)})"]
    out = [f"### {title}: evidence among the first {pool} / first 10 fused turns; MRR", "",
           "| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for variant in VARIANTS:
        cells = [variant]
        for cat in [*cats, "all"]:
            part = [r[1][variant] for r in rows if cat in ("all", r[0])]
            cells.append(" / ".join(f"{statistics.fmean(v[i] for v in part):.3f}"
                                    for i in range(3)))
        out.append("| " + " | ".join(cells) + " |")
    return out


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--data", type=Path,
                   default=Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev")
    p.add_argument("--conversations", default="conv-26,conv-30")
    p.add_argument("--url", default="http://127.0.0.1:18089/v1", help="OpenAI-compatible")
    p.add_argument("--cache", type=Path, required=True, help="the model's replies (JSON lines)")
    p.add_argument("--pool", type=int, default=30)
    args = p.parse_args(argv)
    model = MiniLMEmbedder()
    keywords = Keywords(args.url, args.cache)
    by_conv = {}
    for name in args.conversations.split(","):
        by_conv[name] = run(args.data / f"{name}.json", model, keywords, args.pool)
    dev = [r for name, rows in by_conv.items() if name in DEV for r in rows]
    held = [r for name, rows in by_conv.items() if name not in DEV for r in rows]
    lines = []
    if dev:
        lines += [*table(dev, args.pool, "developed on (" + ", ".join(
            n for n in by_conv if n in DEV) + ")"), ""]
    if held:
        lines += [*table(held, args.pool, "held out (" + ", ".join(
            n for n in by_conv if n not in DEV) + ")"), ""]
    if keywords.asked:
        lines.append(f"the model: {keywords.asked} turns asked, "
                     f"{keywords.seconds / keywords.asked:.2f} s a turn")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
