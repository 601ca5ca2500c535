"""LoCoMo-format retrieval evaluation through the public API only.

For each conversation a fresh user; every session's turns go through the batch turn API with
their real dates (both speakers are people: user turns prefixed with the speaker's name, who is
also named in the turn's ``metadata.speaker``); each
session is closed so extraction runs as in production; then every question of categories 1–4
goes through the recall API. Metrics follow ``shared/data/README.md``: recall@k over the
evidence dia_ids named by the items' provenance (items naming more than 2 turns count for
none), MRR of the first evidence hit, mean context tokens, recall latency, ingestion time;
beside them, the share of each answer's words the context holds (the answers are read to
score, never to recall), and the *turn MRR*: the first evidence turn's position counting every
turn the context shows before it (an item of two merged turns is two positions, its turns in
the order shown). MRR counts items, so merging turns into items raises it without moving any
evidence up the context; the turn MRR does not reward that.
"""

from __future__ import annotations

import json
import re
import statistics
import time
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from strata.client import Client
from strata.stores.lexical import tokenize
from strata.tokens import count_tokens

__all__ = ["EvalReport", "answer_words", "conversation_sessions", "evaluate", "format_table",
           "parse_session_date", "turn_rank", "turn_text"]

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
MAX_PROVENANCE_TURNS = 2
BATCH_TURNS = 500  # the service's default STRATA_MAX_BATCH_TURNS


def parse_session_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' → an aware datetime (UTC)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


class CategoryScore(BaseModel):
    questions: int = 0
    recall_at: dict[str, float] = Field(default_factory=dict)
    mrr: float = 0.0
    turn_mrr: float = 0.0  # by the first evidence turn's position among the turns shown
    # the share of the answer's words (index terms) the context holds, at the largest k: a
    # check that the context carries what the evidence says, not only the evidence's ids
    answer_words: float = 0.0


class QuestionResult(BaseModel):
    """One question's outcome at the largest k (for reading what was missed)."""

    conversation: str
    category: str
    question: str
    evidence: list[str]
    found: list[str]  # the evidence among the recalled items' turns
    first_hit_rank: int | None
    first_hit_turn: int | None = None  # its position among the turns the context shows
    answer_words: float | None = None  # None: the answer has no index terms


class EvalReport(BaseModel):
    recipe: str
    ks: list[int]
    conversations: int
    turns: int
    ingestion_s: float
    extraction_wait_s: float
    overall: CategoryScore
    by_category: dict[str, CategoryScore]
    context_tokens_mean: dict[str, float]
    latency_ms: dict[str, float]
    questions: list[QuestionResult] = Field(default_factory=list)


def turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shares a photo: {turn['blip_caption']}]"
    return text


def conversation_sessions(conv: dict[str, Any]) -> list[tuple[datetime, list[dict[str, Any]]]]:
    numbers = sorted(int(m.group(1)) for k in conv
                     if (m := re.fullmatch(r"session_(\d+)", k)))
    return [(parse_session_date(conv[f"session_{n}_date_time"]), conv[f"session_{n}"])
            for n in numbers]


def _ingest(client: Client, user: str, conv: dict[str, Any]) -> tuple[dict[str, str], int]:
    """Write every session's turns in batches; returns turn_id → dia_id and the turn count."""
    to_dia: dict[str, str] = {}
    for n, (when, turns) in enumerate(conversation_sessions(conv), start=1):
        session = f"s{n}"
        # no turn ids: the service numbers a new session's turns s<n>:1, s<n>:2, … (ids of
        # that form are the service's alone), which is what _known_ids relies on
        batch = [{"role": "user", "content": turn_text(turn),
                  "created_at": when + timedelta(seconds=30 * (i - 1)),
                  "metadata": {"speaker": turn["speaker"]}}
                 for i, turn in enumerate(turns, start=1)]
        for start in range(0, len(batch), BATCH_TURNS):
            chunk = turns[start:start + BATCH_TURNS]
            acks = client.add_turns(session, user, batch[start:start + BATCH_TURNS],
                                    auto_turn_id=False)["acks"]  # the service's ids
            to_dia.update({ack["turn_id"]: turn["dia_id"]
                           for ack, turn in zip(acks, chunk, strict=True)})
        client.close_session(session, user)
    return to_dia, len(to_dia)


def _wait_for_extraction(client: Client, timeout_s: float = 1800) -> float:
    """Poll /metrics until the long-term queues are empty."""
    started = time.monotonic()
    http = client._http  # the SDK's configured transport and key
    while time.monotonic() - started < timeout_s:
        text = http.get("/metrics").text
        backlog = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                      if line.startswith("strata_queue_backlog{"))
        if backlog == 0:
            return time.monotonic() - started
        time.sleep(1.0)
    raise TimeoutError("extraction did not drain in time")


def _hits(items: list[dict[str, Any]], to_dia: dict[str, str]) -> list[set[str]]:
    out = []
    for item in items:
        turn_ids = item.get("provenance", {}).get("turn_ids", [])
        if 0 < len(turn_ids) <= MAX_PROVENANCE_TURNS:
            out.append({to_dia[t] for t in turn_ids if t in to_dia})
        else:
            out.append(set())
    return out


def turn_rank(items: list[dict[str, Any]], to_dia: dict[str, str],
              evidence: set[str]) -> int | None:
    """The first evidence turn's position among the turns the items show, in order (an item
    naming more than 2 turns, or none, is one position and counts for none)."""
    position = 0
    for item in items:
        turn_ids = item.get("provenance", {}).get("turn_ids", [])
        if not 0 < len(turn_ids) <= MAX_PROVENANCE_TURNS:
            position += 1
            continue
        for turn_id in turn_ids:
            position += 1
            if to_dia.get(turn_id) in evidence:
                return position
    return None


