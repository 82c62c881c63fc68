"""Tier 2: ``mpicoll.Comm`` takes and rejects the arguments mpi4py does.

mpi4py's parameter names as keywords; and every mistake every rank makes
alike (counts, types, buffers mpi4py refuses in each place every rank
parses, roots out of range, argument lists too long), which must raise
the same exception type on every rank before any message moves. Each case
is compared with the raw communicator under every algorithm
(tests/compatcases.py says how).
"""

from __future__ import annotations

import pytest
from mpi4py import MPI

from compatcases import full, ids, readonly, vals

pytestmark = [pytest.mark.mpi, pytest.mark.interface]


def test_keyword_arguments(h):
    """mpi4py's own parameter names, as keywords."""
    def allreduce(c):
        s, r = ids(c.rank, 3), full(3)
        c("Allreduce", sendbuf=s, recvbuf=r, op=MPI.MAX)
        return r
    h.check("Allreduce(sendbuf=, recvbuf=, op=)", allreduce, "allreduce",
            modes=(False, True))

    def reduce_(c):
        s, r = ids(c.rank, 3), full(3)
        c("Reduce", sendbuf=s, recvbuf=r, op=MPI.SUM, root=c.size - 1)
        return r
    h.check("Reduce(sendbuf=, recvbuf=, op=, root=)", reduce_, "reduce")

    def reduce_positional(c):
        s, r = ids(c.rank, 3), full(3)
        c("Reduce", s, r, MPI.MAX, c.size - 1)
        return r
    h.check("Reduce(s, r, MAX, root) positional", reduce_positional,
            "reduce")

    def bcast(c):
        b = ids(0, 3) if c.rank == 0 else full(3)
        c("Bcast", buf=b, root=0)
        return b
    h.check("Bcast(buf=, root=)", bcast, "bcast", modes=(False, True))

    def gather(c):
        r = full(2 * c.size)
        c("Gather", sendbuf=ids(c.rank, 2), recvbuf=r, root=0)
        return r
    h.check("Gather(sendbuf=, recvbuf=, root=)", gather, "gather")

    def scatterv(c):
        r = full(2)
        c("Scatterv", sendbuf=[ids(0, 2 * c.size), [2] * c.size],
          recvbuf=r, root=0)
        return r
    h.check("Scatterv(sendbuf=, recvbuf=, root=)", scatterv, "scatterv")

    def reduce_scatter(c):
        r = full(2)
        c("Reduce_scatter", sendbuf=vals(c.rank, 2 * c.size), recvbuf=r,
          recvcounts=[2] * c.size, op=MPI.SUM)
        return r
    h.check("Reduce_scatter(sendbuf=, recvbuf=, recvcounts=, op=)",
            reduce_scatter, "reduce_scatter")

    def reduce_scatter_op_only(c):
        r = full(2)
        c("Reduce_scatter", vals(c.rank, 2 * c.size), r, op=MPI.MAX)
        return r
    h.check("Reduce_scatter(s, r, op=MAX) (recvcounts defaulted)",
            reduce_scatter_op_only, "reduce_scatter")

    def default_op(c):
        s, r = ids(c.rank, 3), full(3)
        c("Scan", s, r)
        return r
    h.check("Scan(s, r) (op defaulted to SUM)", default_op, "scan",
            modes=(False, True))
    h.finish()


# ------------------------------------------------------------ argument errors


class ArrayInterfaceOnly:
    """``__array_interface__`` only: NumPy takes it, mpi4py does not."""

    def __init__(self, array):
        self.array = array
        self.__array_interface__ = array.__array_interface__


