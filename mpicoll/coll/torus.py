"""Mesh-decomposed allreduce: the ranks as an r × c grid, one axis after the other."""

from __future__ import annotations

from mpicoll.coll.hierarchical import two_level_allreduce
from mpicoll.coll.registry import register
from mpicoll.schedule.core import Schedule
from mpicoll.topo import contiguous_runs, node_groups, square_grid


def grid_rows(nodes, commutative: bool) -> tuple[tuple[int, ...], ...]:
    """The rows of :func:`torus2d`'s grid (its columns: the ``i``-th rank
    of every row).

    The nodes, when there are several of equal size above one rank (and,
    for a non-commutative op, each a run of consecutive ranks, so rows keep
    rank order); otherwise :func:`~mpicoll.topo.square_grid` ``r × c`` in
    rank order, row ``i`` being ranks ``i*c .. i*c + c-1``.
    """
    groups = node_groups(nodes)
    sizes = {len(members) for members in groups}
    if (len(groups) > 1 and len(sizes) == 1 and sizes != {1}
            and (commutative or groups == contiguous_runs(nodes))):
        return groups
    r, c = square_grid(len(nodes))
    return tuple(tuple(range(i * c, (i + 1) * c)) for i in range(r))


@register("allreduce", "torus2d", topology=True)
def torus2d(rank, size, count, *, commutative, nodes) -> Schedule:
    """2D torus: reduce-scatter in rows, allreduce in columns, allgather in rows.

    The ranks form an ``r × c`` grid (:func:`grid_rows`): the nodes as
    rows when the node map is a uniform grid, else the most square
    factorization of p in rank order (``r <= c``). Each row reduce-scatters
    the vector into ``c`` blocks (ring; pairwise for a non-commutative op),
    each column allreduces its block (Rabenseifner, which itself
    reduce-scatters and allgathers, so this is the two-dimensional
    reduce-scatter/allgather; recursive doubling for a non-commutative op),
    and each row allgathers (ring): :func:`~mpicoll.coll.hierarchical.
    two_level_allreduce` with rows for groups. On a uniform node map it is
    the ``hierarchical`` allreduce; its own use is a flat or irregular
    machine, where it splits the ring's ``2(p-1)`` steps into
    ``2(c-1)`` plus ``2 log2 r``. A prime p has no grid but ``1 × p``: one
    row, nothing to do along columns, and the schedule is exactly the ring
    allreduce (correct, just flat). Any op.

    Rounds: ``2(c-1) + 2 floor(log2 r)``, ``+2`` if r is not a power of two
    (``2(c-1) + floor(log2 r)``, ``+2`` likewise, for a non-commutative
    op).
    Bytes sent per rank: ``2n (c-1)/c`` along rows, ``2 (n/c)(r-1)/r``
    along columns (``(n/c) log2 r`` for a non-commutative op).
    Temp memory: one block (``n/c``) for the ring's landing and about half
    a block in the column stage (non-commutative: a few blocks).
    Reference: Mikami et al. 2018 (2D-torus all-reduce); Sack & Gropp 2012
    (multi-dimensional reduce-scatter and allgather).

    Trace, p=4 (2 × 2, or in nodes of 2): rows {0,1}, {2,3} swap halves
    and reduce (0 holds H0 of ``x0+x1``, 1 holds H1, 2 and 3 those of
    ``x2+x3``); columns {0,2}, {1,3} allreduce their half (Rabenseifner of
    two: swap quarters, reduce, swap back); rows swap their reduced halves.
    """
    return two_level_allreduce(rank, count, grid_rows(nodes, commutative),
                               commutative)
