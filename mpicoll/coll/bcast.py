"""Broadcast: the root's ``recv`` copied into every rank's ``recv``.

Bcast has one buffer per rank, ``recv`` (``count`` elements): the root's
holds the data on entry. Also holds :func:`binomial_steps`, the binomial
broadcast that allreduce reuses.
"""

from __future__ import annotations

from mpicoll.coll.allgather import recursive_doubling_steps, ring_steps
from mpicoll.coll.registry import Phase, register
from mpicoll.coll.scatter import binomial_scatter_steps
from mpicoll.schedule.core import Schedule, ScheduleBuilder, Span
from mpicoll.topo import binomial_children, binomial_parent, block_partition


@register("bcast", "linear")
def linear(rank, size, count, *, root) -> Schedule:
    """The root sends the whole vector to every other rank at once.

    Any size and count.

    Rounds: 1 (the root posts ``p-1`` sends together).
    Bytes sent: ``(p-1) n`` by the root, none elsewhere.
    Temp memory: none.
    Reference: Open MPI's ``basic_linear`` bcast.

    Trace, p=4, root 0: round 1: 0 sends to 1, 2 and 3.
    """
    b = ScheduleBuilder()
    data = Span("recv", 0, count)
    if rank == root:
        b.exchange(sends=[((root + v) % size, data) for v in range(1, size)])
    else:
        b.exchange(recvs=[(root, data)])
    return b.build()


def binomial_steps(b: ScheduleBuilder, rank: int, size: int, root: int,
                   data: Span) -> None:
    """Broadcast the root's ``data`` to every rank's ``data`` down a binomial tree.

    Virtual ranks ``(rank - root) % p``; a rank receives from its parent in
    one round, then sends to one child per round, farthest child (largest
    subtree) first, as MPICH's blocking sends do: the first child starts
    forwarding after one message time instead of sharing the parent's link
    with its siblings until the last copy is out.
    """
    vrank = (rank - root) % size
    parent = binomial_parent(vrank)
    if parent is not None:
        b.exchange(recvs=[((parent + root) % size, data)])
    for child in reversed(binomial_children(vrank, size)):
        b.exchange(sends=[((child + root) % size, data)])


@register("bcast", "binomial")
def binomial(rank, size, count, *, root) -> Schedule:
    """Binomial-tree broadcast: a tree of depth ``log2 p``, best for short vectors.

    Any size and count.

    Rounds: ``ceil(log2 p)`` along the deepest path (the root sends in each;
    a rank receives in one round, then sends to one child per round).
    Bytes sent: ``n`` per child, ``n ceil(log2 p)`` by the root.
    Temp memory: none.
    Reference: Thakur, Rabenseifner & Gropp 2005; MPICH ``bcast_intra_binomial``.

    Trace, p=4, root 0: round 1: 0 sends to 2; round 2: 0 sends to 1 and 2
    to 3.
    """
    b = ScheduleBuilder()
    binomial_steps(b, rank, size, root, Span("recv", 0, count))
    return b.build()


_ALLGATHERS = {"ring": ring_steps, "recursive_doubling": recursive_doubling_steps}


def scatter_allgather_phases(size, count, *, root, allgather) -> list[Phase]:
    """:func:`scatter_allgather` as the two registered collectives it runs:
    the binomial scatter of ``p`` blocks from ``root``, then the allgather
    of the blocks; ``scatter``/``allgather`` where the blocks are equal,
    ``scatterv``/``allgatherv`` with the blocks' counts where not."""
    counts = tuple(block_partition(count, size))
    if len(set(counts)) == 1:
        return [Phase("scatter", "binomial", counts[0], {"root": root}),
                Phase("allgather", allgather, counts[0], {})]
    return [Phase("scatterv", "binomial", counts, {"root": root}),
            Phase("allgatherv", allgather, counts, {})]


@register("bcast", "scatter_allgather", allgather="ring",
          phases=scatter_allgather_phases)
