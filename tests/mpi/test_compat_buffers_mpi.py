"""Tier 2: ``mpicoll.Comm`` takes the buffers mpi4py takes.

Derived datatypes (contiguous, vector, indexed, struct; the same type
signature written two ways; the ones MPI rejects), called again on the same
buffers with new contents; and every kind of buffer object (NumPy dtypes and
memory orders, bytearray, array.array, memoryview, DLPack), each compared
with the raw communicator under every algorithm (tests/compatcases.py says
how).
"""

from __future__ import annotations

import array

import numpy as np
import pytest
from mpi4py import MPI

from compatcases import FILL, DLPackOnly, full, ids, readonly, vals
from mpicoll.collectives import COLLECTIVES

pytestmark = [pytest.mark.mpi, pytest.mark.interface]


# ----------------------------------------------------------------- datatypes


class Types:
    """Committed derived datatypes of MPI.INT (and a struct)."""

    def __init__(self):
        self.contig = MPI.INT.Create_contiguous(2).Commit()
        # 2 ints 3 apart: elements 0 and 3 of every 4 (extent 4 ints)
        self.vector = MPI.INT.Create_vector(2, 1, 3).Commit()
        # ints 0, 3, 4 of every 5
        self.indexed = MPI.INT.Create_indexed([1, 2], [0, 3]).Commit()
        # int at byte 0, double at byte 8 (bytes 4..7 a gap; extent 16)
        self.struct = MPI.Datatype.Create_struct(
            [1, 1], [0, 8], [MPI.INT, MPI.DOUBLE]).Commit()

    def free(self):
        for t in (self.contig, self.vector, self.indexed, self.struct):
            t.Free()

    def ints_per_item(self, name):
        return {"contig": 2, "vector": 4, "indexed": 5, "struct": 4}[name]


def typed(types, name, rank, items, k=0, fill=False):
    """An int32 array of ``items`` elements of type ``name`` (its gaps hold
    FILL, so that a call that writes a gap shows)."""
    per = types.ints_per_item(name)
    b = ids(rank, items * per, "i", k) if not fill else full(items * per)
    if name == "struct" and not fill:
        b.reshape(-1, 4)[:, 1] = FILL  # the gap
        b.view(np.float64).reshape(-1, 2)[:, 1] = np.arange(items) + rank
    return b


