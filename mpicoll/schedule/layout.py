"""Buffer layouts: how long ``send`` and ``recv`` are for each collective,
and which part of one stands in for the other in an in-place call.

Both the MPI layer and the simulator take their buffers from here, so the
simulator exercises exactly the aliasing a real in-place call has.

``count`` is elements per rank's contribution, as MPI's count arguments are:
the whole vector for allreduce, reduce, bcast, scan and exscan; one block
for allgather, gather, scatter, alltoall (one block per pair) and
reduce_scatter_block; a per-rank tuple for reduce_scatter and allgatherv
(blocks packed in rank order: displacements are the prefix sums).

In-place calls: for the collectives in :data:`INPLACE_ALIASED`,
:func:`inplace_send` gives the part of ``recv`` the input is read from (at
the root only for reduce and gather); for scatter, :func:`inplace_recv`
gives the part of the root's ``send`` its own block stays in. The others
(reduce_scatter, alltoall) are staged through a copy by the MPI layer.
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
)

INPLACE_ALIASED = ("allreduce", "reduce", "allgather", "gather", "allgatherv",
                   "scan", "exscan")
ROOT_ONLY_INPLACE = ("reduce", "gather", "scatter")


def block_counts(collective: str, size: int, count) -> tuple[int, ...]:
    """Per-rank block sizes of a block-per-rank style ``count`` argument."""
    if collective in ("reduce_scatter", "allgatherv"):
        return tuple(count)
    return (count,) * size


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
    if collective == "gather":
        return count, count * size if rank == root else 0
    if collective == "scatter":
        return count * size if rank == root else 0, count
    if collective in ("scan", "exscan"):
        return count, count
    if collective == "barrier":
        return 0, 0
    raise KeyError(collective)


def inplace_send(collective: str, recv, rank: int, size: int, count):
    """The view of ``recv`` an in-place call reads its input from."""
    if collective in ("allreduce", "reduce", "scan", "exscan"):
        return recv
    if collective in ("allgather", "gather"):
        return recv[rank * count:(rank + 1) * count]
    if collective == "allgatherv":
        start = sum(count[:rank])
        return recv[start:start + count[rank]]
    raise ValueError(f"{collective} has no aliased in-place layout")


def inplace_recv(collective: str, send, rank: int, count):
    """For scatter at the root: the view of ``send`` that stays in place."""
    if collective == "scatter":
        return send[rank * count:(rank + 1) * count]
    raise ValueError(f"{collective} has no in-place receive layout")
