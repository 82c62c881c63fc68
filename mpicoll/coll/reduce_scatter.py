"""Reduce-scatter: the ranks' vectors are reduced and block ``i`` lands on rank ``i``.

One set of builders serves both collectives: ``reduce_scatter_block``
(every block ``count`` elements) and ``reduce_scatter`` (per-rank counts,
uneven, possibly zero). Builders get the per-rank ``counts`` tuple as
``count``. Buffers: ``send`` holds the whole vector (``sum(counts)``
elements, block ``i`` at its displacement), ``recv`` this rank's
``counts[rank]``. In-place calls are staged through a copy by the layer
above (:mod:`mpicoll.schedule.layout`), so here ``send``
and ``recv`` never alias.

Also holds the components allreduce and reduce build on,
:func:`ring_steps` and :func:`recursive_halving_steps`, called as
``steps(b, rank, size, counts, src, result, work=None, *,
fresh_result=False)``. Their contract:

- ``src`` is this rank's whole input (``sum(counts)`` elements, block ``i``
  at its displacement); on exit ``result`` (``counts[rank]`` elements)
  holds block ``rank`` reduced over all ranks.
- ``result`` may be the very memory of ``src``'s block ``rank`` (an
  in-place caller): that block of ``src`` is read only by the reduction
  that writes ``result``.
- ``work``, if given, is a ``sum(counts)``-element span the steps may
  overwrite freely, partial sums then living at their place in it; it may
  be the very memory of ``src`` (in-place allreduce passes ``recv``).
  Without it the steps allocate their scratch.
- ``fresh_result=True`` promises that ``result`` shares no memory with
  ``src``: the last message then lands in ``result`` and is reduced there
  in place, which saves that landing scratch and a pass over it (measured
  10-30% faster on 2 ranks from 4 MiB up). The collectives here pass it.
  It is ignored when ``work`` is given, since ``result`` may then lie in
  ``work`` where the partial sum the message is reduced with still lives.
- Commutative ops only.
"""

from __future__ import annotations

from typing import NamedTuple

from mpicoll.coll.registry import register
from mpicoll.schedule.core import Schedule, ScheduleBuilder, Span
from mpicoll.topo import (
    block_bounds,
    floor_pow2,
    fold_bounds,
    fold_rank,
    unfold_rank,
)


def ring_steps(b: ScheduleBuilder, rank: int, size: int, counts, src: Span,
               result: Span, work: Span | None = None, *,
               fresh_result: bool = False) -> None:
    """Ring reduce-scatter: ``p-1`` steps adding each rank's share to passing blocks.

    Arguments as in the module docstring. In step ``k`` (``0 .. p-2``) rank
    ``r`` sends its partial sum of block ``r-k-1`` to ``r+1`` (from ``src``
    in step 0, so nothing is copied), receives the partial sum of block
    ``r-k-2`` from ``r-1`` and adds its own share: ``partial = incoming op
    src block``, three operands, into ``work`` (or scratch) and, in the last
    step, block ``r``, into ``result``. Scratch: one block to land in, plus
    one for the partial sum without ``work``; ``fresh_result`` spares the
    landing block of the last step.
    """
    if size == 1:
        b.copy(src, result)
        return
    bounds = block_bounds(counts)

    def block(span: Span, i: int) -> Span:
        i %= size
        return span.sub(bounds[i], bounds[i + 1])

    reduced = [(rank - 2 - k) % size for k in range(size - 1)]  # last: rank
    landed = reduced[:-1] if fresh_result else reduced
    land = b.alloc(max((counts[j] for j in landed), default=0))
    if work is None:
        scratch = b.alloc(max((counts[j] for j in reduced[:-1]), default=0))

        def partial(j: int) -> Span:
            return scratch.sub(0, counts[j])
    else:
        def partial(j: int) -> Span:
            return block(work, j)

    sending = block(src, rank - 1)
    for j in reduced:
        into = result if j == rank and fresh_result else land.sub(0, counts[j])
        b.exchange(sends=[((rank + 1) % size, sending)],
                   recvs=[((rank - 1) % size, into)])
        sending = result if j == rank else partial(j)
        b.reduce(into, block(src, j), sending)


