"""Allreduce: every rank ends with the reduction of all ranks' vectors.

Buffers: ``send`` and ``recv`` of ``count`` elements each; an in-place call
makes them the same memory, so no schedule here writes a part of ``recv``
before it has last read that part of ``send`` (three-operand reductions,
``recv = incoming op send``, are both alias-safe and copy-free).

Besides recursive doubling and Rabenseifner (written out here in MPICH's
step order, nearest partner first, which the reduce-scatter component
cannot take: it must leave block ``r`` on rank ``r``), the algorithms are
compositions of components from the other collectives' modules, as in
MPICH: ring = ring reduce-scatter + ring allgather, reduce_bcast =
binomial reduce + binomial broadcast. The compositions keep their partial
sums in ``recv``, which the reduce-scatters take as ``work``.
"""

from __future__ import annotations

from mpicoll.coll import allgather, bcast, reduce, reduce_scatter
from mpicoll.coll.registry import register
from mpicoll.schedule.core import Schedule, ScheduleBuilder, Span
from mpicoll.topo import (
    block_bounds,
    block_partition,
    floor_pow2,
    fold_rank,
    unfold_rank,
)


@register("allreduce", "recursive_doubling")
def recursive_doubling(rank, size, count, *, commutative) -> Schedule:
    """Recursive doubling: ``log2 p`` exchanges of the whole vector; any p, any op.

    Core rank ``c`` exchanges its partial result with ``c ^ 2^k`` in step
    ``k`` and reduces, the lower core rank's operand on the left. Folding
    (each of the first ``p - pof2`` even ranks sends its vector to the odd
    rank above and gets the result back at the end) gives every core rank a
    contiguous range of ranks, so the result is exactly
    ``x0 op x1 op ... op x{p-1}`` for any associative op.

    Rounds: ``log2 p`` for a power of two, else ``floor(log2 p) + 2`` on the
    folded odd ranks (2 on the even ones, ``floor(log2 p)`` on the rest).
    Bytes sent per rank: ``n log2 p`` (latency-optimal; the choice for
    short vectors).
    Temp memory: ``count`` elements (none on the folded even ranks).
    Reference: Thakur, Rabenseifner & Gropp 2005; MPICH
    ``allreduce_intra_recursive_doubling``.

    Trace, p=4: step 1: pairs (0,1), (2,3) swap vectors: 0 and 1 hold
    ``x0 op x1``, 2 and 3 ``x2 op x3``; step 2: pairs (0,2), (1,3) swap:
    all hold ``(x0 op x1) op (x2 op x3)``. With p=5: 0 first sends ``x0``
    to 1 (``x0 op x1``), the core {1,2,3,4} doubles, 1 sends the result to 0.
    """
    b = ScheduleBuilder()
    src, out = Span("send", 0, count), Span("recv", 0, count)
    if size == 1:
        b.copy(src, out)
        return b.build()
    folded = rank < 2 * (size - floor_pow2(size))
    if folded and rank % 2 == 0:
        b.exchange(sends=[(rank + 1, src)])
        b.exchange(recvs=[(rank + 1, out)])
        return b.build()
    incoming = b.alloc(count)
    mine = src  # this rank's partial result so far
    if folded:
        b.exchange(recvs=[(rank - 1, incoming)])
        b.reduce(incoming, src, out)
        mine = out
    core = fold_rank(rank, size)
    mask = 1
    while mask < floor_pow2(size):
        peer = unfold_rank(core ^ mask, size)
        b.exchange(sends=[(peer, mine)], recvs=[(peer, incoming)])
        if core & mask:  # the partner covers the lower ranks
            b.reduce(incoming, mine, out)
        else:
            b.reduce(mine, incoming, out)
        mine = out
        mask <<= 1
    if folded:
        b.exchange(sends=[(rank - 1, out)])
    return b.build()


def _reduce_scatter_allgather(reduce_scatter_steps, allgather_steps, counts,
                              rank: int, size: int) -> Schedule:
    """A reduce-scatter of ``send`` into the blocks ``counts`` of ``recv``, then
    an allgather of those blocks, all partial sums living in ``recv``."""
    bounds = block_bounds(counts)
    data = Span("recv", 0, bounds[size])
    b = ScheduleBuilder()
    reduce_scatter_steps(b, rank, size, counts, Span("send", 0, bounds[size]),
                         data.sub(bounds[rank], bounds[rank + 1]), data)
    allgather_steps(b, rank, size, counts, data)
    return b.build()


@register("allreduce", "ring", commutative_only=True)
def ring(rank, size, count, *, commutative) -> Schedule:
    """Ring: ring reduce-scatter then ring allgather, ``2(p-1)`` steps.

    The vector is cut into ``p`` near-equal blocks. Commutative ops only;
    any p. See :func:`mpicoll.coll.reduce_scatter.ring_steps` and
    :func:`mpicoll.coll.allgather.ring_steps`.

    Rounds: ``2(p-1)``.
    Bytes sent per rank: ``2n (p-1)/p``, bandwidth-optimal (the choice for
    long vectors).
    Temp memory: one block (``ceil(count/p)`` elements), where incoming
    partial sums land; the partial sums themselves live in ``recv``.
    Reference: Patarasuk & Yuan 2009; Thakur, Rabenseifner & Gropp 2005.

    Trace, p=4, blocks B0..B3: steps 1-3 (reduce-scatter): rank r sends
    the partial sum of block r-k to r+1 and adds its share to the block
    r-k-1 it receives, ending with Br reduced; steps 4-6 (allgather): rank
    r passes on the reduced block it got last.
    """
    return _reduce_scatter_allgather(reduce_scatter.ring_steps,
                                     allgather.ring_steps,
                                     block_partition(count, size), rank, size)


