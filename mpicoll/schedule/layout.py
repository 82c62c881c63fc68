"""Buffer layouts: how long ``send`` and ``recv`` are for each collective,
and which part of ``recv`` stands in for ``send`` in an in-place call.

Both the MPI layer and the simulator take their buffers from here, so the
simulator exercises exactly the aliasing a real in-place call has.

``count`` is elements per rank's contribution, as MPI's count arguments are:
the whole vector for allreduce/reduce/bcast, one block for allgather and
reduce_scatter_block, and a per-rank tuple for reduce_scatter.
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
)

# Collectives whose schedules may run with send aliasing recv (see
# inplace_send); the others stage an in-place call through a copy.
INPLACE_ALIASED = ("allreduce", "reduce", "allgather")


def block_counts(collective: str, size: int, count) -> tuple[int, ...]:
    """Per-rank block sizes of a reduce-scatter style ``count`` argument."""
    if collective == "reduce_scatter":
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
    if collective == "allgather":
        return count, count * size
    if collective in ("reduce_scatter_block", "reduce_scatter"):
        counts = block_counts(collective, size, count)
        return sum(counts), counts[rank]
    if collective == "barrier":
        return 0, 0
    raise KeyError(collective)


def inplace_send(collective: str, recv, rank: int, size: int, count):
    """The view of ``recv`` an in-place call reads its input from."""
    if collective in ("allreduce", "reduce"):
        return recv
    if collective == "allgather":
        return recv[rank * count:(rank + 1) * count]
    raise ValueError(f"{collective} has no aliased in-place layout")