def test_derived_datatypes(h):
    types = Types()
    try:
        for name in ("contig", "vector", "indexed", "struct"):
            T = getattr(types, name)

            def bcast(c, name=name, T=T):
                root = c.size - 1
                b = typed(types, name, root, 3, fill=c.rank != root)
                c("Bcast", [b, T], root)
                return b
            h.check(f"Bcast [buf, {name}]", bcast, "bcast")

            def allgather(c, name=name, T=T):
                s = typed(types, name, c.rank, 2)
                r = typed(types, name, 0, 2 * c.size, fill=True)
                c("Allgather", [s, T], [r, 2, T])
                return s, r
            h.check(f"Allgather [buf, {name}]", allgather, "allgather")

            def gather(c, name=name, T=T):
                s = typed(types, name, c.rank, 2)
                r = typed(types, name, 0, 2 * c.size, fill=True)
                c("Gather", [s, 2, T], [r, T] if c.rank == 0 else None, 0)
                return s, r
            h.check(f"Gather [buf, {name}]", gather, "gather")

            def scatter(c, name=name, T=T):
                s = typed(types, name, c.rank, 2 * c.size)
                r = typed(types, name, 0, 2, fill=True)
                c("Scatter", [s, T] if c.rank == 0 else None, [r, 2, T], 0)
                return s, r
            h.check(f"Scatter [buf, {name}]", scatter, "scatter")

            def alltoall(c, name=name, T=T):
                s = typed(types, name, c.rank, c.size)
                r = typed(types, name, 0, c.size, fill=True)
                c("Alltoall", [s, T], [r, T])
                return s, r
            h.check(f"Alltoall [buf, {name}]", alltoall, "alltoall")

            def allgatherv(c, name=name, T=T):
                counts = [i % 2 + 1 for i in range(c.size)]
                displs = list(np.cumsum([0, *counts[:-1]]))
                s = typed(types, name, c.rank, counts[c.rank])
                r = typed(types, name, 0, sum(counts), fill=True)
                c("Allgatherv", [s, T], [r, counts, displs, T])
                return s, r
            h.check(f"Allgatherv [buf, {name}]", allgatherv, "allgatherv")

            def allreduce(c, name=name, T=T):
                s = typed(types, name, c.rank, 3)
                r = typed(types, name, 0, 3, fill=True)
                c("Allreduce", [s, T], [r, T], MPI.SUM)
                return s, r
            h.check(f"Allreduce [buf, {name}] SUM", allreduce, "allreduce")

            def reduce_(c, name=name, T=T):
                s = typed(types, name, c.rank, 3)
                r = typed(types, name, 0, 3, fill=True)
                c("Reduce", [s, T], [r, T], MPI.MAX, 0)
                return s, r
            h.check(f"Reduce [buf, {name}] MAX", reduce_, "reduce")

        # the same type signature written two ways
        def mixed(c):
            s = ids(c.rank, 4)
            r = full(4 * c.size)
            c("Allgather", [s, 2, types.contig], [r, 4, MPI.INT])
            return s, r
        h.check("Allgather [s, 2, contig] -> [r, 4, INT]", mixed, "allgather")

        def mixed_bcast(c):
            b = ids(0, 6) if c.rank == 0 else full(6)
            c("Bcast", [b, 3, types.contig] if c.rank == 0 else [b, MPI.INT],
              0)
            return b
        h.check("Bcast root [b, 3, contig], others [b, INT]", mixed_bcast,
                "bcast")

        def mixed_allgatherv(c):
            s = ids(c.rank, 2)
            r = full(2 * c.size)
            c("Allgatherv", [s, 1, types.contig], [r, [2] * c.size, MPI.INT])
            return s, r
        h.check("Allgatherv [s, 1, contig] -> [r, counts, INT]",
                mixed_allgatherv, "allgatherv")

        def mixed_gatherv(c):
            s = ids(c.rank, 4)
            r = full(4 * c.size) if c.rank == 0 else None
            c("Gatherv", [s, 2, types.contig],
              [r, [4] * c.size, MPI.INT] if c.rank == 0 else None, 0)
            return s, r
        h.check("Gatherv [s, 2, contig] -> [r, counts, INT]", mixed_gatherv,
                "gatherv")

        def mixed_scatterv(c):
            s = ids(0, 2 * c.size) if c.rank == 0 else None
            r = full(2)
            c("Scatterv", [s, [2] * c.size, MPI.INT] if c.rank == 0 else None,
              [r, 1, types.contig], 0)
            return r
        h.check("Scatterv [s, counts, INT] -> [r, 1, contig]", mixed_scatterv,
                "scatterv")

        def mixed_alltoallv(c):
            s = ids(c.rank, 2 * c.size)
            r = full(2 * c.size)
            c("Alltoallv", [s, [1] * c.size, None, types.contig],
              [r, [2] * c.size, None, MPI.INT])
            return s, r
        h.check("Alltoallv [s, counts, contig] -> [r, counts, INT]",
                mixed_alltoallv, "alltoallv")

        def mixed_reduce_types(c):  # mpi4py compares the handles
            s = ids(c.rank, 4)
            r = full(4)
            c("Allreduce", [s, MPI.INT], [r, 2, types.contig], MPI.SUM)
            return r
        h.check("Allreduce [s, INT] -> [r, 2, contig] (rejected)",
                mixed_reduce_types, "allreduce")

        def uncommitted(c):
            t = MPI.INT.Create_contiguous(2)
            try:
                b = ids(0, 4)
                c("Bcast", [b, 2, t], 0)
                return b
            finally:
                t.Free()
        h.check("Bcast uncommitted datatype (rejected)", uncommitted,
                "bcast")

        def null_type(c):
            b = ids(0, 4)
            c("Bcast", [b, MPI.DATATYPE_NULL], 0)
            return b
        h.check("Bcast DATATYPE_NULL (rejected)", null_type, "bcast")

        def null_type_count(c):
            b = ids(0, 4)
            c("Bcast", [b, 4, MPI.DATATYPE_NULL], 0)
            return b
        h.check("Bcast [b, 4, DATATYPE_NULL] (rejected)", null_type_count,
                "bcast")

        def bottom(c):
            r = full(2 * c.size)
            c("Allgather", [None, 0, MPI.INT], [r, 0, MPI.INT])
            return r
        h.check("Allgather [None, 0, INT] -> count 0", bottom, "allgather")
    finally:
        types.free()
    h.finish()


