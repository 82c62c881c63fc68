"""One small spec per benchmarked collective: its expected output.

Everything else about a collective (method, call shape, in-place form, bus
factor, reported size) is its row in :data:`mpicoll.collectives.COLLECTIVES`.
Rank ``r``'s input element at global index ``i`` of its send buffer is
:func:`values` ``(r, i)``: small integers, so every reduction (sum, prod,
max, min) is exact in any supported dtype whatever the reduction order.
``count`` is elements per rank's block, as in
:mod:`mpicoll.schedule.layout`; the row's ``report_blocks`` says whether the
reported message size covers all ``p`` such blocks (nccl-tests: allgather
reports the output size, reduce-scatter the input size, alltoall one rank's
send size).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from mpicoll.collectives import COLLECTIVES, Collective

OPS = {"sum": np.add, "prod": np.multiply, "max": np.maximum,
       "min": np.minimum}
DTYPES = ("float32", "float64", "int32", "int64")


def values(rank: int, start: int, stop: int, dtype, op: str) -> np.ndarray:
    """Rank ``rank``'s input elements ``start .. stop-1`` (1..8; 1..2 for
    prod, so products of up to 24 ranks stay exact)."""
    index = np.arange(start, stop, dtype=np.int64)
    if op == "prod":
        return ((index + rank) % 2 + 1).astype(dtype)
    return ((index + 3 * rank) % 8 + 1).astype(dtype)


def fold(ranks, start: int, stop: int, dtype, op: str) -> np.ndarray:
    """``op`` over the inputs of ``ranks`` (elements ``start .. stop-1``)."""
    ranks = list(ranks)
    out = values(ranks[0], start, stop, dtype, op)
    for r in ranks[1:]:
        OPS[op](out, values(r, start, stop, dtype, op), out=out)
    return out


def _blocks_of(ranks, lo: int, hi: int, dtype, op) -> np.ndarray:
    """Inputs of ``ranks`` (elements ``lo .. hi-1`` of each) end to end."""
    return np.concatenate([values(r, lo, hi, dtype, op) for r in ranks])


@dataclass(frozen=True)
class Spec:
    """How to check one collective.

    ``expected(rank, size, count, root, dtype, op)`` is the output
    ``rank`` must hold, or None where it holds none.
    """

    name: str
    expected: Callable[..., np.ndarray | None]

    @property
    def row(self) -> Collective:
        return COLLECTIVES[self.name]

    @property
    def method(self) -> str:
        """mpi4py's (and mpicoll's) method name, e.g. ``"Allreduce"``."""
        return self.row.method

    def _blocks(self, size: int) -> int:
        return size if self.row.report_blocks else 1

    def nbytes(self, count: int, size: int, itemsize: int) -> int:
        """Reported message size for ``count`` elements per block."""
        return count * itemsize * self._blocks(size)

    def count_for(self, nbytes: int, size: int, itemsize: int) -> int:
        """Elements per block for a requested message size (at least 1)."""
        if self.row.counts == "none":
            return 0
        return max(1, nbytes // (itemsize * self._blocks(size)))


SPECS = {s.name: s for s in (
    Spec("allreduce",
         lambda r, p, n, root, t, op: fold(range(p), 0, n, t, op)),
    Spec("reduce",
         lambda r, p, n, root, t, op:
         fold(range(p), 0, n, t, op) if r == root else None),
    Spec("bcast",
         lambda r, p, n, root, t, op: values(root, 0, n, t, op)),
    Spec("allgather",
         lambda r, p, n, root, t, op: _blocks_of(range(p), 0, n, t, op)),
    Spec("reduce_scatter_block",
         lambda r, p, n, root, t, op: fold(range(p), r * n, (r + 1) * n, t, op)),
    Spec("alltoall",
         lambda r, p, n, root, t, op:
         _blocks_of(range(p), r * n, (r + 1) * n, t, op)),
    Spec("barrier", lambda r, p, n, root, t, op: None),
    Spec("gather",
         lambda r, p, n, root, t, op:
         _blocks_of(range(p), 0, n, t, op) if r == root else None),
    Spec("scatter",
         lambda r, p, n, root, t, op: values(root, r * n, (r + 1) * n, t, op)),
    Spec("scan",
         lambda r, p, n, root, t, op: fold(range(r + 1), 0, n, t, op)),
    Spec("exscan",
         lambda r, p, n, root, t, op:
         fold(range(r), 0, n, t, op) if r else None),
)}
