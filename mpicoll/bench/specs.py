"""One small spec per benchmarked collective: its expected output.

Everything else about a collective (method, call shape, in-place form, bus
factor) is its row in :data:`mpicoll.collectives.COLLECTIVES`, its reported
size :mod:`mpicoll.cli.sizes`'s.
Rank ``r``'s input element at global index ``i`` of its send buffer is
:func:`values` ``(r, i)``: small integers, so every reduction (sum, prod,
max, min) is exact in any supported dtype whatever the reduction order.
``count`` is elements per rank's block, as in
:mod:`mpicoll.schedule.layout`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from mpicoll.cli.options import COLLECTIVE_NAMES
from mpicoll.cli.sizes import block_count, message_bytes
from mpicoll.collectives import COLLECTIVES, Collective

OPS = {"sum": np.add, "prod": np.multiply, "max": np.maximum,
       "min": np.minimum}


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

    def nbytes(self, count: int, size: int, itemsize: int) -> int:
        """Reported message size for ``count`` elements per block."""
        return message_bytes(self.name, count, size, itemsize)

    def count_for(self, nbytes: int, size: int, itemsize: int) -> int:
        """Elements per block for a requested message size (at least 1)."""
        return block_count(self.name, nbytes, size, itemsize)


_EXPECTED = {
    "allreduce":
        lambda r, p, n, root, t, op: fold(range(p), 0, n, t, op),
    "reduce":
        lambda r, p, n, root, t, op:
        fold(range(p), 0, n, t, op) if r == root else None,
    "bcast":
        lambda r, p, n, root, t, op: values(root, 0, n, t, op),
    "allgather":
        lambda r, p, n, root, t, op: _blocks_of(range(p), 0, n, t, op),
    "reduce_scatter_block":
        lambda r, p, n, root, t, op: fold(range(p), r * n, (r + 1) * n, t, op),
    "alltoall":
        lambda r, p, n, root, t, op:
        _blocks_of(range(p), r * n, (r + 1) * n, t, op),
    "barrier": lambda r, p, n, root, t, op: None,
    "gather":
        lambda r, p, n, root, t, op:
        _blocks_of(range(p), 0, n, t, op) if r == root else None,
    "scatter":
        lambda r, p, n, root, t, op: values(root, r * n, (r + 1) * n, t, op),
    "scan":
        lambda r, p, n, root, t, op: fold(range(r + 1), 0, n, t, op),
    "exscan":
        lambda r, p, n, root, t, op:
        fold(range(r), 0, n, t, op) if r else None,
}

#: A spec per collective the tools sweep, in their order.
SPECS = {name: Spec(name, _EXPECTED[name]) for name in COLLECTIVE_NAMES}