def _known_ids(conv: dict[str, Any]) -> tuple[dict[str, str], int]:
    """turn_id → dia_id of an already ingested conversation (turn ids are session:n)."""
    to_dia = {f"s{n}:{i}": turn["dia_id"]
              for n, (_, turns) in enumerate(conversation_sessions(conv), 1)
              for i, turn in enumerate(turns, 1)}
    return to_dia, len(to_dia)


def evaluate(client: Client, data_dir: Path, ks: Sequence[int] = (5, 10, 20),
             recipe: str | None = None, budgets: dict[int, int] | None = None,
             limit_conversations: int | None = None, reuse_tag: str | None = None
             ) -> EvalReport:
    """Run the whole evaluation against a running Strata (``reuse_tag``: skip ingestion
    and question the users a previous run with that tag wrote)."""
    budgets = budgets or {k: max(500, 50 * k) for k in ks}
    files = sorted(Path(data_dir).glob("*.json"))[:limit_conversations]
    tag = reuse_tag or uuid.uuid4().hex[:6]
    print(f"users: locomo-<conversation>-{tag}", flush=True)
    convs = []
    started = time.monotonic()
    turns = 0
    for path in files:
        data = json.loads(path.read_text())
        user = f"locomo-{path.stem}-{tag}"
        to_dia, n = _known_ids(data) if reuse_tag else _ingest(client, user, data)
        turns += n
        convs.append((path.stem, user, to_dia, data["qa"]))
    ingestion_s = time.monotonic() - started
    wait_s = _wait_for_extraction(client)

    per_q: list[tuple[int, dict[int, float], float, float | None, float]] = []
    outcomes: list[QuestionResult] = []
    tokens: dict[int, list[int]] = {k: [] for k in ks}
    latencies: list[float] = []
    for name, user, to_dia, qa in convs:
        for q in qa:
            if q.get("category") not in CATEGORIES or not q.get("evidence"):
                continue
            evidence = set(q["evidence"])
            recall_at: dict[int, float] = {}
            reciprocal = by_turn = 0.0
            words: float | None = None
            for k in ks:
                t0 = time.perf_counter()
                resp = client.recall(user, str(q["question"]), top_k=k,
                                     budget_tokens=budgets[k], recipe=recipe)
                latencies.append((time.perf_counter() - t0) * 1000)
                tokens[k].append(count_tokens(resp["context"]))
                hits = _hits(resp["items"], to_dia)
                found: set[str] = set().union(*hits) if hits else set()
                recall_at[k] = len(evidence & found) / len(evidence)
                if k == max(ks):
                    rank = next((i for i, h in enumerate(hits, 1) if h & evidence), None)
                    reciprocal = 1.0 / rank if rank else 0.0
                    position = turn_rank(resp["items"], to_dia, evidence)
                    by_turn = 1.0 / position if position else 0.0
                    words = answer_words(str(q.get("answer", "")), resp["context"])
                    outcomes.append(QuestionResult(
                        conversation=name, category=CATEGORIES[int(q["category"])],
                        question=str(q["question"]), evidence=sorted(evidence),
                        found=sorted(evidence & found), first_hit_rank=rank,
                        first_hit_turn=position, answer_words=words))
            per_q.append((int(q["category"]), recall_at, reciprocal, words, by_turn))

    def score(rows: list[tuple[int, dict[int, float], float, float | None, float]]
              ) -> CategoryScore:
        if not rows:
            return CategoryScore()
        worded = [r[3] for r in rows if r[3] is not None]
        return CategoryScore(
            questions=len(rows),
            recall_at={str(k): round(statistics.fmean(r[1][k] for r in rows), 4) for k in ks},
            mrr=round(statistics.fmean(r[2] for r in rows), 4),
            turn_mrr=round(statistics.fmean(r[4] for r in rows), 4),
            answer_words=round(statistics.fmean(worded), 4) if worded else 0.0)

    lat = sorted(latencies)
    return EvalReport(
        recipe=recipe or "default", ks=list(ks), conversations=len(convs), turns=turns,
        ingestion_s=round(ingestion_s, 1), extraction_wait_s=round(wait_s, 1),
        overall=score(per_q),
        by_category={name: score([r for r in per_q if r[0] == c])
                     for c, name in CATEGORIES.items()},
        context_tokens_mean={str(k): round(statistics.fmean(v), 1) for k, v in tokens.items()
                             if v},
        latency_ms={"p50": round(lat[len(lat) // 2], 1) if lat else 0.0,
                    "p95": round(lat[int(len(lat) * 0.95)], 1) if lat else 0.0},
        questions=outcomes)


def answer_words(answer: str, context: str) -> float | None:
    """The share of the answer's index terms found in the context (None: it has none)."""
    wanted = set(tokenize(answer))
    return len(wanted & set(tokenize(context))) / len(wanted) if wanted else None


def format_table(report: EvalReport) -> str:
    ks = report.ks
    head = ["category", "n"] + [f"R@{k}" for k in ks] + ["MRR", "turn MRR", "answer words"]
    rows = [head]
    for name, sc in [*report.by_category.items(), ("overall", report.overall)]:
        rows.append([name, str(sc.questions)] + [f"{sc.recall_at.get(str(k), 0):.3f}"
                                                 for k in ks]
                    + [f"{sc.mrr:.3f}", f"{sc.turn_mrr:.3f}", f"{sc.answer_words:.3f}"])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.append(f"context tokens (mean): {report.context_tokens_mean}   "
                 f"recall latency ms: {report.latency_ms}")
    lines.append(f"ingestion: {report.turns} turns in {report.ingestion_s}s; extraction "
                 f"drained {report.extraction_wait_s}s later; recipe: {report.recipe}")
    return "\n".join(lines)
