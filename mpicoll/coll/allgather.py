"""Allgather(v): every rank ends with every rank's block, in rank order.

Buffers: ``send`` holds this rank's ``count`` elements, ``recv`` the
``count * p`` of all ranks, block ``i`` at ``i * count``. Allgatherv's
``count`` is the per-rank tuple: ``send`` holds ``count[rank]`` elements
and the blocks are packed in ``recv`` (displacements the prefix sums). An
in-place call aliases ``send`` to this rank's own block of ``recv``.
Allgather is allgatherv with ``(count,) * p``: the ring and recursive
doubling are one builder each on per-rank counts, registered for both
(the registry widens allgather's ``count``, :mod:`mpicoll.coll.registry`);
Bruck's is allgather's alone.

Also holds the components other collectives build on, all working in one
vector ``data`` of per-rank blocks (uneven, possibly empty: block ``i`` is
``counts[i]`` elements at its displacement): :func:`ring_steps` and
:func:`recursive_doubling_steps` (allreduce, van de Geijn's broadcast),
which lay out the power-of-two core's blocks by
:func:`~mpicoll.topo.fold_bounds`, as the recursive-halving reduce-scatter does.
"""

from __future__ import annotations

from mpicoll.coll.registry import register
from mpicoll.schedule.core import Schedule, ScheduleBuilder, Span
from mpicoll.topo import (
    block_bounds,
    floor_pow2,
    fold_bounds,
    fold_rank,
    unfold_rank,
)


def ring_steps(b: ScheduleBuilder, rank: int, size: int, counts,
               data: Span) -> None:
    """Ring allgather of the blocks of ``data``, in place.

    On entry rank ``r`` holds block ``r`` of ``data``; on exit every block.
    In step ``k`` (``0 .. p-2``) rank ``r`` passes block ``r-k`` to ``r+1``
    and receives block ``r-k-1`` from ``r-1``, straight into its place.
    """
    bounds = block_bounds(counts)

    def block(i: int) -> Span:
        i %= size
        return data.sub(bounds[i], bounds[i + 1])

    right, left = (rank + 1) % size, (rank - 1) % size
    for k in range(size - 1):
        b.exchange(sends=[(right, block(rank - k))],
                   recvs=[(left, block(rank - k - 1))])


def recursive_doubling_steps(b: ScheduleBuilder, rank: int, size: int, counts,
                             data: Span) -> None:
    """Recursive-doubling allgather of the blocks of ``data``, in place, any p.

    On entry rank ``r`` holds block ``r`` of ``data``; on exit every block.
    With ``pof2 = floor_pow2(p)`` and ``rem = p - pof2``: each of the first
    ``rem`` even ranks first gives its block to the odd rank above it; the
    ``pof2`` core ranks then exchange
    ever larger ranges of blocks with partners at distance 1, 2, 4, ... (in
    core ranks, whose blocks are contiguous, see
    :func:`~mpicoll.topo.fold_bounds`); last,
    each of those odd ranks sends the whole vector back to its even rank.
    """
    pof2 = floor_pow2(size)
    rem = size - pof2
    core = fold_rank(rank, size)
    bounds = block_bounds(counts)
    edges = fold_bounds(bounds)
    if rank < 2 * rem:
        if rank % 2 == 0:
            b.exchange(sends=[(rank + 1, data.sub(bounds[rank], bounds[rank + 1]))])
        else:
            b.exchange(recvs=[(rank - 1, data.sub(bounds[rank - 1], bounds[rank]))])
    if core is not None:
        mask = 1
        while mask < pof2:
            peer = unfold_rank(core ^ mask, size)
            mine = core & -mask  # first core rank of this rank's current group
            theirs = mine ^ mask
            b.exchange(sends=[(peer, data.sub(edges[mine], edges[mine + mask]))],
                       recvs=[(peer, data.sub(edges[theirs], edges[theirs + mask]))])
            mask <<= 1
    if rank < 2 * rem:
        whole = data.sub(0, bounds[size])
        if rank % 2 == 0:
            b.exchange(recvs=[(rank + 1, whole)])
        else:
            b.exchange(sends=[(rank - 1, whole)])


def _allgather(steps, rank: int, size: int, counts) -> Schedule:
    """Copy ``send`` into this rank's block of ``recv``, then run ``steps`` there."""
    bounds = block_bounds(counts)
    b = ScheduleBuilder()
    b.copy(Span("send", 0, counts[rank]),
           Span("recv", bounds[rank], bounds[rank + 1]))
    steps(b, rank, size, counts, Span("recv", 0, bounds[size]))
    return b.build()