def scatter_allgather(rank, size, count, *, root, allgather) -> Schedule:
    """Van de Geijn: binomial scatter of ``p`` blocks, then an allgather.

    The vector is cut into ``p`` near-equal blocks; the root scatters block
    ``i`` to rank ``i`` and an allgather (param ``allgather``: ``"ring"``, the
    default, as MPICH uses for long vectors, or ``"recursive_doubling"``,
    fewer rounds for medium vectors) completes every rank's copy, all in
    ``recv``.

    Rounds: ``ceil(log2 p) + p-1`` with the ring allgather, ``2 log2 p``
    with recursive doubling for a power of two (the scatter's tree depth
    plus the allgather's rounds).
    Bytes sent: about ``n (p-1)/p`` by the root in the scatter and
    ``n (p-1)/p`` per rank in the allgather: ``2n`` against binomial's
    ``n log2 p``, so it pays off for long vectors.
    Temp memory: none.
    Reference: Barnett, Shuler, van de Geijn et al. 1994; Thakur,
    Rabenseifner & Gropp 2005; MPICH ``bcast_intra_scatter_ring_allgather``.

    Trace, p=4, root 0, blocks B0..B3: scatter: 0 sends B2,B3 to 2, then B1
    to 1 while 2 sends B3 to 3; ring allgather: 3 rounds, rank i sending to
    i+1 the block it got last.
    """
    if allgather not in _ALLGATHERS:
        raise ValueError(f"allgather must be one of {sorted(_ALLGATHERS)}, "
                         f"not {allgather!r}")
    counts = block_partition(count, size)
    data = Span("recv", 0, count)
    b = ScheduleBuilder()
    binomial_scatter_steps(b, rank, size, root, counts, data)
    _ALLGATHERS[allgather](b, rank, size, counts, data)
    return b.build()


@register("bcast", "pipelined", segment=32768)
def pipelined(rank, size, count, *, root, segment) -> Schedule:
    """Pipelined chain: segments flow ``root -> root+1 -> ... -> root-1``.

    The vector travels in segments of ``segment`` elements (param; default
    32768, i.e. 128 KiB of float32, 256 KiB of float64: large enough that a
    segment's transfer outweighs a round's Python overhead of a few µs, small
    enough to fill the pipe for vectors from a few MiB). With ``k =
    ceil(count/segment)`` segments, an inner rank takes ``k+1`` rounds,
    receiving segment ``j`` while forwarding segment ``j-1``; the root posts
    all its sends and the last rank all its receives in one round, since
    messages between a pair match in posting order.

    Rounds: ``p-2+k`` along the chain, ``k = ceil(count/segment)``; ``k+1``
    per inner rank, 1 on the root and on the last rank.
    Bytes sent: ``n`` per rank but the last.
    Temp memory: none.
    Reference: Open MPI ``bcast_intra_pipeline``/chain; Thakur, Rabenseifner
    & Gropp 2005 (pipelining).

    Trace, p=4, root 0, 2 segments S0,S1: 0 sends S0,S1 to 1; 1 receives S0,
    then receives S1 and sends S0 to 2, then sends S1 to 2; 2 likewise to 3;
    3 receives S0,S1.
    """
    if segment < 1:
        raise ValueError(f"segment must be at least 1 element, not {segment}")
    segs = [Span("recv", s, min(s + segment, count))
            for s in range(0, count, segment)]
    vrank = (rank - root) % size
    prev, nxt = (rank - 1) % size, (rank + 1) % size
    b = ScheduleBuilder()
    if size == 1:
        return b.build()
    if vrank == 0:
        b.exchange(sends=[(nxt, s) for s in segs])
    elif vrank == size - 1:
        b.exchange(recvs=[(prev, s) for s in segs])
    else:
        for j in range(len(segs) + 1):
            b.exchange(sends=[(nxt, segs[j - 1])] if j else [],
                       recvs=[(prev, segs[j])] if j < len(segs) else [])
    return b.build()
