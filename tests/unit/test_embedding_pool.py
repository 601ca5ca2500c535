"""The embedding job's pool shape: torch threads from the node's cores, CPUs from what the
freest node has free (a pure helper, tested without Ray)."""

from __future__ import annotations

import pytest

from jobs.embedding import pool_shape


@pytest.mark.parametrize(("actors", "nodes", "free", "cpus", "threads"), [
    (1, [2.0], 2.0, 2.0, 2),    # one actor on a quiet 2-core node: both cores, as a raw process
    (1, [2.0], 1.98, 1.0, 2),   # a running Strata's shards hold 0.02: ask for 1, still 2 threads
    (2, [2.0], 2.0, 1.0, 1),    # two actors share the node's cores
    (2, [1.0, 1.0], 1.0, 1.0, 1),  # one actor a node
    (1, [4.0, 2.0], 4.0, 4.0, 4),  # the largest node's cores
    (1, [2.0, 2.0], 1.99, 1.0, 2),  # 2 nodes with a shard each: 3.98 free, but 1.99 a node
    (1, [2.0], 0.5, 0.5, 2),    # little free: a fraction, so the pool still starts
])
def test_pool_shape(actors: int, nodes: list[float], free: float, cpus: float,
                    threads: int) -> None:
    shape = pool_shape(actors, nodes, free)
    assert (shape.cpus, shape.threads) == (cpus, threads)
