"""The collector's pauses are timed by generation once watched (``strata.gc_pauses``)."""

from __future__ import annotations

import gc

from strata import gc_pauses


def test_a_full_collection_is_counted_and_timed() -> None:
    gc_pauses.watch()
    gc_pauses.watch()  # once per process
    before = gc_pauses.pauses().get("gen2", {"count": 0})["count"]
    cycle: list[object] = []
    cycle.append(cycle)
    del cycle
    gc.collect()
    after = gc_pauses.pauses()
    assert after["gen2"]["count"] == before + 1
    gen2 = after["gen2"]
    assert gen2["max_ms"] >= 0 and gen2["total_ms"] >= gen2["max_ms"] - 0.1
    assert gc.callbacks.count(gc_pauses._callback) == 1
    assert "objects" in after["frozen"]