class _Halving(NamedTuple):
    """One exchange of the core's recursive halving, in elements: the
    partner keeps ``[glo, ghi)`` and this rank ``[klo, khi)``."""

    peer: int
    klo: int
    khi: int
    glo: int
    ghi: int


def _halvings(rank: int, size: int, bounds) -> list[_Halving]:
    """The core exchanges of ``rank`` (a core rank, see
    :func:`~mpicoll.topo.fold_rank`), first to last.

    Each halves the range of core ranks this rank and its partner both
    still cover (the partner at core distance ``pof2 / 2^(k+1)`` in step
    ``k``): each keeps the half holding its own blocks and gives the other,
    the elements of a range of core ranks lying together
    (:func:`~mpicoll.topo.fold_bounds`).
    """
    core = fold_rank(rank, size)
    edges = fold_bounds(bounds)
    steps = []
    lo, hi, half = 0, floor_pow2(size), floor_pow2(size) // 2
    while half:
        mid = lo + half
        keep, give = ((lo, mid), (mid, hi)) if core < mid else ((mid, hi), (lo, mid))
        steps.append(_Halving(unfold_rank(core ^ half, size), edges[keep[0]],
                              edges[keep[1]], edges[give[0]], edges[give[1]]))
        (lo, hi), half = keep, half // 2
    return steps


def _partial_sums(b: ScheduleBuilder, work: Span | None, lo: int, hi: int):
    """Where the partial sums of elements ``[a, z)`` live, as a function
    ``acc(a, z) -> Span``: at their place in ``work`` if given, else in new
    scratch holding elements ``[lo, hi)`` (the only ones kept there)."""
    if work is not None:
        return work.sub
    store = b.alloc(hi - lo)

    def acc(a: int, z: int) -> Span:
        return store.sub(a - lo, z - lo)

    return acc


def _exchange_halves(b: ScheduleBuilder, steps: list[_Halving], direct,
                     mine, acc, land: Span, result: Span, own: int,
                     work: Span | None) -> None:
    """Run the core exchanges ``steps``: send the given half of this rank's
    contribution so far (``mine(lo, hi)``, the input, then the partial
    sums ``acc``) and reduce what arrives into the kept half's partial
    sums. A message lands in ``land`` unless ``direct[i]``: then straight
    where it is reduced (the kept half's partial sums; ``result`` in the
    last step). The last step's kept range splits at ``own``, where this
    rank's block starts: the block is reduced into ``result``, the folded
    even neighbour's before it into ``acc`` (one reduction where ``result``
    is that place in ``work``)."""
    last = len(steps) - 1
    for i, (peer, klo, khi, glo, ghi) in enumerate(steps):
        if not direct[i]:
            into = land.sub(0, khi - klo)
        else:
            into = result if i == last else acc(klo, khi)
        b.exchange(sends=[(peer, mine(glo, ghi))], recvs=[(peer, into)])
        if i < last:
            b.reduce(into, mine(klo, khi), acc(klo, khi))
            mine = acc
        elif work is not None and work.sub(own, khi) == result:
            b.reduce(into, mine(klo, khi), acc(klo, khi))
        else:
            b.reduce(into.sub(0, own - klo), mine(klo, own), acc(klo, own))
            b.reduce(into.sub(own - klo, khi - klo), mine(own, khi), result)