def error_cases():
    """label -> (collective, case): mistakes every rank makes alike, so
    mpi4py raises on every rank before any message moves."""
    x = lambda c, n=5: ids(c.rank, n)  # noqa: E731
    noncontig = lambda c: ids(c.rank, 10)[::2]  # noqa: E731
    return {
        "Allreduce count mismatch 5 -> 4": (
            "allreduce", lambda c: c("Allreduce", x(c), full(4))),
        "Allreduce type mismatch int32 -> float64": (
            "allreduce", lambda c: c("Allreduce", x(c), full(5, "d"))),
        "Allreduce message of 5 items": (
            "allreduce", lambda c: c("Allreduce", [x(c), 5, 0, MPI.INT, 1],
                                     full(5))),
        "Allreduce message of 1 item": (
            "allreduce", lambda c: c("Allreduce", [x(c)], full(5))),
        "Allreduce str sendbuf": (
            "allreduce", lambda c: c("Allreduce", "abcd", full(4))),
        "Allreduce float sendbuf": (
            "allreduce", lambda c: c("Allreduce", 3.5, full(1))),
        "Allreduce list of ints as a buffer": (
            "allreduce", lambda c: c("Allreduce", [1, 2, 3], full(3))),
        "Allreduce None recvbuf": (
            "allreduce", lambda c: c("Allreduce", x(c), None)),
        "Allreduce IN_PLACE recvbuf": (
            "allreduce", lambda c: c("Allreduce", x(c), MPI.IN_PLACE)),
        "Allreduce unknown typecode": (
            "allreduce", lambda c: c("Allreduce", [x(c), "zz"], full(5))),
        "Allreduce negative count": (
            "allreduce", lambda c: c("Allreduce", [x(c), -1, MPI.INT],
                                     [full(5), -1, MPI.INT])),
        "Allreduce count 2.5": (
            "allreduce", lambda c: c("Allreduce", [x(c), 2.5, MPI.INT],
                                     full(5))),
        "Allreduce displacement out of bounds": (
            "allreduce", lambda c: c("Allreduce", [x(c), 1, 9, MPI.INT],
                                     full(1))),
        "Allreduce negative displacement": (
            "allreduce", lambda c: c("Allreduce", [x(c), 1, -1, MPI.INT],
                                     full(1))),
        "Allreduce length not a multiple of the extent": (
            "allreduce", lambda c: c("Allreduce", [x(c), MPI.DOUBLE],
                                     [full(5), MPI.DOUBLE])),
        "Allreduce non-contiguous sendbuf": (
            "allreduce", lambda c: c("Allreduce", noncontig(c), full(5))),
        "Allreduce non-contiguous recvbuf": (
            "allreduce", lambda c: c("Allreduce", x(c), full(10)[::2])),
        "Allreduce reversed (negative-stride) sendbuf": (
            "allreduce", lambda c: c("Allreduce", x(c)[::-1], full(5))),
        "Allreduce read-only recvbuf": (
            "allreduce", lambda c: c("Allreduce", x(c), readonly(full(5)))),
        "Allreduce bytes recvbuf": (
            "allreduce", lambda c: c("Allreduce", bytes(4), bytes(4))),
        "Allreduce __array_interface__-only sendbuf": (
            "allreduce", lambda c: c("Allreduce", ArrayInterfaceOnly(x(c)),
                                     full(5))),
        "Allreduce 4 positional arguments": (
            "allreduce", lambda c: c("Allreduce", x(c), full(5), MPI.SUM,
                                     0)),
        "Allreduce unknown keyword": (
            "allreduce", lambda c: c("Allreduce", x(c), full(5), root=0)),
        "Scan count mismatch": (
            "scan", lambda c: c("Scan", x(c), full(4))),
        "Exscan type mismatch": (
            "exscan", lambda c: c("Exscan", x(c), full(5, "d"))),
        "Bcast None": ("bcast", lambda c: c("Bcast", None, 0)),
        "Bcast str": ("bcast", lambda c: c("Bcast", "abc", 0)),
        "Bcast non-contiguous": (
            "bcast", lambda c: c("Bcast", noncontig(c), 0)),
        "Bcast 3 positional arguments": (
            "bcast", lambda c: c("Bcast", x(c), 0, 1)),
        "Bcast root='0'": ("bcast", lambda c: c("Bcast", x(c), "0")),
        "Bcast root=0.0": ("bcast", lambda c: c("Bcast", x(c), 0.0)),
        "Allgather None sendbuf, recvbuf None": (
            "allgather", lambda c: c("Allgather", None, None)),
        "Allgather recvbuf not a multiple of size": (
            "allgather", lambda c: c("Allgather", x(c, 2),
                                     full(2 * c.size + 1))),
        "Allgather non-contiguous sendbuf": (
            "allgather", lambda c: c("Allgather", noncontig(c),
                                     full(5 * c.size))),
        "Allgather read-only recvbuf": (
            "allgather", lambda c: c("Allgather", x(c, 2),
                                     readonly(full(2 * c.size)))),
        "Alltoall sendbuf not a multiple of size": (
            "alltoall", lambda c: c("Alltoall", x(c, 2 * c.size + 1),
                                    full(2 * c.size))),
        "Alltoall str recvbuf": (
            "alltoall", lambda c: c("Alltoall", x(c, c.size), "abc")),
        "Gather non-contiguous sendbuf (every rank sends)": (
            "gather", lambda c: c("Gather", noncontig(c),
                                  full(5 * c.size), 0)),
        "Gather str sendbuf": (
            "gather", lambda c: c("Gather", "abc", full(3 * c.size), 0)),
        "Scatter str recvbuf": (
            "scatter", lambda c: c("Scatter", full(3 * c.size), "abc", 0)),
        "Scatter read-only recvbuf": (
            "scatter", lambda c: c("Scatter", full(3 * c.size),
                                   readonly(full(3)), 0)),
        "Reduce str sendbuf": (
            "reduce", lambda c: c("Reduce", "abc", full(3), MPI.SUM, 0)),
        "Reduce_scatter_block recv*size != send": (
            "reduce_scatter_block",
            lambda c: c("Reduce_scatter_block", x(c, 3 * c.size), full(2))),
        "Reduce_scatter_block IN_PLACE, recvbuf not a multiple of size": (
            "reduce_scatter_block",
            lambda c: c("Reduce_scatter_block", MPI.IN_PLACE,
                        full(3 * c.size + 1))),
        "Reduce_scatter sum(recvcounts) != send count": (
            "reduce_scatter",
            lambda c: c("Reduce_scatter", x(c, 2 * c.size + 1), full(2),
                        [2] * c.size)),
        "Reduce_scatter recvcounts too short": (
            "reduce_scatter",
            lambda c: c("Reduce_scatter", x(c, 2 * c.size), full(2),
                        [2] * (c.size - 1))),
        "Reduce_scatter recvcounts too long": (
            "reduce_scatter",
            lambda c: c("Reduce_scatter", x(c, 2 * c.size), full(2),
                        [2] * (c.size + 1))),
        "Reduce_scatter recvbuf != recvcounts[rank] on every rank": (
            "reduce_scatter",
            lambda c: c("Reduce_scatter", x(c, 2 * c.size), full(3),
                        [2] * c.size)),
        "Reduce_scatter IN_PLACE, recvcounts None": (
            "reduce_scatter",
            lambda c: c("Reduce_scatter", MPI.IN_PLACE, full(2 * c.size),
                        None)),
        "Reduce_scatter recvcounts an int": (
            "reduce_scatter",
            lambda c: c("Reduce_scatter", x(c, 2 * c.size), full(2), 2)),
        "Allgatherv counts too long": (
            "allgatherv",
            lambda c: c("Allgatherv", x(c, 2),
                        [full(2 * c.size), [2] * (c.size + 1)])),
        "Allgatherv counts too short": (
            "allgatherv",
            lambda c: c("Allgatherv", x(c, 2),
                        [full(2 * c.size), [2] * (c.size - 1),
                         None, MPI.INT])),
        "Allgatherv displs too short": (
            "allgatherv",
            lambda c: c("Allgatherv", x(c, 2),
                        [full(2 * c.size), [2] * c.size,
                         [0] * (c.size - 1), MPI.INT])),
        "Allgatherv message of 5 items": (
            "allgatherv",
            lambda c: c("Allgatherv", x(c, 2),
                        [full(2 * c.size), [2] * c.size, None, MPI.INT, 0])),
        "Allgatherv recvbuf not a multiple of the extent": (
            "allgatherv",
            lambda c: c("Allgatherv", x(c, 2), [full(3), MPI.DOUBLE])),
        "Alltoallv counts too short (both)": (
            "alltoallv",
            lambda c: c("Alltoallv", [x(c, 2 * c.size), [2] * (c.size - 1)],
                        [full(2 * c.size), [2] * (c.size - 1)])),
        "Alltoallv str sendbuf": (
            "alltoallv",
            lambda c: c("Alltoallv", "abc", [full(2 * c.size),
                                             [2] * c.size])),
    }


