"""The CPU cost of recall's ranking in process: episode ranking, late interaction, merge,
fusion and assembly over fixed candidates, per question.

For comparing two trees of ``strata/recall`` on a shared, loaded machine, where an HTTP
latency A/B is dominated by the load: the candidates are built once from the LoCoMo dev
conversations (every turn a record with its speaker, date and session, every two
neighbouring turns an exchange; each question's 30 turns and 30 exchanges with the most
query words, with deterministic raw similarities), the late-interaction scorer is a
deterministic stand-in (word overlap per query word), so the same inputs reach
``fuse_granularities``, ``score_hits`` and ``assemble`` in either tree. Each question is
ranked ``--repeat`` times and its fastest time kept (what the code costs, not what the
neighbours took); the p50 / p95 over questions and the total are printed.

Run it with each tree on the path, alternating (the trees' own ``strata``)::

    PYTHONPATH=/tmp/old .venv/bin/python bench/recall_ranking_cost.py --json old.json
    PYTHONPATH=/tmp/new .venv/bin/python bench/recall_ranking_cost.py --json new.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO))  # bench.common; strata comes first from PYTHONPATH if given

from bench.common.workload import locomo_users  # noqa: E402
from strata.models import Layer, RecallRequest, SearchHit, StoredRecord  # noqa: E402
from strata.recall.assembly import LayerCandidates, assemble  # noqa: E402
from strata.recall.granularity import fuse_granularities  # noqa: E402
from strata.recall.recipes import DEFAULT  # noqa: E402
from strata.recall.routing import Route, RouteDecision  # noqa: E402
from strata.recall.scoring import ScoredItem, score_hits  # noqa: E402

CANDIDATES = 30


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _record(rid: str, text: str, when: datetime, session: str, speaker: str,
            members: list[str] | None = None) -> StoredRecord:
    metadata: dict[str, object] = {"speaker": speaker}
    if members:
        metadata = {"type": "exchange", "members": members}
    return StoredRecord(id=rid, text=text, created_at=when.timestamp(),
                        updated_at=when.timestamp(), payload={
                            "kind": "episode", "event_time": when.isoformat(),
                            "metadata": metadata,
                            "provenance": {"session_id": session, "turn_ids": [rid]}})


def _hit(record: StoredRecord, query: set[str]) -> SearchHit:
    overlap = len(query & _words(record.text))
    return SearchHit(record=record, score=0.0, parts={
        "dense": min(1.0, 0.1 + 0.12 * overlap), "lexical": 2.5 * overlap})


def _late(query: str, texts: Sequence[str]) -> list[list[float]]:
    words = sorted(_words(query))
    return [[0.9 if w in _words(t) else 0.2 + 0.01 * (len(t) % 7) for w in words]
            for t in texts]


Case = tuple[str, list[SearchHit], list[SearchHit], dict[str, StoredRecord]]


def cases(data: Path, limit: int) -> list[Case]:
    """Each question with its turn and exchange candidates, and its user's turns by id."""
    out = []
    for user in locomo_users(data, "bench"):
        turns: list[StoredRecord] = []
        exchanges: list[StoredRecord] = []
        for session in user.sessions:
            previous: StoredRecord | None = None
            for i, turn in enumerate(session.turns, start=1):
                rid = f"{session.session_id}:{i}"
                when = turn.created_at.replace(tzinfo=turn.created_at.tzinfo or timezone.utc)
                record = _record(rid, turn.content, when, session.session_id,
                                 str(turn.metadata.get("speaker", "")))
                turns.append(record)
                if previous is not None:
                    exchanges.append(_record(
                        f"x{rid}", f"{previous.text}\n{record.text}", when, session.session_id,
                        "", members=[previous.id, rid]))
                previous = record
        by_id = {r.id: r for r in turns}
        for question in user.questions:
            query = _words(question)
            best_turns = sorted(turns, key=lambda r: -len(query & _words(r.text)))[:CANDIDATES]
            best_pairs = sorted(exchanges,
                                key=lambda r: -len(query & _words(r.text)))[:CANDIDATES]
            turn_hits = [_hit(r, query) for r in best_turns]
            exchange_hits = [_hit(r, query) for r in best_pairs]
            out.append((question, turn_hits, exchange_hits, by_id))
        if len(out) >= limit:
            break
    return out[:limit]


def rank_once(question: str, turn_hits: list[SearchHit], exchange_hits: list[SearchHit],
              records: dict[str, StoredRecord], now: datetime) -> str:
    """One recall's ranking and assembly over the given candidates; its context."""
    query = _words(question)

    def fetch(ids: list[str]) -> list[SearchHit]:
        return [_hit(records[i], query) for i in ids if i in records]

    hits = fuse_granularities(turn_hits, exchange_hits, fetch, question, DEFAULT, _late)
    items = [ScoredItem(id=h.record.id, layer=Layer.EPISODES, kind="episode",
                        text=h.record.text,
                        created_at=datetime.fromisoformat(h.record.payload["event_time"]))
             for h in hits]
    scored = score_hits(Layer.EPISODES, "episode", hits, items, DEFAULT, now)
    request = RecallRequest(user_id="u", query=question, top_k=10, budget_tokens=500)
    decision = RouteDecision(route=Route.PERSONAL, layers=[Layer.EPISODES], reason="bench")
    response = assemble(request, decision, None, LayerCandidates(candidates=scored), DEFAULT,
                        lambda: [])
    return response.context


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "locomo-dev")
    p.add_argument("--questions", type=int, default=300)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    import strata

    work = cases(args.data, args.questions)
    now = datetime(2024, 1, 1, tzinfo=timezone.utc)
    contexts = [rank_once(q, t, x, r, now) for q, t, x, r in work]  # warm caches
    best = [float("inf")] * len(work)
    started = time.perf_counter()
    for _ in range(args.repeat):
        for i, (q, t, x, r) in enumerate(work):
            t0 = time.perf_counter()
            rank_once(q, t, x, r, now)
            best[i] = min(best[i], (time.perf_counter() - t0) * 1000)
    wall = time.perf_counter() - started
    ms = sorted(best)
    report = {"strata": str(Path(strata.__file__).parent), "questions": len(work),
              "repeat": args.repeat, "p50_ms": statistics.median(ms),
              "p95_ms": ms[int(0.95 * (len(ms) - 1))], "sum_of_best_ms": sum(ms),
              "wall_s": wall, "at": datetime.now(timezone.utc).strftime("%H:%M:%S"),
              # the same digest from two trees: every context identical
              "contexts_digest": hashlib.sha256("\0".join(contexts).encode()).hexdigest()[:16]}
    print(f"{report['strata']}: {len(work)} questions x {args.repeat}: fastest per question "
          f"p50 {report['p50_ms']:.3f} ms, p95 {report['p95_ms']:.3f} ms, sum "
          f"{report['sum_of_best_ms']:.1f} ms (wall {wall:.1f} s); contexts digest "
          f"{report['contexts_digest']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
