"""Buffer layouts: how long ``send`` and ``recv`` are for each collective,
and which part of one stands in for the other in an in-place call.

Both the MPI layer and the simulator take their buffers from here, so the
simulator exercises exactly the aliasing a real in-place call has.

``count`` is elements per rank's contribution, as MPI's count arguments are:
the whole vector for allreduce, reduce, bcast, scan and exscan; one block
for allgather, gather, scatter, alltoall (one block per pair) and
reduce_scatter_block; a per-rank tuple for reduce_scatter, allgatherv,
gatherv and scatterv (blocks packed in rank order: displacements are the
prefix sums); for alltoallv the whole ``p`` × ``p`` matrix as a tuple of
rows, ``count[i][j]`` the elements rank ``i`` sends rank ``j`` (rank ``i``'s
``send`` packs its blocks for ``j = 0 .. p-1`` in order, its ``recv`` the
blocks from ``i = 0 .. p-1``). Every rank passes the same tuple or matrix.

In-place calls: for the collectives in :data:`INPLACE_ALIASED`,
:func:`inplace_send` gives the part of ``recv`` the input is read from (at
the root only for reduce, gather and gatherv); for scatter and scatterv,
:func:`inplace_recv` gives the part of the root's ``send`` its own block
stays in. The others (reduce_scatter, alltoall, alltoallv) are staged
through a copy by the MPI layer.
"""

from __future__ import annotations

COLLECTIVES = (
    "allreduce",
    "reduce",
    "bcast",
    "allgather",
    "reduce_scatter_block",
    "reduce_scatter",
    "barrier",
    "gather",
    "scatter",
    "allgatherv",
    "alltoall",
    "scan",
    "exscan",
    "gatherv",
    "scatterv",
    "alltoallv",
)

INPLACE_ALIASED = ("allreduce", "reduce", "allgather", "gather", "allgatherv",
                   "scan", "exscan", "gatherv")
ROOT_ONLY_INPLACE = ("reduce", "gather", "scatter", "gatherv", "scatterv")
PER_RANK_COUNTS = ("reduce_scatter", "allgatherv", "gatherv", "scatterv")


def block_counts(collective: str, size: int, count) -> tuple[int, ...]:
    """Per-rank block sizes of a block-per-rank style ``count`` argument."""
    if collective in PER_RANK_COUNTS:
        return tuple(count)
    return (count,) * size


def _own_block(collective: str, rank: int, count) -> tuple[int, int]:
    """Where ``rank``'s block of a packed block-per-rank vector starts and stops."""
    counts = block_counts(collective, rank + 1, count)  # blocks 0..rank suffice
    start = sum(counts[:rank])
    return start, start + counts[rank]


def buffer_lengths(collective: str, rank: int, size: int, count, root: int = 0):
    """``(send, recv)`` lengths in elements on ``rank``."""
    if collective == "allreduce":
        return count, count
    if collective == "reduce":
        return count, count if rank == root else 0
    if collective == "bcast":
        return 0, count
    if collective in ("allgather", "alltoall"):
        return count * (1 if collective == "allgather" else size), \
            count * size
    if collective == "allgatherv":
        return count[rank], sum(count)
    if collective in ("reduce_scatter_block", "reduce_scatter"):
        counts = block_counts(collective, size, count)
        return sum(counts), counts[rank]
    if collective in ("gather", "gatherv", "scatter", "scatterv"):
        counts = block_counts(collective, size, count)
        whole = sum(counts) if rank == root else 0
        if collective in ("gather", "gatherv"):
            return counts[rank], whole
        return whole, counts[rank]
    if collective == "alltoallv":
        return sum(count[rank]), sum(row[rank] for row in count)
    if collective in ("scan", "exscan"):
        return count, count
    if collective == "barrier":
        return 0, 0
    raise KeyError(collective)


def inplace_send(collective: str, recv, rank: int, size: int, count):
    """The view of ``recv`` an in-place call reads its input from."""
    if collective in ("allreduce", "reduce", "scan", "exscan"):
        return recv
    if collective in ("allgather", "gather", "allgatherv", "gatherv"):
        start, stop = _own_block(collective, rank, count)
        return recv[start:stop]
    raise ValueError(f"{collective} has no aliased in-place layout")


def inplace_recv(collective: str, send, rank: int, count):
    """For scatter and scatterv at the root: the view of ``send`` that stays
    in place."""
    if collective in ("scatter", "scatterv"):
        start, stop = _own_block(collective, rank, count)
        return send[start:stop]
    raise ValueError(f"{collective} has no in-place receive layout")
