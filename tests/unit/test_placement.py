"""Where the session shards should run (strata.layers.placement): an even spread, few moves."""

from __future__ import annotations

from collections import Counter

import pytest

from strata.layers.placement import Move, plan_moves, steady_nodes


def after(placement: dict[int, str], moves: list[Move]) -> dict[int, str]:
    moved = dict(placement)
    for move in moves:
        assert moved[move.shard] == move.source
        moved[move.shard] = move.target
    return moved


def test_a_node_that_joins_gets_its_share_and_nothing_else_moves() -> None:
    placement = {0: "head", 1: "head"}  # the worker was lost; both restarted on the head
    assert plan_moves(placement, ["head", "worker"]) == [Move(1, "head", "worker")]
    eight = {i: "a" for i in range(8)}
    moves = plan_moves(eight, ["a", "b", "c"])
    assert len(moves) == 5  # 8 over 3 nodes: 3, 3, 2 (or the like); only the surplus moves
    assert sorted(Counter(after(eight, moves).values()).values()) == [2, 3, 3]


def test_a_spread_placement_stays_put() -> None:
    assert plan_moves({0: "a", 1: "b"}, ["a", "b"]) == []
    assert plan_moves({0: "a", 1: "a", 2: "b"}, ["a", "b"]) == []  # one over: allowed
    assert plan_moves({0: "a", 1: "b"}, ["a", "b", "c"]) == []  # more nodes than shards


def test_shards_on_a_node_that_is_not_eligible_move_to_the_least_loaded() -> None:
    moves = plan_moves({0: "a", 1: "gone", 2: "b", 3: "gone"}, ["a", "b"])
    assert [(m.shard, m.source) for m in moves] == [(1, "gone"), (3, "gone")]
    assert sorted(Counter(after({0: "a", 1: "gone", 2: "b", 3: "gone"}, moves).values())
                  .values()) == [2, 2]


@pytest.mark.parametrize("shards,nodes", [(1, 1), (2, 3), (5, 2), (16, 3), (7, 7), (9, 4)])
def test_any_placement_ends_even_in_one_plan_each_shard_moved_at_most_once(
        shards: int, nodes: int) -> None:
    names = [f"n{i}" for i in range(nodes)]
    for skew in range(nodes):  # everything on one node, then spread from another start
        placement = {s: names[(skew + s * skew) % nodes] for s in range(shards)}
        moves = plan_moves(placement, names)
        assert len({m.shard for m in moves}) == len(moves)
        counts = Counter(after(placement, moves).values())
        held = [counts.get(n, 0) for n in names]
        assert max(held) - min(held) <= 1, (placement, moves)
        assert plan_moves(after(placement, moves), names) == []  # stable once even
        assert moves == plan_moves(placement, list(reversed(names)))  # deterministic


def test_no_nodes_or_no_shards_plan_nothing() -> None:
    assert plan_moves({0: "a"}, []) == []
    assert plan_moves({}, ["a"]) == []


def test_a_node_must_stay_a_round_before_it_counts() -> None:
    assert steady_nodes([["a"], ["a", "b"]]) == ["a"]
    assert steady_nodes([["a", "b"], ["a", "b"]]) == ["a", "b"]
    assert steady_nodes([["a", "b"], ["a"]]) == ["a"]
    assert steady_nodes([]) == []
