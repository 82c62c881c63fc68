"""Gather components: the binomial gather that other collectives build on.

Not a registered collective yet. :func:`binomial_gather_steps` is the second
half of Rabenseifner's reduce (:mod:`mpicoll.coll.reduce`).
"""

from __future__ import annotations

from mpicoll.coll.scatter import subtree_spans
from mpicoll.schedule.core import ScheduleBuilder, Span
from mpicoll.topo import binomial_children, binomial_parent, block_bounds


def binomial_gather_steps(b: ScheduleBuilder, rank: int, size: int, root: int,
                          counts, data: Span, *, ranks=None) -> None:
    """Gather block ``i`` of rank ``i``'s ``data`` into the root's, up a binomial tree.

    The inverse of :func:`~mpicoll.coll.scatter.binomial_scatter_steps`:
    block ``i`` (``counts[i]`` elements) sits at its displacement in rank
    ``i``'s ``data`` and ends at the same place in the root's. A rank
    receives every child's subtree in one round (the blocks are disjoint),
    then sends its own subtree to its parent in one round; a subtree that
    wraps around the end of the vector travels as two messages.

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
