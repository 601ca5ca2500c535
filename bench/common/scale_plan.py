"""The scale bench's data plan (``bench/scale.py``), shared with its mem0 phase
(``bench/scale_mem0.py``, which runs in the benchmark interpreter with mem0): the LoCoMo dev
turns that are the memories' texts, which user gets how many of them from where, and which
users the bench touches. Standard library only, so that both interpreters import it."""

from __future__ import annotations

import json
import random
import statistics
from collections.abc import Sequence
from pathlib import Path

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo-dev"
QUERIES = ["what did she say about the trip", "when did he start painting",
           "which book was recommended", "how is the new job going", "what are the kids up to"]


def locomo_turns(data: Path) -> list[tuple[str, str]]:
    """(speaker, text) of every turn of the LoCoMo conversations in ``data``, in order."""
    out = []
    for path in sorted(data.glob("conv-*.json")):
        conv = json.loads(path.read_text())
        out += [(t["speaker"], t["text"]) for key, value in conv.items()
                if key.startswith("session_") and isinstance(value, list) for t in value]
    return out


def user_name(i: int, locomo: bool = False) -> str:
    return f"{'locomo' if locomo else 'u'}{i}"


def plan(memories: int, users: int, locomo_users: int, locomo_turns_each: int,
         n_turns: int) -> list[tuple[str, int, int, bool]]:
    """(user, rows, first turn, is a LoCoMo user) for every user, in writing order: even
    shares of ``memories`` over ``users`` plus ``locomo_users`` of ``locomo_turns_each``
    rows; user ``i``'s row ``j`` is turn ``(first + j) % n_turns``. Seeded: the same plan
    every run (and the same as the stores built before this function existed)."""
    per_user = max(1, memories // users)
    rng = random.Random(1)
    order = [(user_name(i), per_user, False) for i in range(users)]
    order += [(user_name(i, True), locomo_turns_each, True) for i in range(locomo_users)]
    rng.shuffle(order)  # LoCoMo users' rows land among the others' segments
    return [(name, n, rng.randrange(n_turns), locomo) for name, n, locomo in order]


def cold_sample(users: int, cold: int) -> list[str]:
    """The sampled users whose first touch is timed (seeded)."""
    rng = random.Random(2)
    return [user_name(i) for i in rng.sample(range(users), min(cold, users))]


def summary_ms(ms: Sequence[float]) -> dict[str, float]:
    """n, p50, p95, p99 and max of latencies in milliseconds (nearest rank)."""
    ordered = sorted(ms)

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {"n": len(ms), "p50": round(statistics.median(ms), 1), "p95": round(pct(0.95), 1),
            "p99": round(pct(0.99), 1), "max": round(max(ms), 1)}
