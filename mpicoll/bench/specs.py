"""One small spec per collective: call shape, expected output, bus factor.

Rank ``r``'s input element at global index ``i`` of its send buffer is
:func:`values` ``(r, i)``: small integers, so every reduction (sum, prod,
max, min) is exact in any supported dtype whatever the reduction order.
``count`` is elements per rank's block, as in
:mod:`mpicoll.schedule.layout`; ``blocks`` says how many such blocks the
reported message size covers (nccl-tests: allgather reports the output
size, reduce-scatter the input size, alltoall one rank's send size).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

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
    """How to call, check and score one collective.

    ``expected(rank, size, count, root, dtype, op)`` is the output
    ``rank`` must hold, or None where it holds none. ``form`` names the
    argument shape of the mpi4py-face call (see :mod:`mpicoll.bench.harness`).
    """

    name: str
    method: str
    form: str
    expected: Callable[..., np.ndarray | None]
    factor: Callable[[int], float]
    blocks: bool = False  # the message size covers p blocks of ``count``
    inplace: bool = True  # has an in-place form

    def nbytes(self, count: int, size: int, itemsize: int) -> int:
        """Reported message size for ``count`` elements per block."""
        return count * itemsize * (size if self.blocks else 1)

    def count_for(self, nbytes: int, size: int, itemsize: int) -> int:
        """Elements per block for a requested message size (at least 1)."""
        if self.form == "none":
            return 0
        return max(1, nbytes // (itemsize * (size if self.blocks else 1)))


def _ring(p: int) -> float:
    return (p - 1) / p


SPECS = {s.name: s for s in (
    Spec("allreduce", "Allreduce", "op",
         lambda r, p, n, root, t, op: fold(range(p), 0, n, t, op),
         lambda p: 2 * (p - 1) / p),
    Spec("reduce", "Reduce", "op_root",
         lambda r, p, n, root, t, op:
         fold(range(p), 0, n, t, op) if r == root else None,
         lambda p: 1.0),
    Spec("bcast", "Bcast", "bcast",
         lambda r, p, n, root, t, op: values(root, 0, n, t, op),
         lambda p: 1.0, inplace=False),
    Spec("allgather", "Allgather", "plain",
         lambda r, p, n, root, t, op: _blocks_of(range(p), 0, n, t, op),
         _ring, blocks=True),
    Spec("reduce_scatter_block", "Reduce_scatter_block", "op",
         lambda r, p, n, root, t, op: fold(range(p), r * n, (r + 1) * n, t, op),
         _ring, blocks=True),
    Spec("alltoall", "Alltoall", "plain",
         lambda r, p, n, root, t, op:
         _blocks_of(range(p), r * n, (r + 1) * n, t, op),
         _ring, blocks=True),
    Spec("barrier", "Barrier", "none",
         lambda r, p, n, root, t, op: None, lambda p: 0.0, inplace=False),
    Spec("gather", "Gather", "root",
         lambda r, p, n, root, t, op:
         _blocks_of(range(p), 0, n, t, op) if r == root else None,
         _ring, blocks=True),
    Spec("scatter", "Scatter", "root",
         lambda r, p, n, root, t, op: values(root, r * n, (r + 1) * n, t, op),
         _ring, blocks=True),
    Spec("scan", "Scan", "op",
         lambda r, p, n, root, t, op: fold(range(r + 1), 0, n, t, op),
         lambda p: 1.0),
    Spec("exscan", "Exscan", "op",
         lambda r, p, n, root, t, op:
         fold(range(r), 0, n, t, op) if r else None,
         lambda p: 1.0),
)}
