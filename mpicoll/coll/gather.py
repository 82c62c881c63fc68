"""Gather: every rank's ``send`` into block ``i`` of the root's ``recv``.

Buffers: every rank's ``send`` holds ``count`` elements; the root's ``recv``
gets ``count * p``, rank ``i``'s block at ``i * count`` (``recv`` is empty
off the root). An in-place call at the root aliases its ``send`` to its own
block of ``recv``, so the copy of that block drops out.

Also holds :func:`binomial_gather_steps`, the second half of Rabenseifner's
reduce (:mod:`mpicoll.coll.reduce`).
"""

from __future__ import annotations

from mpicoll.coll.registry import register
from mpicoll.coll.scatter import subtree_spans, subtree_window
from mpicoll.schedule.core import Schedule, ScheduleBuilder, Span
from mpicoll.topo import binomial_children, binomial_parent, block_bounds


def binomial_gather_steps(b: ScheduleBuilder, rank: int, size: int, root: int,
                          counts, data: Span, *, ranks=None) -> None:
    """Gather block ``i`` of rank ``i``'s ``data`` into the root's, up a binomial tree.

    The inverse of :func:`~mpicoll.coll.scatter.binomial_scatter_steps`:
    block ``i`` (``counts[i]`` elements) sits at its displacement in rank
    ``i``'s ``data`` and ends at the same place in the root's. A rank
    receives every child's subtree in one round (the blocks are disjoint),
    then sends its own subtree to its parent in one round; a subtree that
    wraps around the end of the vector travels as two messages. A non-root
    may pass a :class:`~mpicoll.coll.scatter.Window` as ``data``, to keep
    just its subtree.

    ``ranks``, if given, is the rank to address for each of the tree's
    ``size`` ranks, for a gather among some of the ranks (such as the
    power-of-two core of a fold); ``rank``, ``root`` and ``counts`` are then
    those of the tree.

    Rounds: ``ceil(log2 p)`` along the deepest path, at most 2 per rank.
    Received by the root: ``n (p-1)/p``; temp memory: none.
    Reference: Thakur, Rabenseifner & Gropp 2005 (binomial gather); MPICH.

    Trace, p=4, root 0: round 1: 3 sends block 3 to 2, 1 sends block 1 to 0;
    round 2: 2 sends blocks 2,3 to 0.
    """
    ranks = range(size) if ranks is None else ranks
    bounds = block_bounds(counts)
    vrank = (rank - root) % size
    b.exchange(recvs=[
        (ranks[(child + root) % size], s)
        for child in binomial_children(vrank, size)
        for s in subtree_spans(data, bounds, root, child)
    ])
    parent = binomial_parent(vrank)
    if parent is not None:
        peer = ranks[(parent + root) % size]
        b.exchange(sends=[(peer, s) for s in subtree_spans(data, bounds, root, vrank)])


@register("gather", "linear")
def linear(rank, size, count, *, root) -> Schedule:
    """Every rank sends its block to the root, which receives them all at once.

    Rounds: 1 (the root posts its ``p-1`` receives together, straight into
    place, then copies its own block). Bytes sent: ``count`` per non-root;
    the root receives ``n (p-1)/p`` (``n = count * p``). Temp memory: none.
    Any size, count and root; in place at the root.
    Reference: Open MPI's ``basic_linear`` gather.

    Trace, p=4, root 0: round 1: 1, 2 and 3 send their blocks to 0, which
    then copies block 0 from its ``send``.
    """
    b = ScheduleBuilder()
    mine = Span("send", 0, count)
    if rank != root:
        b.exchange(sends=[(root, mine)])
        return b.build()
    peers = [(root + v) % size for v in range(1, size)]
    b.exchange(recvs=[(r, Span("recv", r * count, (r + 1) * count)) for r in peers])
    b.copy(mine, Span("recv", root * count, (root + 1) * count))
    return b.build()


@register("gather", "binomial")
def binomial(rank, size, count, *, root) -> Schedule:
    """Binomial-tree gather: ``ceil(log2 p)`` steps, each doubling what moves on.

    A rank receives every child's subtree in one round and sends its own
    subtree to its parent in the next (:func:`binomial_gather_steps`). The
    root receives straight into ``recv`` and leaves send straight from
    ``send``; inner ranks first copy their block into scratch, where their
    children's blocks then land. A subtree that wraps past the last rank
    travels as two messages, so no rank rotates the vector (MPICH reorders
    through scratch or derived datatypes at a root other than 0).
    Rounds: at most 2 with messages per rank (after the local copy on inner
    ranks), ``ceil(log2 p)`` along the deepest path. Bytes sent: its
    subtree's blocks per non-root; the root receives ``n (p-1)/p``
    (``n = count * p``). Temp memory: none on the root and on leaves,
    ``count`` times the subtree's size (at most ``p/2``) on inner ranks.
    Any size, count and root; in place at the root.
    Reference: Thakur, Rabenseifner & Gropp 2005; MPICH
    ``gather_intra_binomial``.

    Trace, p=4, root 0: 2 copies block 2 into scratch; round 1: 3 sends
    block 3 to 2 and 1 sends block 1 to 0; round 2: 2 sends blocks 2,3 to 0,
    which then copies block 0 from its ``send``.
    """
    b = ScheduleBuilder()
    mine = Span("send", 0, count)
    if rank == root:
        data = Span("recv", 0, size * count)
    else:
        data = subtree_window(b, rank, size, root, count, mine)
    own = data.sub(rank * count, (rank + 1) * count)
    if rank != root:
        b.copy(mine, own)  # before it goes up (a leaf's own is mine: no copy)
    binomial_gather_steps(b, rank, size, root, (count,) * size, data)
    if rank == root:
        b.copy(mine, own)  # after the receives, in their round
    return b.build()
