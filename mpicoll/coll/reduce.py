"""Reduce: every rank's vector folded into the root's ``recv``.

Buffers: ``send`` holds ``count`` elements on every rank, ``recv`` ``count``
on the root and nothing elsewhere (never touched off the root). An in-place
call aliases the root's ``send`` to its ``recv``, so no schedule here writes
the root's ``recv`` before it has last read its ``send``.

Also holds :func:`binomial_steps`, the binomial-tree reduction that allreduce
reuses.
"""

from __future__ import annotations

from mpicoll.coll.gather import binomial_gather_steps
from mpicoll.coll.reduce_scatter import recursive_halving_steps
from mpicoll.coll.registry import register
from mpicoll.schedule.core import Schedule, ScheduleBuilder, Span
from mpicoll.topo import (
    binomial_children,
    binomial_parent,
    block_bounds,
    block_partition,
    fold_bounds,
    fold_rank,
    unfold_rank,
)


@register("reduce", "linear")
def linear(rank, size, count, *, root, commutative) -> Schedule:
    """Every rank sends to the root, which folds the vectors in one by one.

    Any op: the root starts from its own vector, appends the ranks above it
    on the right, then those below it on the left, so the result is
    exactly ``x0 op x1 op ... op x{p-1}`` for an associative op.

    Rounds: ``p-1`` on the root (one receive and one reduction each), 1 on
    a non-root.
    Bytes sent: ``n`` per non-root; the root receives ``(p-1) n``.
    Temp memory: ``count`` elements on the root (the incoming vector).
    Reference: Open MPI's ``basic_linear`` reduce.

    Trace, p=4, root 1: 0, 2, 3 send to 1; 1 computes ``acc = x1 op x2``,
    ``acc = acc op x3``, ``acc = x0 op acc``, one round each.
    """
    b = ScheduleBuilder()
    src = Span("send", 0, count)
    if rank != root:
        b.exchange(sends=[(root, src)])
        return b.build()
    acc = Span("recv", 0, count)
    incoming = b.alloc(count) if size > 1 else None
    partial = src
    for peer in (*range(root + 1, size), *range(root - 1, -1, -1)):
        b.exchange(recvs=[(peer, incoming)])
        if peer > root:
            b.reduce(partial, incoming, acc)
        else:
            b.reduce(incoming, partial, acc)
        partial = acc
    b.copy(partial, acc)  # p == 1: the only step
    return b.build()


def binomial_steps(b: ScheduleBuilder, rank: int, size: int, root: int,
                   src: Span, acc: Span | None, commutative: bool) -> None:
    """Reduce every rank's ``src`` into the root's ``acc`` up a binomial tree.

    ``acc`` is a ``len(src)``-element span this rank may use as its
    accumulator; it may be the very memory of ``src`` (in-place), so
    ``src`` is read before ``acc`` is written. ``None`` (a non-root of a
    reduce) lets this function allocate scratch only where the rank has
    children. A rank receives its children nearest first, one round each,
    folding ``acc = acc op child`` (the child holds higher ranks), then sends
    to its parent. Commutative ops use virtual ranks ``(rank - root) % p``;
    other ops root the tree at rank 0, where ``acc`` always covers a
    contiguous range of ranks, and rank 0 then sends the result to ``root``
    (one more round, as MPICH does). On exit the root's ``acc`` holds the
    reduction; other ranks' ``acc`` holds partial results.
    """
    tree_root = root if commutative else 0
    vrank = (rank - tree_root) % size
    children = binomial_children(vrank, size)
    partial = src  # what this rank's subtree has folded so far
    if children:
        fresh = acc is None  # our own scratch: the first child may land in it
        if fresh:
            acc = b.alloc(len(src))
        incoming = acc if fresh and len(children) == 1 else b.alloc(len(src))
        for i, child in enumerate(children):
            into = acc if fresh and i == 0 else incoming
            b.exchange(recvs=[((child + tree_root) % size, into)])
            b.reduce(partial, into, acc)
            partial = acc
    parent = binomial_parent(vrank)
    if parent is not None:
        b.exchange(sends=[((parent + tree_root) % size, partial)])
    if tree_root != root:
        if rank == tree_root:
            b.exchange(sends=[(root, partial)])
        elif rank == root:
            b.exchange(recvs=[(tree_root, acc)])
    elif rank == root:
        b.copy(partial, acc)  # p == 1: the only step


