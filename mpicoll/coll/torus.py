"""The n-dimensional torus allreduce: rings along each dimension of a grid in turn."""

from __future__ import annotations

import math
from functools import lru_cache

from mpicoll.coll import allgather, reduce_scatter
from mpicoll.coll.registry import register
from mpicoll.schedule.core import Schedule, ScheduleBuilder, Span
from mpicoll.schedule.group import Subgroup
from mpicoll.topo import block_bounds, block_partition, contiguous_runs, \
    locate, node_groups, square_grid


def torus_grid(size: int, nodes, dims,
               commutative: bool) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(dims, ranks)``: the grid :func:`torus` runs on, ``ranks`` the rank
    at each position in row-major order (the last coordinate fastest).

    ``dims`` given (a Cartesian communicator's, or a simulation's): those,
    ranks in rank order, as ``MPI_Cart_create`` numbers them; their
    product must be ``size`` (ValueError otherwise, raised alike by every
    rank's builder, so before any message). Without them: ``(m, L)`` with
    the nodes as the lines of the last dimension when there are ``m > 1``
    nodes of ``L > 1`` ranks each (and, for a non-commutative op, each a
    run of consecutive ranks, so that the grid keeps rank order);
    otherwise :func:`~mpicoll.topo.square_grid` ``r × c`` in rank order.
    Every rank's builder asks for the same grid: the last few are kept.
    """
    return _grid(size, nodes, None if dims is None else tuple(dims),
                 commutative)


@lru_cache(maxsize=8)
def _grid(size: int, nodes, dims, commutative: bool):
    if dims is not None:
        if not dims or not all(isinstance(d, int) and d >= 1 for d in dims):
            raise ValueError(f"torus: dims {dims} must be positive integers")
        if math.prod(dims) != size:
            raise ValueError(f"torus: dims {dims} hold {math.prod(dims)} "
                             f"ranks, the communicator has {size}")
        return dims, tuple(range(size))
    groups = node_groups(nodes)
    sizes = {len(members) for members in groups}
    if (len(groups) > 1 and len(sizes) == 1 and sizes != {1}
            and (commutative or groups == contiguous_runs(nodes))):
        return (len(groups), len(groups[0])), tuple(
            rank for members in groups for rank in members)
    return square_grid(size), tuple(range(size))


def _lines(dims, ranks, rank: int):
    """``rank``'s line along each dimension, the last first: ``(members
    in coordinate order, rank's coordinate)`` for dimensions longer than 1."""
    position = locate(rank, (ranks,))[1]  # the grid as one group
    out = []
    stride = 1
    for d in reversed(dims):
        coord = position // stride % d
        base = position - coord * stride
        if d > 1:
            out.append((tuple(ranks[base + i * stride] for i in range(d)),
                        coord))
        stride *= d
    return out


@register("allreduce", "torus", topology=True, cartesian=True)
def torus(rank, size, count, *, commutative, nodes, dims) -> Schedule:
    """n-dimensional torus: reduce-scatter along each dimension in turn, allgather back.

    The ranks form a grid (:func:`torus_grid`): a Cartesian
    communicator's dimensions (``Create_cart``, an ``mpicoll.Mesh``), or
    a simulation's ``dims=``; else the nodes as rows when they are
    uniform, else the most square ``r × c`` in rank order. Along the last
    dimension first (MPI's fastest-varying, whose lines are runs of
    consecutive ranks: inside a node under block placement; it carries
    the most bytes), then the one before it, and so on, every line
    reduce-scatters the segment its members hold into as many blocks as
    it has members (ring; pairwise for a non-commutative op), each
    member keeping its block as the next segment; then the lines
    allgather (ring) in the reverse order. Every line is a ring of
    neighbours on a torus of those dimensions. Reducing the
    fastest-varying dimension first combines runs of consecutive ranks
    only, so a non-commutative op folds exactly ``x0 op x1 op ... op
    x{p-1}`` on every grid kept in rank order (which :func:`torus_grid`
    ensures). Dimensions of 1 are skipped: one dimension is the ring
    allreduce (pairwise then ring for a non-commutative op), and a prime
    p with no dims is ``1 × p``. Any op, any count.

    Rounds: ``2(a-1) + 2(b-1)`` on an ``a × b`` grid; ``2 sum(d_i - 1)``
    on dimensions ``d_i``.
    Bytes sent per rank: ``2n (p-1)/p`` in all, as the ring, in ``2
    sum(d_i - 1)`` messages instead of ``2(p-1)``: ``2s (d_i-1)/d_i``
    along dimension ``i``, ``s`` being ``n`` divided by the lengths of the
    dimensions reduced before it.
    Temp memory: one landing block per dimension, ``n/d_k + n/(d_k
    d_{k-1}) + ...`` (under ``2n/d_k``, ``d_k`` the last dimension);
    up to three times that for a non-commutative op (each dimension's
    reduced block and the pairwise stage's landing blocks).
    Reference: Sack & Gropp 2012 (multi-dimensional reduce-scatter and
    allgather); Mikami et al. 2018 (2D-torus all-reduce); Jain & Sabharwal
    2010 (optimal bucket algorithms on tori).

    Trace, p=4 as ``2 × 2`` (dims ``(2, 2)``, rows ``{0,1}``, ``{2,3}``):
    rows swap halves and reduce (0 holds H0 of ``x0+x1``, 1 holds H1, 2
    and 3 those of ``x2+x3``); columns ``{0,2}``, ``{1,3}`` swap quarters
    of their half and reduce (0 holds Q0 of the sum, 2 Q1, 1 Q2, 3 Q3);
    columns swap the reduced quarters back; rows swap reduced halves.
    """
    grid, ranks = torus_grid(size, nodes, dims, commutative)
    lines = _lines(grid, ranks, rank)
    b = ScheduleBuilder()
    whole = Span("recv", 0, count)
    if not lines:
        b.copy(Span("send", 0, count), whole)
        return b.build()
    segments = [whole]  # segments[i]: what line i reduce-scatters
    src = Span("send", 0, count)
    for members, coord in lines:
        seg = segments[-1]
        counts = block_partition(len(seg), len(members))
        bounds = block_bounds(counts)
        mine = seg.sub(bounds[coord], bounds[coord + 1])
        line = Subgroup(b, members)
        if commutative:
            reduce_scatter.ring_steps(line, coord, len(members), counts, src,
                                      mine, seg)
            src = mine
        else:
            reduced = b.alloc(len(mine))
            line.embed(reduce_scatter.pairwise(coord, len(members), counts,
                                               commutative=False),
                       send=src, recv=reduced)
            src = reduced
        segments.append(mine)
    if not commutative:
        b.copy(src, segments[-1])
    for (members, coord), seg in zip(reversed(lines),
                                     reversed(segments[:-1])):
        allgather.ring_steps(Subgroup(b, members), coord, len(members),
                             block_partition(len(seg), len(members)), seg)
    return b.build()