def test_argument_errors(h):
    for label, (collective, case) in error_cases().items():
        h.check(label, case, collective,
                modes=(False, True) if "Allreduce count" in label or
                "Bcast None" in label else (False,))
    h.finish()


def rejection_cases():
    """label -> (collective, case(c, bad)): ``bad(c, n)`` is put where
    every rank parses the argument (a send buffer every rank sends, a
    receive buffer every rank receives into)."""
    def rs(c, n):
        return [n] * c.size
    return {
        "Allreduce sendbuf": ("allreduce", lambda c, bad: c(
            "Allreduce", bad(c, 4, True), full(4))),
        "Allreduce recvbuf": ("allreduce", lambda c, bad: c(
            "Allreduce", ids(c.rank, 4), bad(c, 4, False))),
        "Scan sendbuf": ("scan", lambda c, bad: c(
            "Scan", bad(c, 4, True), full(4))),
        "Exscan recvbuf": ("exscan", lambda c, bad: c(
            "Exscan", ids(c.rank, 4), bad(c, 4, False))),
        "Reduce sendbuf": ("reduce", lambda c, bad: c(
            "Reduce", bad(c, 4, True), full(4), MPI.SUM, 0)),
        "Reduce_scatter_block sendbuf": ("reduce_scatter_block",
            lambda c, bad: c("Reduce_scatter_block",
                             bad(c, 2 * c.size, True), full(2))),
        "Reduce_scatter_block recvbuf": ("reduce_scatter_block",
            lambda c, bad: c("Reduce_scatter_block", ids(c.rank, 2 * c.size),
                             bad(c, 2, False))),
        "Reduce_scatter sendbuf": ("reduce_scatter", lambda c, bad: c(
            "Reduce_scatter", bad(c, 2 * c.size, True), full(2), rs(c, 2))),
        "Reduce_scatter recvbuf": ("reduce_scatter", lambda c, bad: c(
            "Reduce_scatter", ids(c.rank, 2 * c.size), bad(c, 2, False),
            rs(c, 2))),
        "Bcast buf": ("bcast", lambda c, bad: c("Bcast", bad(c, 4, True), 0)),
        "Allgather sendbuf": ("allgather", lambda c, bad: c(
            "Allgather", bad(c, 2, True), full(2 * c.size))),
        "Allgather recvbuf": ("allgather", lambda c, bad: c(
            "Allgather", ids(c.rank, 2), bad(c, 2 * c.size, False))),
        "Alltoall sendbuf": ("alltoall", lambda c, bad: c(
            "Alltoall", bad(c, 2 * c.size, True), full(2 * c.size))),
        "Alltoall recvbuf": ("alltoall", lambda c, bad: c(
            "Alltoall", ids(c.rank, 2 * c.size), bad(c, 2 * c.size, False))),
        "Gather sendbuf": ("gather", lambda c, bad: c(
            "Gather", bad(c, 2, True),
            full(2 * c.size) if c.rank == 0 else None, 0)),
        "Scatter recvbuf": ("scatter", lambda c, bad: c(
            "Scatter", ids(0, 2 * c.size) if c.rank == 0 else None,
            bad(c, 2, False), 0)),
        "Allgatherv sendbuf": ("allgatherv", lambda c, bad: c(
            "Allgatherv", bad(c, 2, True), [full(2 * c.size), rs(c, 2)])),
        "Allgatherv recvbuf": ("allgatherv", lambda c, bad: c(
            "Allgatherv", ids(c.rank, 2), [bad(c, 2 * c.size, False),
                                           rs(c, 2)])),
        "Gatherv sendbuf": ("gatherv", lambda c, bad: c(
            "Gatherv", bad(c, 2, True),
            [full(2 * c.size), rs(c, 2)] if c.rank == 0 else None, 0)),
        "Scatterv recvbuf": ("scatterv", lambda c, bad: c(
            "Scatterv", [ids(0, 2 * c.size), rs(c, 2)] if c.rank == 0
            else None, bad(c, 2, False), 0)),
        "Alltoallv sendbuf": ("alltoallv", lambda c, bad: c(
            "Alltoallv", [bad(c, 2 * c.size, True), rs(c, 2)],
            [full(2 * c.size), rs(c, 2)])),
        "Alltoallv recvbuf": ("alltoallv", lambda c, bad: c(
            "Alltoallv", [ids(c.rank, 2 * c.size), rs(c, 2)],
            [bad(c, 2 * c.size, False), rs(c, 2)])),
    }