@register("allreduce", "rabenseifner", commutative_only=True)
def rabenseifner(rank, size, count, *, commutative) -> Schedule:
    """Rabenseifner: recursive-halving reduce-scatter then recursive-doubling allgather.

    MPICH's order (``allreduce_intra_reduce_scatter_allgather``): the
    vector is cut into ``pof2 = floor_pow2(p)`` near-equal blocks; in
    halving step ``k`` core rank ``c`` and its partner ``c ^ 2^k`` (distance
    1 first) split the range of blocks they both still cover, the lower
    rank keeping the lower half: each sends the other half and reduces the
    half it keeps with what it receives. So the largest messages go to the
    nearest ranks (on a torus or a dragonfly, the neighbours: far partners
    only ever exchange small pieces), and core rank ``c`` ends with the
    block whose index is ``c``'s bits reversed. The allgather runs the steps
    backwards (distance ``pof2/2`` first), each rank sending all it holds
    and receiving its partner's range. Non-powers of two fold as recursive
    doubling does: each of the first ``p - pof2`` even ranks sends its
    vector to the odd rank above, which reduces it into its own, and gets
    the result back last. Commutative ops only; any p.

    Rounds: ``2 log2 p`` for a power of two, else ``2 floor(log2 p) + 2``
    on the folded odd ranks (2 on the even ones).
    Bytes sent per rank: ``2n (pof2-1)/pof2``, plus ``n`` on the folded
    ranks; step ``k`` of each phase moves ``n / 2^(k+1)`` (halving) or
    ``n 2^k / pof2`` (doubling).
    Temp memory: the first half received, about ``count/2`` elements
    (``count`` on folded odd ranks, none on folded even ones); partial sums
    live in ``recv``.
    Reference: Rabenseifner 2004; Thakur, Rabenseifner & Gropp 2005; MPICH
    ``allreduce_intra_reduce_scatter_allgather``.

    Trace, p=4, blocks B0..B3: step 1: pairs (0,1), (2,3) swap halves and
    reduce (0 and 2 keep B0,B1; 1 and 3 keep B2,B3); step 2: pairs (0,2),
    (1,3) swap quarters: ranks 0, 1, 2, 3 hold reduced B0, B2, B1, B3;
    steps 3-4 run that backwards: pairs (0,2), (1,3) swap blocks, then
    (0,1), (2,3) swap pairs of blocks.
    """
    b = ScheduleBuilder()
    send, recv = Span("send", 0, count), Span("recv", 0, count)
    pof2 = floor_pow2(size)
    core = fold_rank(rank, size)
    if size == 1:
        b.copy(send, recv)
        return b.build()
    if core is None:  # a folded even rank: hand over, get the result back
        b.exchange(sends=[(rank + 1, send)])
        b.exchange(recvs=[(rank + 1, recv)])
        return b.build()
    bounds = block_bounds(block_partition(count, pof2))
    folded = rank < 2 * (size - pof2)
    scratch = b.alloc(count if folded else bounds[pof2 // 2])  # the larger half
    src = send  # where this rank's partial sums are read from
    if folded:
        b.exchange(recvs=[(rank - 1, scratch)])
        b.reduce(scratch, send, recv)
        src = recv
    steps = []  # (peer, kept [lo, hi), given [lo, hi)) in elements
    lo, hi, mask = 0, pof2, 1
    while mask < pof2:
        mid = (lo + hi) // 2
        low = not core & mask
        keep, give = ((lo, mid), (mid, hi)) if low else ((mid, hi), (lo, mid))
        k, g = [(bounds[x], bounds[y]) for x, y in (keep, give)]
        peer = unfold_rank(core ^ mask, size)
        landing = scratch.sub(0, k[1] - k[0])
        b.exchange(sends=[(peer, src.sub(*g))], recvs=[(peer, landing)])
        b.reduce(landing, src.sub(*k), recv.sub(*k))
        src = recv
        steps.append((peer, k, g))
        (lo, hi), mask = keep, mask << 1
    for peer, k, g in reversed(steps):
        b.exchange(sends=[(peer, recv.sub(*k))], recvs=[(peer, recv.sub(*g))])
    if folded:
        b.exchange(sends=[(rank - 1, recv)])
    return b.build()


@register("allreduce", "reduce_bcast")
def reduce_bcast(rank, size, count, *, commutative) -> Schedule:
    """Binomial reduce to rank 0, then binomial broadcast from it; any op.

    Non-commutative ops fold in rank order. Simple and dependable; rarely
    the fastest. See :func:`mpicoll.coll.reduce.binomial_steps` and
    :func:`mpicoll.coll.bcast.binomial_steps`.

    Rounds: ``2 ceil(log2 p)`` along the deepest path (the reduce receives
    from one child per round, the broadcast sends to one per round).
    Bytes sent per rank: up to ``n ceil(log2 p)`` (rank 0 in the broadcast).
    Temp memory: none on leaves, up to ``count`` elements on inner ranks
    (their partial sums live in ``recv``).
    Reference: Thakur, Rabenseifner & Gropp 2005 (the baseline the others
    beat).

    Trace, p=4: reduce: 1 sends to 0 and 3 to 2; 2 sends ``x2 op x3`` to 0;
    broadcast: 0 sends the result to 2, then 0 and 2 send it to 1 and 3.
    """
    b = ScheduleBuilder()
    data = Span("recv", 0, count)
    reduce.binomial_steps(b, rank, size, 0, Span("send", 0, count), data,
                          commutative)
    bcast.binomial_steps(b, rank, size, 0, data)
    return b.build()
