"""Where an array's bytes are: its address, and whether two views share them.

For host NumPy arrays the address comes through ``MPI.buffer`` (0.2 us,
against 1.5 us for building the ``__array_interface__`` dict), which is
why this lives above the schedule layer: a call pays it on its hot path
(replays, rebinding, argument checks). Device arrays give theirs through
``__cuda_array_interface__``.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI


def address(x) -> int:
    """The data pointer of a host (NumPy) or device (CUDA) array."""
    if type(x) is np.ndarray:
        return MPI.buffer(x).address
    interface = getattr(x, "__array_interface__", None)
    if interface is None:
        interface = x.__cuda_array_interface__
    return interface["data"][0]


def same_memory(x, y) -> bool:
    """True when two 1-D contiguous views cover exactly the same bytes."""
    return x.nbytes == y.nbytes and address(x) == address(y)


def overlap(x, y) -> bool:
    """True when two 1-D contiguous views share any byte."""
    if x.size == 0 or y.size == 0:
        return False
    x0, y0 = address(x), address(y)
    return x0 < y0 + y.nbytes and y0 < x0 + x.nbytes