BAD_BUFFERS = {
    # name -> bad(c, n, sending): what to pass for an n-element int buffer
    "non-contiguous": lambda c, n, sending: ids(c.rank, 2 * n)[::2],
    "negative strides": lambda c, n, sending: ids(c.rank, n)[::-1],
    "read-only (receiving)": lambda c, n, sending: (
        ids(c.rank, n) if sending else readonly(full(n))),
    "bytes (receiving)": lambda c, n, sending: (
        ids(c.rank, n) if sending else bytes(4 * n)),
    "str": lambda c, n, sending: "x" * 4 * n,
    "__array_interface__ only": lambda c, n, sending: ArrayInterfaceOnly(
        ids(c.rank, n) if sending else full(n)),
    "list of ints": lambda c, n, sending: list(range(n)),
}


def test_rejected_buffers(h):
    """Buffers mpi4py rejects, in every place every rank parses, blocking
    and nonblocking (the receiving-only kinds stand in send places as a
    valid buffer)."""
    for label, (collective, case) in rejection_cases().items():
        for kind, bad in BAD_BUFFERS.items():
            if "receiving" in kind and ("sendbuf" in label
                                       or label.startswith("Bcast")):
                continue
            h.check(f"{label}: {kind} (rejected)",
                    lambda c, case=case, bad=bad: case(c, bad), collective,
                    modes=(False, True))
    h.finish()


def bad_root_cases(root):
    x = lambda c: ids(c.rank, 4)  # noqa: E731
    return {
        "Bcast": lambda c: c("Bcast", x(c), root),
        "Reduce": lambda c: c("Reduce", x(c), full(4), MPI.SUM, root),
        "Gather": lambda c: c("Gather", x(c), full(4 * c.size), root),
        "Scatter": lambda c: c("Scatter", full(4 * c.size), full(4), root),
        "Gatherv": lambda c: c("Gatherv", x(c), [full(4 * c.size),
                                                [4] * c.size], root),
        "Scatterv": lambda c: c("Scatterv", [full(4 * c.size), [4] * c.size],
                                full(4), root),
    }


def test_bad_roots(h):
    for root in (99, -5, h.size):
        for name, case in bad_root_cases(root).items():
            h.check(f"{name} root={root} (every rank)", case, name.lower(),
                    modes=(False, True))
    h.finish()