@register(("allgather", "allgatherv"), "ring")
def ring(rank, size, count) -> Schedule:
    """Ring: ``p-1`` steps, each rank passing on the block it got last.

    ``count`` is the per-rank tuple (allgather's ``count`` arrives as
    ``(count,) * p``); an empty block travels as no message at all. Any p
    and counts, zeros too.

    Rounds: ``p-1`` (after the copy of ``send``).
    Bytes sent: ``n (p-1)/p`` per rank with equal blocks (``n`` the whole
    output), bandwidth-optimal; latency ``(p-1) α`` makes it the choice
    for long vectors. With uneven counts rank ``r`` sends every block but
    rank ``r+1``'s, and each step lasts as long as its largest block: up
    to ``(p-1) max(count)``.
    Temp memory: none; every block is received into its final place.
    Reference: Thakur, Rabenseifner & Gropp 2005; Patarasuk & Yuan 2009;
    MPICH ``allgather_intra_ring`` and ``allgatherv_intra_ring``.

    Trace, p=4 (rank r starts with block r): step 1: r sends block r to r+1;
    step 2: r forwards block r-1; step 3: r forwards block r-2, and now holds
    all four. With block 1 empty, rank 1 sends nothing in step 1 and rank 2
    nothing in step 2.
    """
    return _allgather(ring_steps, rank, size, count)


@register(("allgather", "allgatherv"), "recursive_doubling")
def recursive_doubling(rank, size, count) -> Schedule:
    """Recursive doubling: ``log2 p`` exchanges of ever larger halves; any p by folding.

    ``count`` is the per-rank tuple (allgather's ``count`` arrives as
    ``(count,) * p``); an empty range of blocks travels as no message at
    all. For p not a power of two, ``pof2 = floor_pow2(p)``, the ``p -
    pof2`` folded odd ranks take their even neighbour's block first and
    send the whole vector back to it last. Any p and counts, zeros too.

    Rounds: ``log2 p`` for a power of two; otherwise ``floor(log2 p) + 2``
    on the folded odd ranks (2 rounds on the even ones), after a copy of
    ``send`` into ``recv``.
    Bytes sent: ``n (p-1)/p`` per rank with equal blocks and a power of
    two; the folded odd ranks send ``n`` more. With uneven counts a core rank
    sends its group's blocks in each step.
    Temp memory: none.
    Reference: Thakur, Rabenseifner & Gropp 2005; MPICH
    ``allgather_intra_recursive_doubling`` (which needs a power of two; the
    fold is MPICH's allreduce one) and
    ``allgatherv_intra_recursive_doubling``.

    Trace, p=4: step 1: pairs (0,1), (2,3) swap their blocks; step 2: pairs
    (0,2), (1,3) swap their pairs of blocks. With p=5: 0 first gives block 0
    to 1, the core {1,2,3,4} doubles, then 1 sends all five blocks to 0.
    """
    return _allgather(recursive_doubling_steps, rank, size, count)


@register("allgather", "bruck")
def bruck(rank, size, count) -> Schedule:
    """Bruck: ``ceil(log2 p)`` rounds for any p, then one local rotation.

    Rank ``r`` gathers blocks ``r, r+1, ..., r+p-1`` (mod p) in that order in
    a scratch vector: in round ``k`` (distance ``d = 2^k``) it sends the
    first ``min(d, p-d)`` blocks it holds to ``r-d`` and appends as many
    from ``r+d``. Two copies then rotate the scratch into ``recv``. Any p.

    Rounds: ``ceil(log2 p)`` for every p (the latency-optimal choice for
    short vectors when p is not a power of two).
    Bytes sent per rank: ``n (p-1)/p``.
    Temp memory: ``count * p`` elements (none for p=1).
    Reference: Bruck, Ho, Kipnis, Upfal & Weathersby 1997; Thakur,
    Rabenseifner & Gropp 2005; MPICH ``allgather_intra_brucks``.

    Trace, p=4, rank 1 (scratch in relative order): round 1: sends its own
    block to 0, receives block 2 from 2: ``[1, 2]``; round 2: sends
    ``[1, 2]`` to 3, receives ``[3, 0]`` from 3: ``[1, 2, 3, 0]``; rotation:
    ``recv = [0, 1, 2, 3]``.
    """
    b = ScheduleBuilder()
    own = Span("send", 0, count)
    if size == 1:
        b.copy(own, Span("recv", 0, count))
        return b.build()
    held = b.alloc(size * count)  # relative block j is block (rank + j) % p
    d = 1
    while d < size:
        n = min(d, size - d)
        first = own if d == 1 else held.sub(0, n * count)
        b.exchange(sends=[((rank - d) % size, first)],
                   recvs=[((rank + d) % size, held.sub(d * count, (d + n) * count))])
        if d == 1:
            b.copy(own, held.sub(0, count))  # after round 1 sent it from send
        d *= 2
    split = (size - rank) * count  # relative blocks from here on wrap to block 0
    b.copy(held.sub(0, split), Span("recv", rank * count, size * count))
    b.copy(held.sub(split, size * count), Span("recv", 0, rank * count))
    return b.build()