def recursive_halving_steps(b: ScheduleBuilder, rank: int, size: int, counts,
                            src: Span, result: Span, work: Span | None = None,
                            *, unfold: bool = True,
                            fresh_result: bool = False) -> None:
    """Recursive-halving reduce-scatter, any p: swap and reduce halves of halves.

    Arguments as in the module docstring. With ``pof2 = floor_pow2(p)`` and
    ``rem = p - pof2`` (MPICH's scheme): each of the first ``rem`` even
    ranks sends its whole vector to the odd rank above it, which reduces it
    into its own and stands for both in the power-of-two core (core ranks
    own contiguous rank ranges, so their blocks merge, see
    :func:`~mpicoll.topo.fold_bounds`). In core step ``k`` a
    rank and its partner at core distance ``pof2 / 2^(k+1)`` split the range
    of blocks they both still cover: each sends the half holding the
    partner's blocks and reduces the other half with what it receives. Last,
    each of those odd ranks sends the even one its block (skipped with
    ``unfold=False``: the even rank's ``result`` is then left unwritten and
    its reduced block stays at its place in ``work``, which must be given,
    as Rabenseifner's allreduce wants for its allgather).

    Scratch, ``n = sum(counts)``: with ``work``, the largest half received
    (about ``n/2``; ``n`` on the folded odd ranks, which take a whole
    vector); without, the first kept half plus the largest later one (about
    ``3n/4``; ``3n/2`` on the folded odd ranks). Where the scratch is our own,
    the first message that fills it lands there directly and is reduced in
    place; ``fresh_result`` spares the landing scratch of the last step
    (on the ranks that are not folded).
    """
    if size == 1:
        b.copy(src, result)
        return
    bounds = block_bounds(counts)
    total = bounds[size]
    folded = rank < 2 * (size - floor_pow2(size))
    if folded and rank % 2 == 0:  # stands aside, its vector handed up
        b.exchange(sends=[(rank + 1, src)])
        if unfold:
            b.exchange(recvs=[(rank + 1, result)])
        return
    steps = _halvings(rank, size, bounds)
    # Messages that land where they are reduced, sparing landing scratch:
    # the first into our own partial sums, the last into a fresh result.
    first_direct = work is None and not folded and len(steps) > 1
    last_direct = fresh_result and work is None and not folded
    direct = [(i == 0 and first_direct) or (i == len(steps) - 1 and last_direct)
              for i in range(len(steps))]
    # Our own partial sums: a folded rank's whole vector, else the first
    # kept half where its message lands there, else none (only the final
    # reduction, into result).
    if folded:
        kept = (0, total)
    elif first_direct:
        kept = (steps[0].klo, steps[0].khi)
    else:
        kept = (0, 0)
    acc = _partial_sums(b, work, *kept)
    landing = [step.khi - step.klo for step, d in zip(steps, direct) if not d]
    if folded and work is not None:
        landing.append(total)
    land = b.alloc(max(landing, default=0))
    mine = src.sub  # this rank's contribution (so far) to elements [lo, hi)
    if folded:  # the even neighbour's vector, reduced into this one's
        into = land.sub(0, total) if work is not None else acc(0, total)
        b.exchange(recvs=[(rank - 1, into)])
        b.reduce(into, src, acc(0, total))
        mine = acc
    _exchange_halves(b, steps, direct, mine, acc, land, result, bounds[rank],
                     work)
    if folded and unfold:
        b.exchange(sends=[(rank - 1, acc(bounds[rank - 1], bounds[rank]))])


def _reduce_scatter(steps, rank: int, size: int, counts) -> Schedule:
    """A schedule running component ``steps`` from ``send`` into ``recv``."""
    b = ScheduleBuilder()
    steps(b, rank, size, counts, Span("send", 0, sum(counts)),
          Span("recv", 0, counts[rank]), fresh_result=True)
    return b.build()


@register(("reduce_scatter", "reduce_scatter_block"), "ring", commutative_only=True)
def ring(rank, size, count, *, commutative) -> Schedule:
    """Ring: ``p-1`` steps, a partial sum of each block travelling round the ring.

    Commutative ops only; any p, any counts. See :func:`ring_steps`.

    Rounds: ``p-1``.
    Bytes sent per rank: ``n (p-1)/p`` (``n`` the whole input),
    bandwidth-optimal.
    Temp memory: two blocks (one where partial sums land, one where they
    are summed: ``2 count`` elements for ``reduce_scatter_block``); none for
    p=2, as the last message lands in ``recv``.
    Reference: Patarasuk & Yuan 2009; Thakur, Rabenseifner & Gropp 2005.

    Trace, p=4, rank 1: step 1: sends its block 0 to 2, receives x0's block 3
    from 0 and adds its own; step 2: passes that on, receives block 2
    (x3 + x0) from 0 and adds its own; step 3: receives block 1 (x2 + x3 +
    x0) and adds its own into ``recv``.
    """
    return _reduce_scatter(ring_steps, rank, size, count)


@register(("reduce_scatter", "reduce_scatter_block"), "recursive_halving",
          commutative_only=True)
