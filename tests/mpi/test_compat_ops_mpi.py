"""Tier 2: the reductions of ``mpicoll.Comm`` take every op as mpi4py's.

Allreduce, Reduce, Scan, Exscan, Reduce_scatter_block and Reduce_scatter,
each compared with the raw communicator under every algorithm
(tests/compatcases.py says how): every predefined op on the types MPI
allows it, user-defined ops (commutative or not), and the ops MPI rejects.
"""

from __future__ import annotations

import operator

import numpy as np
import pytest
from mpi4py import MPI

from compat import STRICT
from compatcases import FILL, vals
from mpicoll.collectives import COLLECTIVES

pytestmark = [pytest.mark.mpi, pytest.mark.interface]

REDUCTIONS = [name for name, row in COLLECTIVES.items() if row.reducing]


def _first(inbuf, inoutbuf, datatype):  # a op b = a: not commutative
    np.frombuffer(inoutbuf, "i")[:] = np.frombuffer(inbuf, "i")


def _add(inbuf, inoutbuf, datatype):
    np.frombuffer(inoutbuf, "i")[:] += np.frombuffer(inbuf, "i")


MASK = np.uint64(0xFFFFFFFF)


def _affine(inbuf, inoutbuf, datatype):
    """x -> m x + c packed as m<<32 | c; inout = in then inout (mod 2**32):
    associative, not commutative."""
    a = np.frombuffer(inbuf, np.uint64)
    b = np.frombuffer(inoutbuf, np.uint64)
    ma, ca, mb, cb = a >> 32, a & MASK, b >> 32, b & MASK
    b[...] = (((ma * mb) & MASK) << np.uint64(32)) | ((ca * mb + cb) & MASK)


def affine_vals(rank, n):
    i = np.arange(n, dtype=np.uint64)
    m = (np.uint64(rank * 1000 + 3) + i * np.uint64(2654435761)) % \
        np.uint64(1 << 32) | np.uint64(1)
    return (m << np.uint64(32)) | (i + np.uint64(rank))


def reduction(c, name, sendbuf, recvbuf, op, count):
    """Reduction ``name`` of ``count`` elements per rank's result (root
    0; a reduce-scatter's ``count`` for every rank)."""
    row = COLLECTIVES[name]
    if row.rooted:
        c(row.method, sendbuf, recvbuf, op, 0)
    elif row.counts == "per_rank":
        c(row.method, sendbuf, recvbuf, [count] * c.size, op)
    else:
        c(row.method, sendbuf, recvbuf, op)


def op_case(name, op, dtype="i", n=4, values=None, T=None):
    """Reduction ``name`` with ``op`` on ``dtype`` (or explicit MPI type
    ``T`` over ``values(rank, n)``)."""
    values = values or (lambda r, m: vals(r, m, dtype))
    blocks = COLLECTIVES[name].all_blocks == "send"

    def case(c):
        s = values(c.rank, n * c.size if blocks else n)
        r = np.full((n, *s.shape[1:]), FILL).astype(s.dtype)
        reduction(c, name, *(([s, T], [r, T]) if T is not None else (s, r)),
                  op, n)
        if name == "exscan" and c.rank == 0 and not STRICT:
            return s, "undefined at rank 0 (MPI)"
        return s, r
    return case


PREDEFINED = {
    "SUM": MPI.SUM, "PROD": MPI.PROD, "MAX": MPI.MAX, "MIN": MPI.MIN,
    "LAND": MPI.LAND, "LOR": MPI.LOR, "LXOR": MPI.LXOR, "BAND": MPI.BAND,
    "BOR": MPI.BOR, "BXOR": MPI.BXOR,
}


@pytest.mark.parametrize("name", REDUCTIONS)
def test_ops(h, name):
    method = COLLECTIVES[name].method
    for opname, op in PREDEFINED.items():
        h.check(f"{method} {opname} int32", op_case(name, op), name)
    for opname in ("SUM", "PROD", "MAX", "MIN"):
        h.check(f"{method} {opname} float64",
                op_case(name, PREDEFINED[opname], "d"), name)
    for opname in ("LAND", "LOR", "LXOR"):
        h.check(f"{method} {opname} bool",
                op_case(name, PREDEFINED[opname], "?"), name)
    for opname in ("BAND", "BOR", "BXOR", "MAX"):
        h.check(f"{method} {opname} uint8",
                op_case(name, PREDEFINED[opname], "B"), name)
    h.check(f"{method} SUM complex128", op_case(name, MPI.SUM, "D"), name)
    h.check(f"{method} PROD complex64", op_case(name, MPI.PROD, "F"), name)

    # MAXLOC / MINLOC on (int value, int index) pairs: MPI.TWOINT
    def pairs(r, m):
        v = np.empty((m, 2), "i")
        v[:, 0] = (np.arange(m) * 5 + r * 3) % 4  # ties: the lower index
        v[:, 1] = r
        return v
    for opname, op in (("MAXLOC", MPI.MAXLOC), ("MINLOC", MPI.MINLOC)):
        h.check(f"{method} {opname} TWOINT",
                op_case(name, op, values=pairs, T=MPI.TWOINT), name)

    # user-defined ops
    add = MPI.Op.Create(_add, commute=True)
    first = MPI.Op.Create(_first, commute=False)
    affine = MPI.Op.Create(_affine, commute=False)
    try:
        h.check(f"{method} Op.Create(add, commute=True)", op_case(name, add),
                name, modes=(False, True))
        h.check(f"{method} Op.Create(first, commute=False)",
                op_case(name, first), name)
        h.check(f"{method} Op.Create(affine, commute=False) uint64",
                op_case(name, affine, values=affine_vals), name,
                modes=(False, True))
    finally:
        for op in (add, first, affine):
            op.Free()
    h.finish()


@pytest.mark.parametrize("name", REDUCTIONS)
def test_op_errors(h, name):
    """Ops MPI rejects for the type, and ops that are not MPI.Op: every
    rank raises before any message moves."""
    method = COLLECTIVES[name].method
    for label, op, dtype in (("MAX complex128", MPI.MAX, "D"),
                             ("BAND float64", MPI.BAND, "d"),
                             ("LAND float32", MPI.LAND, "f"),
                             ("MAXLOC int32", MPI.MAXLOC, "i"),
                             ("REPLACE int32", MPI.REPLACE, "i"),
                             ("NO_OP int32", MPI.NO_OP, "i"),
                             ("OP_NULL int32", MPI.OP_NULL, "i")):
        h.check(f"{method} {label} (rejected)", op_case(name, op, dtype),
                name)

    def byte_sum(c):
        blocks = COLLECTIVES[name].all_blocks == "send"
        s, r = bytearray(4 * c.size if blocks else 4), bytearray(4)
        reduction(c, name, [s, MPI.BYTE], [r, MPI.BYTE], MPI.SUM, 4)
        return r
    h.check(f"{method} SUM on MPI.BYTE (rejected)", byte_sum, name)
    for label, op in (("a Python callable", operator.add),
                      ("the string 'sum'", "sum"), ("None", None),
                      ("an int", 3)):
        h.check(f"{method} op={label} (rejected)", op_case(name, op), name)
    h.finish()
