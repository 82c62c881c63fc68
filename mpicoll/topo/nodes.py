"""Which ranks share a node, and the groups topology-aware algorithms use.

A node map ``nodes`` gives the node of every rank: ``(0, 0, 1, 1, 2)`` is
five ranks in nodes of two, the last node holding one. Nodes may be uneven
and need not be runs of consecutive ranks (``(0, 1, 0, 1)``: round-robin
placement). Everything here is arithmetic on such tuples.

Every rank's schedule asks for the same map's groups, so the functions
here that take a whole map (or its groups) keep the last
:data:`MAPS_KEPT` answers: building all 65,536 ranks' schedules of a
hierarchical algorithm (``python -m mpicoll.simulate``) then costs
``O(p)`` once plus hashing the map per rank, not ``O(p)`` in Python per
rank.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from functools import lru_cache

from mpicoll.topo.blocks import block_bounds, block_partition

MAPS_KEPT = 8  # node maps (and groups) whose answers are kept, per function


def canonical_nodes(nodes, size: int) -> tuple[int, ...]:
    """``nodes`` renumbered 0, 1, ... in order of each node's lowest rank.

    ``None`` means one node holding every rank. Any hashable labels are
    accepted (``("a", "b", "a")`` becomes ``(0, 1, 0)``), so equal machines
    get equal maps (and share cached schedules).
    """
    if nodes is None:
        return (0,) * size
    nodes = tuple(nodes)
    if len(nodes) != size:
        raise ValueError(f"nodes names {len(nodes)} ranks, the "
                         f"communicator has {size}")
    return _canonical(nodes)


@lru_cache(maxsize=MAPS_KEPT)
def _canonical(nodes: tuple) -> tuple[int, ...]:
    index: dict = {}
    return tuple(index.setdefault(n, len(index)) for n in nodes)


def node_groups(nodes) -> tuple[tuple[int, ...], ...]:
    """The ranks of each node, in rank order; nodes in order of their
    lowest rank (for a canonical map: node ``i`` is group ``i``)."""
    return _node_groups(tuple(nodes))


@lru_cache(maxsize=MAPS_KEPT)
def _node_groups(nodes: tuple) -> tuple[tuple[int, ...], ...]:
    groups: dict = {}
    for rank, node in enumerate(nodes):
        groups.setdefault(node, []).append(rank)
    return tuple(map(tuple, groups.values()))


def contiguous_runs(nodes) -> tuple[tuple[int, ...], ...]:
    """Maximal runs of consecutive ranks on one node, in rank order.

    The same as :func:`node_groups` exactly when every node is one run;
    ``(0, 1, 0, 1)`` gives four runs of one rank, ``(0, 0, 1, 0)`` three.
    """
    return _contiguous_runs(tuple(nodes))


@lru_cache(maxsize=MAPS_KEPT)
def _contiguous_runs(nodes: tuple) -> tuple[tuple[int, ...], ...]:
    runs: list[list[int]] = []
    for rank, node in enumerate(nodes):
        if rank and nodes[rank - 1] == node:
            runs[-1].append(rank)
        else:
            runs.append([rank])
    return tuple(map(tuple, runs))


def reduction_groups(nodes, commutative: bool) -> tuple[tuple[int, ...], ...]:
    """The groups a hierarchical reduction reduces inside first.

    The nodes, for a commutative op. A non-commutative op can only combine
    neighbours in rank order, so it gets :func:`contiguous_runs`: the nodes
    themselves when each is a run of consecutive ranks, pieces of them
    otherwise (each still inside one node). Folding within each group in
    rank order, then across groups in group order, then gives exactly
    ``x0 op x1 op ... op x{p-1}``.
    """
    return node_groups(nodes) if commutative else contiguous_runs(nodes)


def locate(rank: int, groups) -> tuple[int, int]:
    """``(group, index within it)`` of ``rank``."""
    where = _positions(tuple(map(tuple, groups))).get(rank)
    if where is None:
        raise ValueError(f"rank {rank} is in no group")
    return where


@lru_cache(maxsize=MAPS_KEPT)
def _positions(groups: tuple) -> dict[int, tuple[int, int]]:
    """``{rank: (group, index within it)}``; a rank in two groups: its
    first (as a search in group order finds it)."""
    where: dict = {}
    for g, members in enumerate(groups):
        for i, rank in enumerate(members):
            where.setdefault(rank, (g, i))
    return where


def shared_segments(count: int, sizes) -> tuple[tuple[int, int, tuple[int, ...]], ...]:
    """Pieces of a ``count``-element vector each group hands to one member.

    Group ``g`` of ``sizes[g]`` members cuts the vector into
    :func:`~mpicoll.topo.block_partition` blocks, member ``l`` owning block
    ``l``. Cutting at every group's block boundaries gives pieces that lie
    in one block of each group: ``(start, stop, owners)`` with ``owners[g]``
    the member of group ``g`` holding ``[start, stop)``. Equal sizes give
    the blocks themselves; sizes 2 and 3 give
    ``[0, n/3) [n/3, n/2) [n/2, 2n/3) [2n/3, n)``, owned by members
    ``(0, 0), (0, 1), (1, 1), (1, 2)``. Empty pieces are left out.
    """
    return _shared_segments(count, tuple(sizes))


@lru_cache(maxsize=MAPS_KEPT)
def _shared_segments(count: int, sizes: tuple):
    bounds = [block_bounds(block_partition(count, s)) for s in sizes]
    cuts = sorted({x for b in bounds for x in b})
    return tuple(
        (start, stop, tuple(bisect_right(b, start) - 1 for b in bounds))
        for start, stop in zip(cuts, cuts[1:])
    )


def square_grid(size: int) -> tuple[int, int]:
    """``(r, c)`` with ``r * c == size`` and ``r <= c`` as close as can be:
    ``r`` is the largest divisor of ``size`` up to its square root (a prime
    gives ``(1, size)``)."""
    r = math.isqrt(size)
    while size % r:
        r -= 1
    return r, size // r
