"""Where the session shards should run: an even spread over the nodes, reached in few moves.

Ray places the shards over the nodes when they start (SPREAD) and restarts a shard lost with
its node on a surviving one, but it never moves a running actor: after a node comes back (or
a new one joins) every shard would stay where the loss put it. ``plan_moves`` says which
shards to move so that no node holds more than one shard over another, moving as few as
possible and never the same shard twice in one plan. The Ray side (``actors/placement.py``)
asks each shard where it runs, moves what the plan says one shard at a time, and does
nothing while a shard is between nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Move", "plan_moves", "steady_nodes"]


@dataclass(frozen=True)
class Move:
    shard: int
    source: str
    target: str


def plan_moves(placement: Mapping[int, str], nodes: Sequence[str]) -> list[Move]:
    """The moves that even out ``placement`` (shard → node) over ``nodes`` (the nodes that
    may hold shards). A shard on a node not in ``nodes`` is moved too (that node is leaving).
    Deterministic: the same inputs give the same plan."""
    eligible = sorted(set(nodes))
    if not eligible or not placement:
        return []
    held: dict[str, list[int]] = {node: [] for node in eligible}
    homeless: list[tuple[int, str]] = []
    for shard, node in sorted(placement.items()):
        if node in held:
            held[node].append(shard)
        else:
            homeless.append((shard, node))
    base, extra = divmod(len(placement), len(eligible))
    # the nodes that already hold the most keep the extra shards: fewest moves
    ranked = sorted(eligible, key=lambda n: (-len(held[n]), n))
    quota = {node: base + (1 if i < extra else 0) for i, node in enumerate(ranked)}
    leaving = list(homeless)
    for node in ranked:
        surplus = len(held[node]) - quota[node]
        if surplus > 0:  # the highest-numbered shards go; the rest stay put
            leaving += [(shard, node) for shard in held[node][-surplus:]]
            held[node] = held[node][:-surplus]
    moves = []
    for shard, source in sorted(leaving):
        target = min(eligible, key=lambda n: (len(held[n]) - quota[n], len(held[n]), n))
        held[target].append(shard)
        moves.append(Move(shard, source, target))
    return moves


def steady_nodes(seen: Sequence[Sequence[str]]) -> list[str]:
    """The nodes present in every one of the last observations: a node that just joined
    (or flaps) gets shards only once it has stayed."""
    if not seen:
        return []
    common = set(seen[0])
    for nodes in seen[1:]:
        common &= set(nodes)
    return sorted(common)
