"""Data shared by the MPI tests: integer-valued inputs unique per (rank,
index), so every algorithm must agree bitwise with native MPI, and a
non-commutative op to check rank order."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.coll.registry import lookup

MASK = np.uint64(0xFFFFFFFF)


def affine(a, b):
    """Compose affine maps x -> m x + c (mod 2**32) packed as m<<32 | c:
    apply ``a`` then ``b``. Associative, not commutative."""
    ma, ca, mb, cb = a >> 32, a & MASK, b >> 32, b & MASK
    return (((ma * mb) & MASK) << np.uint64(32)) | ((ca * mb + cb) & MASK)


def _affine_mpi(inbuf, inoutbuf, datatype):
    a = np.frombuffer(inbuf, dtype=np.uint64)
    b = np.frombuffer(inoutbuf, dtype=np.uint64)
    b[...] = affine(a, b)


AFFINE = MPI.Op.Create(_affine_mpi, commute=False)

# (op as passed to mpicoll.ProcessGroup, dtypes it is tested on, NumPy fold
# of two operands, the MPI.Op of mpicoll.Comm's and the reference calls)
OPS = {
    "sum": ("sum", ("int32", "float64", "complex128"), np.add, MPI.SUM),
    "max": (MPI.MAX, ("int16", "float32"), np.maximum, MPI.MAX),
    "bxor": ("bxor", ("uint8",), np.bitwise_xor, MPI.BXOR),
    "lor": ("lor", ("bool",), np.logical_or, MPI.LOR),
    "affine": (AFFINE, ("uint64",), affine, AFFINE),
    "callable": (affine, ("uint64",), affine, AFFINE),
}
COMMUTATIVE = ("sum", "max", "bxor", "lor")


def values(rank: int, count: int, dtype: str) -> np.ndarray:
    """Rank ``rank``'s input: unique per (rank, index), exact in any sum."""
    i = np.arange(count, dtype=np.int64)
    if dtype == "bool":
        return (i + rank) % 3 == 0
    if dtype == "uint64":
        m = (rank * 1000 + i) * 2654435761 % (1 << 32) | 1
        return (m.astype(np.uint64) << np.uint64(32)) | (i + rank).astype(
            np.uint64)
    raw = rank * 1013 + i * 7 + 1
    if np.dtype(dtype).kind in "iu":
        raw %= np.iinfo(dtype).max
    return (raw + (1j * rank if dtype.startswith("complex") else 0)).astype(
        dtype)


def fold(op_name: str, arrays):
    return functools.reduce(OPS[op_name][2], arrays)


def counts_for(size: int):
    return sorted({0, 1, max(size - 1, 0), size, size + 1, 1000})


def cases(collective, ops=tuple(OPS)):
    """(algorithm, op) for every algorithm of ``collective`` and op."""
    return [pytest.param(name, op_name, id=f"{name}-{op_name}")
            for name in mpicoll.algorithms(collective) for op_name in ops]


def each_input(comm, op_name):
    """(count, dtype) pairs to run, the op mpicoll.Comm's call takes (an
    MPI.Op, as mpi4py's), and the reference call's (the same)."""
    _, dtypes, _, reference = OPS[op_name]
    for dtype in dtypes:
        for count in counts_for(comm.size):
            yield count, dtype, reference, reference


def refuses(collective, algorithm, op_name):
    """True when the algorithm declares it cannot take this op."""
    alg = lookup(collective, algorithm)
    return alg.commutative_only and op_name not in COMMUTATIVE
