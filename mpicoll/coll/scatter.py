"""Scatter and scatterv: block ``i`` of the root's ``send`` into rank ``i``'s ``recv``.

Buffers: the root's ``send`` holds ``count * p`` elements, block ``i`` at
``i * count``; every rank's ``recv`` gets ``count`` (``send`` is empty off
the root). Scatterv takes ``count`` as the per-rank tuple: rank ``i`` gets
``count[i]`` elements, packed in rank order at the root (its block starts
at ``sum(count[:i])``). An in-place call at the root makes its ``recv`` a
view of its own block of ``send``, so the copy of that block drops out.
Scatter is scatterv with ``(count,) * p``: each algorithm is one builder on
per-rank counts, registered for both (the registry widens scatter's
``count``, :mod:`mpicoll.coll.registry`).

Also holds the components other collectives build on:
:func:`binomial_scatter_steps` is the first half of van de Geijn's broadcast
(:mod:`mpicoll.coll.bcast`); :func:`subtree_spans` and
:func:`subtree_window` are the block arithmetic it shares with the binomial
gather (:mod:`mpicoll.coll.gather`).
"""

from __future__ import annotations

from typing import NamedTuple

from mpicoll.coll.registry import register
from mpicoll.schedule.core import Schedule, ScheduleBuilder, Span
from mpicoll.topo import binomial_children, binomial_parent, block_bounds


def _subtree_end(vrank: int, size: int) -> int:
    """One past the last virtual rank of ``vrank``'s binomial subtree."""
    return min(vrank + (vrank & -vrank), size) if vrank else size


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
    a, b = vrank + root, _subtree_end(vrank, size) + root
    if b <= size:
        return [data.sub(bounds[a], bounds[b])]
    if a >= size:
        return [data.sub(bounds[a - size], bounds[b - size])]
    return [data.sub(bounds[a], bounds[size]), data.sub(0, bounds[b - size])]


class Window(NamedTuple):
    """The whole vector as a non-root of a binomial tree sees it: its subtree.

    The binomial components take the whole vector of blocks in rank order,
    but a non-root only ever touches its own subtree: blocks ``rank, rank+1,
    ...``, wrapping past the last block to block 0. ``store`` holds just
    those, in that (virtual-rank) order, and :meth:`sub` maps a range of the
    vector into it. A range must not straddle ``origin``; none of the
    subtree's spans does (:func:`subtree_spans` splits at the wrap).
    """

    store: Span
    origin: int  # where this rank's block starts in the vector
    length: int  # of the whole vector

    def sub(self, start: int, stop: int) -> Span:
        shift = self.origin if start >= self.origin else self.origin - self.length
        return self.store.sub(start - shift, stop - shift)


def subtree_window(b: ScheduleBuilder, rank: int, size: int, root: int,
                   counts, own: Span) -> Window:
    """The ``data`` a non-root passes the binomial components, blocks of ``counts``.

    A leaf's subtree is its own block, so its window is ``own`` (where its
    block is read or lands); an inner rank gets new scratch for its
    subtree's blocks, the sum of their counts (with even counts, ``count``
    times the subtree's size, at most ``p/2``).
    """
    bounds = block_bounds(counts)
    vrank = (rank - root) % size
    end = _subtree_end(vrank, size)
    if end - vrank == 1:
        store = own
    else:
        store = b.alloc(sum(counts[(v + root) % size] for v in range(vrank, end)))
    return Window(store, bounds[rank], bounds[size])


def binomial_scatter_steps(b: ScheduleBuilder, rank: int, size: int, root: int,
                           counts, data: Span) -> None:
    """Scatter block ``i`` of the root's ``data`` to rank ``i``, down a binomial tree.

    ``counts[i]`` is block ``i``'s length; block ``i`` sits at its
    displacement in ``data`` on the root and lands at the same place on rank
    ``i``. A rank receives its whole subtree's blocks from its parent (one
    round), then hands one child per round its subtree, farthest child
    (largest subtree) first; a subtree that wraps around the end of the
    vector travels as two messages (:func:`subtree_spans`). A non-root may
    pass a :class:`Window` as ``data``, to keep just its subtree.

    Rounds: ``ceil(log2 p)`` along the deepest path (the root sends in
    each; a rank receives in one round, then sends to one child per round).
    Sent by the root: ``n (p-1)/p``; temp memory: none.
    Reference: Thakur, Rabenseifner & Gropp 2005 (binomial scatter); MPICH.

    Trace, p=4, root 0: round 1: 0 sends blocks 2,3 to 2; round 2: 0 sends
    block 1 to 1 and 2 sends block 3 to 3.
    """
    bounds = block_bounds(counts)
    vrank = (rank - root) % size
    parent = binomial_parent(vrank)
    if parent is not None:
        peer = (parent + root) % size
        b.exchange(recvs=[(peer, s) for s in subtree_spans(data, bounds, root, vrank)])
    for child in reversed(binomial_children(vrank, size)):
        b.exchange(sends=[((child + root) % size, s)
                          for s in subtree_spans(data, bounds, root, child)])


