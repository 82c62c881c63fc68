"""Gather and gatherv: every rank's ``send`` into block ``i`` of the root's ``recv``.

Buffers: every rank's ``send`` holds ``count`` elements; the root's ``recv``
gets ``count * p``, rank ``i``'s block at ``i * count`` (``recv`` is empty
off the root). Gatherv takes ``count`` as the per-rank tuple: rank ``i``
sends ``count[i]`` elements, packed in rank order at the root (its block
starts at ``sum(count[:i])``). An in-place call at the root aliases its
``send`` to its own block of ``recv``, so the copy of that block drops out.
Gather is gatherv with ``(count,) * p``: each algorithm is one builder on
per-rank counts, registered for both (the registry widens gather's
``count``, :mod:`mpicoll.coll.registry`).

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

    Rounds: ``floor(log2 p)`` along the deepest path, at most 2 per rank.
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


@register(("gather", "gatherv"), "linear")
def linear(rank, size, count, *, root) -> Schedule:
    """Every rank sends its block to the root, which receives them all at once.

    ``count`` is the per-rank tuple (gather's ``count`` arrives as
    ``(count,) * p``); an empty block travels as no message at all. Any
    size, counts (zeros too) and root; in place at the root. A non-root
    only uses its own count, the root all of them: just what MPI's gatherv
    gives each.

    Rounds: 1 (the root posts its ``p-1`` receives together, straight into
    place, then copies its own block).
    Bytes sent: its block by each non-root (``count[r]`` by rank ``r``);
    the root receives every block but its own, ``n (p-1)/p`` with equal
    blocks (``n = count * p``).
    Temp memory: none.
    Reference: Open MPI's ``basic_linear`` gather and gatherv; MPICH
    ``gatherv_allcomm_linear``.

    Trace, p=4, root 0: round 1: 1, 2 and 3 send their blocks to 0, which
    then copies block 0 from its ``send``. With counts (2, 0, 1, 3): 2
    sends its 1 element and 3 its 3 to 0 (1 sends nothing), which receives
    them at offsets 2 and 3, then copies its 2 elements to offset 0.
    """
    b = ScheduleBuilder()
    mine = Span("send", 0, count[rank])
    if rank != root:
        b.exchange(sends=[(root, mine)])
        return b.build()
    bounds = block_bounds(count)
    peers = [(root + v) % size for v in range(1, size)]
    b.exchange(recvs=[(r, Span("recv", bounds[r], bounds[r + 1])) for r in peers])
    b.copy(mine, Span("recv", bounds[root], bounds[root + 1]))
    return b.build()


@register(("gather", "gatherv"), "binomial")
def binomial(rank, size, count, *, root) -> Schedule:
    """Binomial-tree gather: ``log2 p`` levels, each doubling what moves on.

    ``count`` is the per-rank tuple (gather's ``count`` arrives as
    ``(count,) * p``). A rank receives every child's subtree in one round
    and sends its own subtree to its parent in the next
    (:func:`binomial_gather_steps`). The root receives straight into
    ``recv`` and leaves send straight from ``send``; inner ranks first copy
    their block into scratch, where their children's blocks then land.
    Subtrees travel as their blocks' packed range, two messages where one
    wraps past the last rank, so no rank rotates the vector (MPICH reorders
    through scratch or derived datatypes at a root other than 0); an empty
    one travels as no message at all. Every rank needs the whole tuple (a
    non-root sizes its scratch and its messages by its subtree's counts),
    where MPI's gatherv gives a non-root only its own count: the MPI layer
    exchanges the counts first, and every rank passes the same tuple. Any
    size, counts (zeros too) and root; in place at the root.

    Rounds: ``floor(log2 p)`` along the deepest path (a rank receives all
    its children in one round), at most 2 with messages per rank (after
    the local copy on inner ranks).
    Bytes sent: its subtree's blocks per non-root; the root receives every
    block but its own, ``n (p-1)/p`` with equal blocks
    (``n = count * p``).
    Temp memory: none on the root and on leaves, the sum of its subtree's
    counts on inner ranks (with equal blocks ``count`` times the subtree's
    size, at most ``p/2``).
    Reference: Thakur, Rabenseifner & Gropp 2005; MPICH
    ``gather_intra_binomial`` (on uneven blocks too: MPICH's and Open
    MPI's basic gatherv are linear, having the counts at the root only).

    Trace, p=4, root 0: 2 copies block 2 into scratch; round 1: 3 sends
    block 3 to 2 and 1 sends block 1 to 0; round 2: 2 sends blocks 2,3 to 0,
    which then copies block 0 from its ``send``. With counts (2, 0, 1, 3):
    round 1: 1 sends nothing; round 2: 2 sends 4 elements (blocks 2,3).
    """
    b = ScheduleBuilder()
    bounds = block_bounds(count)
    mine = Span("send", 0, count[rank])
    if rank == root:
        data = Span("recv", 0, bounds[size])
    else:
        data = subtree_window(b, rank, size, root, count, mine)
    own = data.sub(bounds[rank], bounds[rank + 1])
    if rank != root:
        b.copy(mine, own)  # before it goes up (a leaf's own is mine: no copy)
    binomial_gather_steps(b, rank, size, root, count, data)
    if rank == root:
        b.copy(mine, own)  # after the receives, in their round
    return b.build()