@register("reduce", "binomial")
def binomial(rank, size, count, *, root, commutative) -> Schedule:
    """Binomial-tree reduction: ``ceil(log2 p)`` steps, any op.

    Non-commutative ops fold in rank order (see :func:`binomial_steps`).

    Rounds: ``ceil(log2 p)`` on the root, one per child plus one to the
    parent elsewhere (plus one on rank 0 and the root for a non-commutative
    op with root != 0).
    Bytes sent: ``n`` per non-root.
    Temp memory: none on leaves, ``count`` on the root and on ranks with
    one child, ``2 count`` on other inner ranks.
    Reference: Thakur, Rabenseifner & Gropp 2005; MPICH ``reduce_intra_binomial``.

    Trace, p=4, root 0: round 1: 1 sends to 0, 3 sends to 2, both of which
    fold ``acc = x op child``; round 2: 2 sends ``x2 op x3`` to 0, which folds
    ``acc = (x0 op x1) op (x2 op x3)``.
    """
    b = ScheduleBuilder()
    acc = Span("recv", 0, count) if rank == root else None
    binomial_steps(b, rank, size, root, Span("send", 0, count), acc, commutative)
    return b.build()


@register("reduce", "rabenseifner", commutative_only=True)
def rabenseifner(rank, size, count, *, root, commutative) -> Schedule:
    """Rabenseifner: recursive-halving reduce-scatter, then binomial gather to root.

    The vector is cut into ``p`` near-equal blocks; the reduce-scatter
    leaves block ``i`` reduced on rank ``i`` and a binomial gather collects
    the blocks at the root, all in the root's ``recv`` and in one
    ``count``-element vector elsewhere. For p not a power of two the
    reduce-scatter folds (:func:`recursive_halving_steps`) and, as in MPICH,
    does not unfold: the ``pof2 = floor_pow2(p)`` core ranks gather the
    merged blocks, and a folded root (an even rank below ``2 (p - pof2)``)
    gets the whole result from the odd rank above it at the end.
    Commutative ops only.

    Rounds: ``2 log2 p`` for a power of two: ``log2 pof2`` in the
    reduce-scatter (plus 1 on folded ranks), at most 2 in the gather
    (``log2 pof2`` along its deepest path), plus 1 on a folded root and the
    rank it folded into.
    Bytes sent per rank: about ``n (p-1)/p`` in the reduce-scatter (``n``
    from a folded rank), and the root receives about ``n (p-1)/p`` in the
    gather: about ``2n`` in all at the root against binomial's ``n log2 p``,
    which pays off for long vectors.
    Temp memory: ``count`` elements plus the reduce-scatter's landing half
    (about ``count/2``) on core ranks, just the landing half on the root,
    none on folded non-roots.
    Reference: Rabenseifner 2004; Thakur, Rabenseifner & Gropp 2005; MPICH
    ``reduce_intra_reduce_scatter_gather``.

    Trace, p=4, root 0, blocks B0..B3: round 1: pairs (0,2), (1,3) swap
    halves and reduce (0,1 keep B0,B1; 2,3 keep B2,B3); round 2: pairs (0,1),
    (2,3) swap quarters, so rank i holds reduced Bi; gather: 3 sends B3 to
    2 and 1 sends B1 to 0, then 2 sends B2,B3 to 0.
    """
    counts = block_partition(count, size)
    bounds = block_bounds(counts)
    core = fold_rank(rank, size)
    # The core rank that gathers: the root, or the odd rank a root folded into.
    gatherer = root if fold_rank(root, size) is not None else root + 1
    b = ScheduleBuilder()
    if rank == root:
        data = Span("recv", 0, count)  # may alias send, as work may
    elif core is not None:
        data = b.alloc(count)
    else:
        data = None  # a folded even rank only hands its vector on
    result = None if data is None else data.sub(bounds[rank], bounds[rank + 1])
    recursive_halving_steps(b, rank, size, counts, Span("send", 0, count),
                            result, data, unfold=False)
    if core is not None:
        edges = fold_bounds(bounds)
        pof2 = len(edges) - 1
        binomial_gather_steps(b, core, pof2, fold_rank(gatherer, size),
                              [hi - lo for lo, hi in zip(edges, edges[1:])], data,
                              ranks=[unfold_rank(c, size) for c in range(pof2)])
    if rank == gatherer != root:
        b.exchange(sends=[(root, data)])
    elif rank == root != gatherer:
        b.exchange(recvs=[(gatherer, data)])
    return b.build()
