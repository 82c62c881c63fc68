"""Buffer layouts: how long ``send`` and ``recv`` are for each collective,
and which part of one stands in for the other in an in-place call.

Both the MPI layer and the simulator take their buffers from here, so the
simulator exercises exactly the aliasing a real in-place call has. Every
fact comes from the collective's row in :data:`mpicoll.collectives.COLLECTIVES`.

``count`` is elements per rank's contribution, as MPI's count arguments are,
shaped as the row's ``counts`` says: the whole vector for allreduce, reduce,
bcast, scan and exscan; one block for allgather, gather, scatter, alltoall
(one block per pair) and reduce_scatter_block; a per-rank tuple for
reduce_scatter, allgatherv, gatherv and scatterv (blocks packed in rank
order: displacements are the prefix sums); for alltoallv the whole ``p`` ×
``p`` matrix as a tuple of rows, ``count[i][j]`` the elements rank ``i``
sends rank ``j`` (rank ``i``'s ``send`` packs its blocks for
``j = 0 .. p-1`` in order, its ``recv`` the blocks from ``i = 0 .. p-1``).
Every rank passes the same tuple or matrix. The row's ``all_blocks`` says
which buffer holds every rank's block (at the root only for rooted
collectives); ``single_buffer`` (bcast) that there is no send buffer.

In-place calls: where the row's ``inplace`` is ``"aliased"``,
:func:`inplace_send` gives the part of ``recv`` the input is read from (at
the root only where ``inplace_root_only``: reduce, gather and gatherv);
where it is ``"root_keeps"`` (scatter and scatterv), :func:`inplace_recv`
gives the part of the root's ``send`` its own block stays in. The
``"staged"`` ones (reduce_scatter, alltoall, alltoallv) are staged through
a copy by the MPI layer.
"""

from __future__ import annotations

from mpicoll.collectives import COLLECTIVES


def block_counts(collective: str, size: int, count) -> tuple[int, ...]:
    """Per-rank block sizes of a block-per-rank style ``count`` argument."""
    if COLLECTIVES[collective].counts == "per_rank":
        return tuple(count)
    return (count,) * size


def _own_block(collective: str, rank: int, count) -> tuple[int, int]:
    """Where ``rank``'s block of a packed block-per-rank vector starts and stops."""
    counts = block_counts(collective, rank + 1, count)  # blocks 0..rank suffice
    start = sum(counts[:rank])
    return start, start + counts[rank]


def buffer_lengths(collective: str, rank: int, size: int, count, root: int = 0):
    """``(send, recv)`` lengths in elements on ``rank``."""
    row = COLLECTIVES[collective]
    everywhere = not row.rooted or rank == root
    if row.counts == "none":
        return 0, 0
    if row.counts == "whole":
        if row.single_buffer:
            return 0, count
        return count, count if everywhere else 0  # rooted: result at the root
    if row.counts == "matrix":
        return sum(count[rank]), sum(line[rank] for line in count)
    counts = block_counts(collective, size, count)
    whole, own = (sum(counts) if everywhere else 0), counts[rank]
    return (whole if row.all_blocks in ("send", "both") else own,
            whole if row.all_blocks in ("recv", "both") else own)


def inplace_send(collective: str, recv, rank: int, size: int, count):
    """The view of ``recv`` an in-place call reads its input from."""
    row = COLLECTIVES[collective]
    if row.inplace != "aliased":
        raise ValueError(f"{collective} has no aliased in-place layout")
    if row.counts == "whole":
        return recv
    start, stop = _own_block(collective, rank, count)
    return recv[start:stop]


def inplace_recv(collective: str, send, rank: int, count):
    """For scatter and scatterv at the root: the view of ``send`` that stays
    in place."""
    if COLLECTIVES[collective].inplace != "root_keeps":
        raise ValueError(f"{collective} has no in-place receive layout")
    start, stop = _own_block(collective, rank, count)
    return send[start:stop]
