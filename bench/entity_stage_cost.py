"""What the entities stage (#38) costs a recall in process, and what the entity index costs
the hot index: the personal layers' search of the real ``RecallService`` over a real
``HotIndexStore`` (the in-memory durable double under it), with and without the stage, in
the same run.

Each LoCoMo dev conversation becomes a user: every turn an episode (its speaker, date and
session), every two neighbouring turns an exchange, vectors and token vectors from the
deterministic hash embedder (384-d; the ranking's and the index's work, not the model's).
The turns are written through the hot index (``upsert``), so its entity index is built by
the write path. Each question is recalled with the ``entities`` profile and with the
default, alternating, ``--repeat`` times, and its fastest time kept per recipe; the p50 /
p95 over questions, their ratio, and ``reach`` alone are printed. The entity index's heap is
measured with tracemalloc: an index of the same turns built apart, bytes per indexed turn.

    .venv/bin/python bench/entity_stage_cost.py --questions 300 --repeat 3
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
import tracemalloc
from datetime import timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO))

from bench.common.workload import locomo_users  # noqa: E402
from strata.entities import default_gazetteer, default_lexicon  # noqa: E402
from strata.models import Collection, Layer, RecallRequest, Scope, StoredRecord  # noqa: E402
from strata.recall.late import embed_queries  # noqa: E402
from strata.recall.recipes import DEFAULT, RECIPES  # noqa: E402
from strata.recall.service import RecallService  # noqa: E402
from strata.recall.speakers import without_speakers  # noqa: E402
from strata.stores.embedders import HashEmbedder  # noqa: E402
from strata.stores.hot import HotIndexStore  # noqa: E402
from strata.stores.hot_entities import UserEntities  # noqa: E402
from strata.testing.fake_vectors import FakeVectorStore  # noqa: E402

DIM = 384


def _records(user: Any, embedder: HashEmbedder) -> list[StoredRecord]:
    out: list[StoredRecord] = []
    for session in user.sessions:
        previous: StoredRecord | None = None
        for i, turn in enumerate(session.turns, start=1):
            when = turn.created_at.replace(tzinfo=turn.created_at.tzinfo or timezone.utc)
            rid = f"{session.session_id}:{i}"
            record = StoredRecord(id=rid, text=turn.content, created_at=when.timestamp(),
                                  updated_at=when.timestamp(), payload={
                                      "kind": "episode", "event_time": when.isoformat(),
                                      "metadata": {"speaker": str(turn.metadata["speaker"])},
                                      "provenance": {"session_id": session.session_id,
                                                     "turn_ids": [rid]}})
            out.append(record)
            if previous is not None:
                out.append(record.model_copy(update={
                    "id": f"x{rid}", "text": f"{previous.text}\n{record.text}",
                    "payload": {**record.payload, "metadata": {
                        "type": "exchange", "members": [previous.id, rid]},
                        "provenance": {"session_id": session.session_id,
                                       "turn_ids": [previous.id, rid]}}}))
            previous = record
    vectors = embedder.encode([r.text for r in out])
    return [r.model_copy(update={"vector": v.tolist()}) for r, v in zip(out, vectors,
                                                                         strict=True)]


def _entity_bytes(records: list[StoredRecord], speakers: set[str]) -> tuple[int, int]:
    """The heap an entity index of these records takes (tracemalloc), and its turns."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    entities = UserEntities(default_gazetteer(), default_lexicon())
    entities.load(records, speakers)
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return used, entities.turns


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "locomo-dev")
    p.add_argument("--questions", type=int, default=300)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--recipe", default="entities")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    embedder = HashEmbedder(DIM)
    started = time.perf_counter()
    default_gazetteer()
    default_lexicon()
    load_s = time.perf_counter() - started
    durable = FakeVectorStore()
    durable.ensure_collections(DIM)
    hot = HotIndexStore(durable, DIM, tokens=lambda: embedder)
    plain = HotIndexStore(durable, DIM, tokens=lambda: embedder, entities=False)
    service = RecallService(hot, parallelism=1)
    with_stage, without = RECIPES[args.recipe], DEFAULT
    work: list[tuple[Scope, str]] = []
    write_s = turns = heap = indexed = 0.0
    for user in locomo_users(args.data, "bench"):
        scope = Scope(tenant="bench", user=user.user_id)
        records = _records(user, embedder)
        t0 = time.perf_counter()
        hot.upsert(Collection.EPISODES, scope, records)  # the write path builds the index
        write_s += time.perf_counter() - t0
        turns += sum(1 for r in records if not r.id.startswith("x"))
        speakers = {str(r.payload["metadata"].get("speaker")) for r in records
                    if r.payload["metadata"].get("speaker")}
        used, n = _entity_bytes(records, speakers)
        heap += used
        indexed += n
        work += [(scope, q) for q in user.questions]
    work = work[:args.questions]
    # the same writes without the entity index: what the index adds to the write path
    t0 = time.perf_counter()
    for scope in dict.fromkeys(s for s, _ in work):
        plain.warm(scope)
    plain_load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for scope in dict.fromkeys(s for s, _ in work):
        HotIndexStore(durable, DIM, tokens=lambda: embedder).warm(scope)
    load_with_s = time.perf_counter() - t0
    best = {"with": [float("inf")] * len(work), "without": [float("inf")] * len(work)}
    reach_ms = [float("inf")] * len(work)
    candidates = {"with": [0] * len(work), "without": [0] * len(work)}
    for _ in range(args.repeat):
        for i, (scope, question) in enumerate(work):
            speakers = hot.speakers(scope)
            topic = without_speakers(question, speakers) or question
            embedded = embed_queries(embedder, [question])[0]
            vector = embedder.encode([topic])[0].tolist()
            request = RecallRequest(user_id=scope.user, query=question, layers=["episodes"])
            for name, recipe in (("with", with_stage), ("without", without)):
                t0 = time.perf_counter()
                reach = hot.entity_reach(scope) if name == "with" else None
                found = service.search_layers(
                    scope, request, vector, [Layer.EPISODES], recipe,
                    late=hot.late_scorer(scope, embedded.tokens),
                    terms_of=hot.terms_of(scope), entities=reach)
                best[name][i] = min(best[name][i], (time.perf_counter() - t0) * 1000)
                candidates[name][i] = len(found.candidates)
            t0 = time.perf_counter()
            entity_reach = hot.entity_reach(scope)
            assert entity_reach is not None
            entity_reach(question)
            reach_ms[i] = min(reach_ms[i], (time.perf_counter() - t0) * 1000)

    def pct(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[int(q * (len(ordered) - 1))]

    report = {
        "questions": len(work), "repeat": args.repeat, "recipe": args.recipe,
        "p50_ms": {k: round(statistics.median(v), 2) for k, v in best.items()},
        "p95_ms": {k: round(pct(v, 0.95), 2) for k, v in best.items()},
        "p50_ratio": round(statistics.median(best["with"]) / statistics.median(best["without"]),
                           3),
        "reach_p50_ms": round(statistics.median(reach_ms), 2),
        "reach_p95_ms": round(pct(reach_ms, 0.95), 2),
        "candidates_mean": {k: round(statistics.fmean(v), 1) for k, v in candidates.items()},
        "gazetteer_lexicon_load_s": round(load_s, 2),
        "write_turns_per_s_with_index": round(turns / write_s, 1),
        "load_s_users": {"without_index": round(plain_load_s, 2),
                         "with_index": round(load_with_s, 2)},
        "entity_bytes_per_turn": round(heap / indexed), "indexed_turns": int(indexed),
    }
    print(json.dumps(report, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