def recursive_halving(rank, size, count, *, commutative) -> Schedule:
    """Recursive halving: ``log2 p`` exchanges of halves of halves; any p by folding.

    For p not a power of two, the ``p - pof2`` folded odd ranks each take
    their even neighbour's whole vector first and send it its block last.
    Commutative ops only (the core's halving does not keep rank order); any
    p, any counts. See :func:`recursive_halving_steps`.

    Rounds: ``log2 p`` for a power of two; otherwise ``floor(log2 p) + 2``
    on the folded odd ranks (2 on the even ones) and ``floor(log2 p)`` on
    the others.
    Bytes sent per rank: ``n (p-1)/p`` for a power of two (``n`` the whole
    input); a folded even rank sends ``n``.
    Temp memory: about ``3n/4`` (``n/2`` for p=4, none for p=2; ``3n/2`` on
    folded odd ranks, none on folded even ones).
    Reference: Thakur, Rabenseifner & Gropp 2005; MPICH
    ``reduce_scatter_intra_recursive_halving``.

    Trace, p=4, blocks B0..B3: step 1: pairs (0,2) and (1,3) swap halves;
    0 and 1 keep B0,B1 reduced over two ranks, 2 and 3 B2,B3; step 2: pairs
    (0,1), (2,3) swap quarters, leaving Bi reduced over all ranks on rank i.
    """
    return _reduce_scatter(recursive_halving_steps, rank, size, count)


@register(("reduce_scatter", "reduce_scatter_block"), "pairwise")
def pairwise(rank, size, count, *, commutative) -> Schedule:
    """Pairwise exchange: ``p-1`` steps, step i trading blocks with ``r±i``; any op.

    In step ``i`` (``1 .. p-1``) rank ``r`` sends its share of block ``r+i``
    to ``r+i`` and receives ``r-i``'s share of its own block. Shares thus
    arrive from ``r-1, r-2, ..., 0`` and then ``p-1, ..., r+1``. A
    commutative op adds each to one accumulator in ``recv``; otherwise the
    first run is prepended to a left fold in ``recv``
    (``x_{r-i} op ... op x_r``), the second to a right fold in scratch
    (``x_{r+1} op ... op x_{p-1}``), and ``recv = left op right`` at the end,
    so the result is exactly ``x0 op x1 op ... op x{p-1}``. The first share
    of each fold lands straight in its place. Any op, any p, any counts.

    Rounds: ``p-1``.
    Bytes sent per rank: ``n (p-1)/p`` (``n`` the whole input).
    Temp memory: one block to land in (none for p=2); a non-commutative op
    needs one more block for the right fold on ranks other than the first
    and last.
    Reference: Thakur, Rabenseifner & Gropp 2005; MPICH
    ``reduce_scatter_intra_pairwise``.

    Trace, p=4, rank 1, non-commutative: step 1: sends its share of block 2
    to 2, receives x0 from 0: ``recv = x0 op x1``; step 2: block 3 to 3, x3
    from 3: ``right = x3``; step 3: block 0 to 0, x2 from 2:
    ``right = x2 op x3``; last ``recv = recv op right``.
    """
    counts = count
    bounds = block_bounds(counts)
    n = counts[rank]
    b = ScheduleBuilder()
    result = Span("recv", 0, n)
    own = Span("send", bounds[rank], bounds[rank + 1])
    n_left = size - 1 if commutative else rank  # shares joining the left fold
    n_right = size - 1 - n_left
    land = b.alloc(n) if n_left > 1 or n_right > 1 else None
    if n_right == 0:
        right = None
    elif n_left == 0:
        right = result  # nothing else will be there before the end
    elif n_right == 1 and land is not None:
        right = land  # the left fold is done with it by then
    else:
        right = b.alloc(n)
    left = own
    for i in range(1, size):
        to, frm = (rank + i) % size, (rank - i) % size
        if i <= n_left:
            into = result if i == 1 else land
        else:
            into = right if i == n_left + 1 else land
        b.exchange(sends=[(to, Span("send", bounds[to], bounds[to + 1]))],
                   recvs=[(frm, into)])
        if i <= n_left:
            b.reduce(into, left, result)
            left = result
        elif i > n_left + 1:
            b.reduce(land, right, right)
    if right is None:
        b.copy(left, result)  # p == 1; otherwise left is result already
    else:
        b.reduce(left, right, result)
    return b.build()
