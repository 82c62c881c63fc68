"""What each collective is: the one table every other module reads.

A row says, for one collective, everything that does not depend on an
algorithm: mpi4py's method name, whether it has a root or a reduction
operation, how its ``count`` argument is shaped, what its in-place form
does, how many bytes selection and the benchmark attribute to a call, and
nccl-tests' bus-bandwidth factor. Modules ask the row
(``COLLECTIVES["gather"].rooted``) instead of testing names.

``counts`` (the shape of ``count`` in schedules, the simulator and the
engine; see :mod:`mpicoll.schedule.layout` for the buffer lengths):

- ``"whole"``: one vector per rank, all of it reduced, sent or received
  (allreduce, reduce, bcast, scan, exscan);
- ``"block"``: one block of ``count`` elements per rank;
- ``"per_rank"``: a tuple of ``size`` block sizes, agreed by every rank;
- ``"matrix"``: alltoallv's ``size`` × ``size`` tuple of rows;
- ``"none"``: barrier.

``all_blocks``: the buffer holding every rank's block, the other holding
this rank's own (a rooted collective's all-blocks buffer exists at the root
only): ``"send"`` (reduce-scatter, scatter, scatterv), ``"recv"``
(allgather, gather and their v-forms), ``"both"`` (alltoall, alltoallv);
``None`` for ``"whole"`` and ``"none"`` counts.

``single_buffer``: one buffer, the root's input and every rank's output;
the call takes no send buffer (bcast).

``inplace`` (what ``MPI.IN_PLACE`` means):

- ``"aliased"``: the input is read from the receive buffer (the whole of
  it, or this rank's block of it), which is overwritten by the result;
- ``"root_keeps"``: scatter and scatterv: the root passes ``IN_PLACE`` as
  its *receive* buffer and its own block stays in its send buffer;
- ``"staged"``: the input is the receive buffer, copied before the result
  overwrites it (reduce-scatter, alltoall);
- ``None``: no in-place form.

``inplace_root_only``: only the root may pass ``IN_PLACE`` (reduce,
gather, gatherv, scatter, scatterv).

``inplace_everywhere``: MPI requires ``IN_PLACE`` on every rank or on none
(allreduce, allgather(v), the reduce-scatters; scan and exscan leave it to
each rank), which check mode compares (alltoall's is not compared: its
staged in-place form is not told apart from a plain call).

No imports: this is the bottom layer.
"""

from __future__ import annotations

from typing import Callable, NamedTuple


def _ring(p: int) -> float:
    return (p - 1) / p


def _one(p: int) -> float:
    return 1.0


class Collective(NamedTuple):
    name: str
    method: str  # mpi4py's buffer-face method ("I" + lower-first: nonblocking)
    rooted: bool
    reducing: bool
    counts: str  # "whole", "block", "per_rank", "matrix", "none"
    all_blocks: str | None  # "send", "recv", "both" or None
    single_buffer: bool  # no send buffer: the root's input is its recv
    inplace: str | None  # "aliased", "root_keeps", "staged" or None
    inplace_root_only: bool
    # nccl-tests' bus bandwidth = algorithm bandwidth * bus_factor(size)
    bus_factor: Callable[[int], float]
    # The size a call is reported (benchmark) and selected (rules) by
    # covers all ``size`` blocks, not one; "whole" collectives have one.
    report_blocks: bool
    select_blocks: bool
    # MPI: "MPI_IN_PLACE ... at all processes" (check mode compares it)
    inplace_everywhere: bool = False

    @property
    def nonblocking_method(self) -> str:
        return "I" + self.method[0].lower() + self.method[1:]

    def selection_elements(self, count, size: int) -> int:
        """Elements a call is selected by, the same on every rank: the
        vector (whole), one block or all blocks (block, per-rank counts
        averaged over ranks for one block), the matrix's total over
        ``size`` for all blocks of one rank's share."""
        if self.counts in ("whole", "block"):
            return count * (size if self.select_blocks else 1)
        if self.counts == "per_rank":
            total = sum(count)
            return total if self.select_blocks else total // size
        if self.counts == "matrix":
            return sum(map(sum, count)) // size
        return 0


_ROWS = (
    Collective("allreduce", "Allreduce", False, True, "whole", None, False,
               "aliased", False, lambda p: 2 * (p - 1) / p, False, False, True),
    Collective("reduce", "Reduce", True, True, "whole", None, False,
               "aliased", True, _one, False, False),
    Collective("bcast", "Bcast", True, False, "whole", None, True,
               None, False, _one, False, False),
    Collective("allgather", "Allgather", False, False, "block", "recv", False,
               "aliased", False, _ring, True, False, True),
    Collective("reduce_scatter_block", "Reduce_scatter_block", False, True,
               "block", "send", False, "staged", False, _ring, True, True, True),
    Collective("reduce_scatter", "Reduce_scatter", False, True, "per_rank",
               "send", False, "staged", False, _ring, True, True, True),
    Collective("barrier", "Barrier", False, False, "none", None, False,
               None, False, lambda p: 0.0, False, False),
    Collective("gather", "Gather", True, False, "block", "recv", False,
               "aliased", True, _ring, True, False),
    Collective("scatter", "Scatter", True, False, "block", "send", False,
               "root_keeps", True, _ring, True, True),
    Collective("allgatherv", "Allgatherv", False, False, "per_rank", "recv",
               False, "aliased", False, _ring, True, False, True),
    Collective("alltoall", "Alltoall", False, False, "block", "both", False,
               "staged", False, _ring, True, True),
    Collective("scan", "Scan", False, True, "whole", None, False,
               "aliased", False, _one, False, False),
    Collective("exscan", "Exscan", False, True, "whole", None, False,
               "aliased", False, _one, False, False),
    Collective("gatherv", "Gatherv", True, False, "per_rank", "recv", False,
               "aliased", True, _ring, True, False),
    Collective("scatterv", "Scatterv", True, False, "per_rank", "send", False,
               "root_keeps", True, _ring, True, True),
    Collective("alltoallv", "Alltoallv", False, False, "matrix", "both", False,
               "staged", False, _ring, True, True),
)

COLLECTIVES: dict[str, Collective] = {row.name: row for row in _ROWS}