def test_derived_datatypes_repeated(h):
    """The same buffers called again with new data: a derived datatype is
    packed anew each call, and no call may run on an earlier call's
    packing (a second nonblocking Allgather of a vector sends its own
    data, not the first one's)."""
    types = Types()
    T, per = types.vector, types.ints_per_item("vector")
    try:
        def repeated(name, make):
            def case(c):
                buffers = make(c)
                out = []
                for k in range(3):
                    for b, rank, fill in buffers:
                        b[...] = full(b.size) if fill else \
                            typed(types, "vector", rank, b.size // per, k)
                    c(name, *[[b, T] for b, _, _ in buffers],
                      **({"root": 0} if COLLECTIVES[name.lower()].rooted
                         else {}))
                    out.append([b.copy() for b, _, _ in buffers])
                return out
            return case

        def pair(c, sends, recvs):
            return [(typed(types, "vector", c.rank, sends), c.rank, False),
                    (typed(types, "vector", 0, recvs), 0, True)]

        cases = {
            "Bcast": lambda c: [(typed(types, "vector", 0, 3), 0,
                                 c.rank != 0)],
            "Allgather": lambda c: pair(c, 2, 2 * c.size),
            "Alltoall": lambda c: pair(c, c.size, c.size),
            "Gather": lambda c: pair(c, 2, 2 * c.size),
            "Scatter": lambda c: pair(c, 2 * c.size, 2),
        }
        for name, make in cases.items():
            h.check(f"{name} [buf, vector] three times", repeated(name, make),
                    name.lower(), modes=(False, True))
    finally:
        types.free()
    h.finish()


# ------------------------------------------------------------ buffer objects


def make_kinds():
    """name -> (make(values) -> object passed, view(object) -> result)."""
    ident = lambda o: o  # noqa: E731
    return {
        "ndarray int32": (lambda v: v.astype("i"), ident),
        "bytearray": (lambda v: bytearray(v.astype("u1").tobytes()), ident),
        "array.array('i')": (lambda v: array.array("i", v.astype("i")),
                             ident),
        "array.array('d')": (lambda v: array.array("d", v.astype("d")),
                             ident),
        "memoryview of ndarray": (lambda v: memoryview(v.astype("i")),
                                  lambda m: np.asarray(m).copy()),
        "memoryview of bytearray": (
            lambda v: memoryview(bytearray(v.astype("u1").tobytes())),
            lambda m: bytes(m)),
        "float16": (lambda v: v.astype("e"), ident),
        "float32": (lambda v: v.astype("f"), ident),
        "complex64": (lambda v: v.astype("F"), ident),
        "complex128": (lambda v: (v + 1j * v).astype("D"), ident),
        "int8": (lambda v: v.astype("b"), ident),
        "uint64": (lambda v: v.astype("Q"), ident),
        "bool": (lambda v: (v % 2).astype("?"), ident),
        "2-D C": (lambda v: v.astype("i").reshape(-1, 2), ident),
        "2-D Fortran": (lambda v: np.asfortranarray(
            v.astype("d").reshape(2, -1)), ident),
        "np.from_dlpack": (lambda v: np.from_dlpack(v.astype("i")), ident),
        "DLPack-only object": (lambda v: DLPackOnly(v.astype("i")),
                               lambda o: o.array),
    }


KINDS = make_kinds()


def kind_case(kind, name, n=4):
    """Collective ``name`` with buffers of ``kind`` on every side, root 0
    (``n``: elements per block, even so that 2-D shapes fit); a buffer
    only the root uses is None elsewhere."""
    make, view = KINDS[kind]
    row = COLLECTIVES[name]
    tail = ((MPI.LOR if kind == "bool" else MPI.SUM,) if row.reducing
            else ()) + ((0,) if row.rooted else ())

    def case(c):
        sends = n * (c.size if row.all_blocks in ("send", "both") else 1)
        recvs = n * (c.size if row.all_blocks in ("recv", "both") else 1)
        data = vals(c.rank, sends) % 4 if row.reducing else \
            ids(c.rank, sends, "i") % 100  # fits int8
        at_root = not row.rooted or c.rank == 0
        if row.single_buffer:
            b = make(data) if at_root else make(np.zeros(n, "i") + 7)
            c(row.method, b, *tail)
            return view(b)
        s = make(data) if at_root or row.all_blocks != "send" else None
        r = make(np.zeros(recvs, "i") + 7) \
            if at_root or row.all_blocks != "recv" else None
        c(row.method, s, r, *tail)
        return tuple(None if b is None else view(b) for b in (s, r))
    return case


KIND_COLLECTIVES = ["bcast", "allgather", "alltoall", "gather", "scatter",
                    "allreduce", "scan", "reduce_scatter_block"]


@pytest.mark.parametrize("name", KIND_COLLECTIVES)
def test_buffer_kinds(h, name):
    for kind in KINDS:
        h.check(f"{COLLECTIVES[name].method} {kind}", kind_case(kind, name),
                name, modes=(False, True) if kind == "DLPack-only object"
                else (False,))
    h.finish()


def test_buffer_kinds_special(h):
    def zero_d(c):  # the tutorial's compute-pi N = numpy.array(100, 'i')
        b = np.array(100 if c.rank == 0 else 0, "i")
        c("Bcast", [b, MPI.INT], 0)
        return b
    h.check("Bcast 0-d array", zero_d, "bcast", modes=(False, True))

    def bytes_send(c):
        r = bytearray(4 * c.size)
        c("Allgather", bytes([c.rank] * 4), r)
        return r
    h.check("Allgather bytes (read-only) sendbuf", bytes_send, "allgather")

    def readonly_send(c):
        s = readonly(ids(c.rank, 4))
        r = full(4)
        c("Allreduce", s, r, MPI.SUM)
        return r
    h.check("Allreduce read-only ndarray sendbuf", readonly_send,
            "allreduce")

    def readonly_root(c):  # the root of a Bcast only reads
        b = readonly(ids(0, 4)) if c.rank == 0 else full(4)
        c("Bcast", b, 0)
        return b
    h.check("Bcast read-only buffer at the root only", readonly_root,
            "bcast")

    def readonly_scatter_root(c):
        s = readonly(ids(0, 2 * c.size)) if c.rank == 0 else None
        r = full(2)
        c("Scatter", s, r, 0)
        return r
    h.check("Scatter read-only sendbuf at the root", readonly_scatter_root,
            "scatter")

    def dlpack_recv_gather(c):
        r = DLPackOnly(full(3 * c.size)) if c.rank == 0 else None
        c("Gather", DLPackOnly(ids(c.rank, 3)), r, 0)
        return r.array if r is not None else None
    h.check("Gather DLPack-only buffers", dlpack_recv_gather, "gather",
            modes=(False, True))

    def fortran_2d_alltoall(c):
        s = np.asfortranarray(ids(c.rank, 2 * c.size).reshape(2, -1))
        r = np.asfortranarray(full(2 * c.size).reshape(2, -1))
        c("Alltoall", s, r)
        return s, r
    h.check("Alltoall 2-D Fortran-ordered arrays (memory order)",
            fortran_2d_alltoall, "alltoall")
    h.finish()