@register(("scatter", "scatterv"), "linear")
def linear(rank, size, count, *, root) -> Schedule:
    """The root sends every rank its block at once.

    ``count`` is the per-rank tuple (scatter's ``count`` arrives as
    ``(count,) * p``); an empty block travels as no message at all. Any
    size, counts (zeros too) and root; in place at the root. A non-root
    only uses its own count, the root all of them: just what MPI's
    scatterv gives each.

    Rounds: 1 (the root posts its ``p-1`` sends together, then copies its
    own block).
    Bytes sent: every block but its own by the root, ``n (p-1)/p`` with
    equal blocks (``n = count * p``); none elsewhere.
    Temp memory: none.
    Reference: Open MPI's ``basic_linear`` scatter and scatterv; MPICH
    ``scatterv_allcomm_linear``.

    Trace, p=4, root 0: round 1: 0 sends block 1 to 1, block 2 to 2 and
    block 3 to 3, then copies block 0 into its ``recv``. With counts (2, 0,
    1, 3): 0 sends the element at offset 2 to 2 and the 3 at offset 3 to 3
    (nothing to 1), then copies its first 2 elements into its ``recv``.
    """
    b = ScheduleBuilder()
    mine = Span("recv", 0, count[rank])
    if rank != root:
        b.exchange(recvs=[(root, mine)])
        return b.build()
    bounds = block_bounds(count)
    peers = [(root + v) % size for v in range(1, size)]
    b.exchange(sends=[(r, Span("send", bounds[r], bounds[r + 1])) for r in peers])
    b.copy(Span("send", bounds[root], bounds[root + 1]), mine)
    return b.build()


@register(("scatter", "scatterv"), "binomial")
def binomial(rank, size, count, *, root) -> Schedule:
    """Binomial-tree scatter: ``log2 p`` levels, each halving what moves on.

    ``count`` is the per-rank tuple (scatter's ``count`` arrives as
    ``(count,) * p``). A rank receives its subtree's blocks from its
    parent in one round and hands one child per round its part
    (:func:`binomial_scatter_steps`). The root sends straight from
    ``send``, leaves receive straight into ``recv``, and inner ranks keep
    their subtree in scratch, then copy their block out. Subtrees travel
    as their blocks' packed range, two messages where one wraps past the
    last rank, so no rank rotates the vector (MPICH copies the whole
    vector into scratch at a root other than 0); an empty one travels as
    no message at all. Every rank needs the whole tuple (a non-root sizes
    its scratch and its messages by its subtree's counts), where MPI's
    scatterv gives a non-root only its own count: the MPI layer exchanges
    the counts first, and every rank passes the same tuple. Any size,
    counts (zeros too) and root; in place at the root.

    Rounds: ``ceil(log2 p)`` along the deepest path (a rank sends to one
    child per round, the root in each round).
    Bytes sent: every block but its own by the root, ``n (p-1)/p`` with
    equal blocks (``n = count * p``); its subtree's blocks but its own by
    an inner rank.
    Temp memory: none on the root and on leaves, the sum of its subtree's
    counts on inner ranks (with equal blocks ``count`` times the subtree's
    size, at most ``p/2``).
    Reference: Thakur, Rabenseifner & Gropp 2005; MPICH
    ``scatter_intra_binomial`` (on uneven blocks too: MPICH's and Open
    MPI's basic scatterv are linear, having the counts at the root only).

    Trace, p=4, root 0: round 1: 0 sends blocks 2,3 to 2; round 2: 0 sends
    block 1 to 1 and 2 sends block 3 to 3, then 0 copies block 0 and 2
    block 2 into their ``recv``. With counts (2, 0, 1, 3): round 1: 0 sends
    4 elements (blocks 2,3) to 2; round 2: 2 sends its last 3 to 3 (0
    sends nothing to 1) and copies its first 1 into its ``recv``.
    """
    b = ScheduleBuilder()
    bounds = block_bounds(count)
    mine = Span("recv", 0, count[rank])
    if rank == root:
        data = Span("send", 0, bounds[size])
    else:
        data = subtree_window(b, rank, size, root, count, mine)
    binomial_scatter_steps(b, rank, size, root, count, data)
    b.copy(data.sub(bounds[rank], bounds[rank + 1]), mine)
    return b.build()
