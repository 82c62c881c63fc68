"""Scatter components: the binomial scatter that other collectives build on.

Not a registered collective yet. :func:`binomial_scatter_steps` is the first
half of van de Geijn's broadcast (:mod:`mpicoll.coll.bcast`), and
:func:`subtree_spans` is the block arithmetic it shares with the binomial
gather (:mod:`mpicoll.coll.gather`).
"""

from __future__ import annotations

from mpicoll.schedule.core import ScheduleBuilder, Span
from mpicoll.topo import binomial_children, binomial_parent, block_bounds


def subtree_spans(data: Span, bounds, root: int, vrank: int) -> list[Span]:
    """The blocks of ``vrank``'s binomial subtree, as one or two spans of ``data``.

    Virtual rank ``v`` is rank ``(v + root) % size`` and owns block
    ``bounds[rank]:bounds[rank + 1]``. The subtree ``[vrank, vrank + low)``
    (``low`` the lowest set bit of ``vrank``, the whole tree for the root) is
    contiguous in virtual ranks, so in rank order it wraps around the end of
    the vector at most once: it then takes two spans, ranks ``[a, size)`` and
    ``[0, b)``. Sender and receiver both call this, so they split alike.
    """
    size = len(bounds) - 1
    hi = min(vrank + (vrank & -vrank), size) if vrank else size
    a, b = vrank + root, hi + root
    if b <= size:
        return [data.sub(bounds[a], bounds[b])]
    if a >= size:
        return [data.sub(bounds[a - size], bounds[b - size])]
    return [data.sub(bounds[a], bounds[size]), data.sub(0, bounds[b - size])]


def binomial_scatter_steps(b: ScheduleBuilder, rank: int, size: int, root: int,
                           counts, data: Span) -> None:
    """Scatter block ``i`` of the root's ``data`` to rank ``i``, down a binomial tree.

    ``counts[i]`` is block ``i``'s length; block ``i`` sits at its
    displacement in ``data`` on the root and lands at the same place on rank
    ``i``. A rank receives its whole subtree's blocks from its parent (one
    round), then hands each child its subtree in one round, farthest child
    (largest subtree) first; a subtree that wraps around the end of the
    vector travels as two messages (:func:`subtree_spans`).

    Rounds: ``ceil(log2 p)`` along the deepest path, at most 2 per rank.
    Sent by the root: ``n (p-1)/p``; temp memory: none.
    Reference: Thakur, Rabenseifner & Gropp 2005 (binomial scatter); MPICH.

    Trace, p=4, root 0: round 1: 0 sends blocks 2,3 to 2 and block 1 to 1;
    round 2: 2 sends block 3 to 3.
    """
    bounds = block_bounds(counts)
    vrank = (rank - root) % size
    parent = binomial_parent(vrank)
    if parent is not None:
        peer = (parent + root) % size
        b.exchange(recvs=[(peer, s) for s in subtree_spans(data, bounds, root, vrank)])
    b.exchange(sends=[
        ((child + root) % size, s)
        for child in reversed(binomial_children(vrank, size))
        for s in subtree_spans(data, bounds, root, child)
    ])
