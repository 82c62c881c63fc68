"""Tier 2: ``mpicoll.Comm(comm)`` behaves as mpi4py's ``comm`` itself.

The product promise: wrapping the communicator of a working mpi4py program
(``comm = mpicoll.Comm(MPI.COMM_WORLD)``) changes nothing but what the
caller asks for (``algorithm=`` on the buffer collectives). Every case here
runs on a raw ``MPI.COMM_WORLD.Dup()`` and on ``mpicoll.Comm`` of it, with
``algorithm`` set to ``"auto"`` and to each name of
``mpicoll.algorithms(collective)``, and must give the same results (every
output buffer the case allocated, send buffers included) or raise the
same exception type (``tests/compat.py`` says how they are compared).

Run::

    MPIR_CVAR_ENABLE_HEAVY_YIELD=1 mpiexec -n 4 python -m mpi4py -m pytest \\
        -q --with-mpi -m mpi tests/mpi/test_compat_mpi.py

``COMPAT_SELFTEST=1`` compares mpi4py with itself (every case must pass
then, or the case is wrong). ``python tests/compat.py 4`` lists every
difference at 4 ranks, rerunning past hangs (the conftest otherwise stops
the job at the first failed test). ``COMPAT_STRICT=1`` also counts an
algorithm's refusal (``mpicoll.ConstraintError`` where one was forced) and
``Exscan``'s undefined rank-0 output. tests/compat.py lists the switches.

Error cases raise on every rank before any message moves. Cases that
mpi4py itself rejects on some ranks only (a rank would hang in the
collective) are left out on purpose:

* ``Bcast`` of a read-only buffer (accepted at the root, which only reads);
* ``IN_PLACE``/``None`` as ``sendbuf`` of ``Gather``/``Gatherv``/``Reduce``
  at a non-root, or as ``recvbuf`` of ``Scatter``/``Scatterv`` at a non-root
  (rejected there, accepted at the root);
* buffer errors in root-only arguments (``Gather``/``Gatherv`` ``recvbuf``,
  ``Scatter``/``Scatterv`` ``sendbuf``; count or type mismatches in
  ``Reduce``, which mpi4py checks at the root only);
* ``Reduce_scatter`` with a ``recvbuf`` that matches ``recvcounts[rank]``
  on some ranks only.
"""

from __future__ import annotations

import array
import inspect
import operator
from typing import Callable, NamedTuple

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from compat import SELFTEST, STRICT, Harness

pytestmark = [pytest.mark.mpi, pytest.mark.interface]


@pytest.fixture(scope="module")
def h(request):
    harness = Harness(request.config)
    yield harness
    harness.close()


# ---------------------------------------------------------------------- data

FILL = 99  # what receive buffers hold before the call


def vals(rank: int, n: int, dtype="i", k: int = 0) -> np.ndarray:
    """Small integer values (exact in any sum or product over 8 ranks)."""
    dt = np.dtype(dtype)
    i = np.arange(n)
    if dt.kind == "b":
        return (i + rank + k) % 3 == 0
    v = (rank * 7 + i * 3 + k) % 11 + 1
    if dt.kind == "c":
        return (v + 1j * ((rank + i) % 5)).astype(dt)
    return v.astype(dt)


def ids(rank: int, n: int, dtype="i", k: int = 0) -> np.ndarray:
    """Values unique per (rank, index): a misplaced block shows."""
    dt = np.dtype(dtype)
    i = np.arange(n)
    if dt.kind == "b":
        return (i * 3 + rank + k) % 2 == 0
    v = rank * 1000 + i + 1 + k * 100
    if dt.kind in "iu" and dt.itemsize == 1:
        v = (rank * 16 + i + 1 + k) % 120
    return v.astype(dt)


def full(n: int, dtype="i") -> np.ndarray:
    return np.full(n, FILL, dtype=dtype) if np.dtype(dtype).kind != "b" \
        else np.ones(n, dtype=bool)


def mpitype(dtype):
    """The predefined MPI datatype of a NumPy dtype (as mpi4py infers it)."""
    return MPI.Datatype.fromcode(np.dtype(dtype).char)


# --------------------------------------------------------------- buffer forms


class Form(NamedTuple):
    """A way to write a buffer argument. ``lead``/``tail``: elements the
    buffer has before the message (reached through a displacement) and
    after it (beyond an explicit count)."""

    name: str
    lead: int
    tail: int
    spec: Callable  # (buf, count, MPI type, typecode) -> buffer argument


FORMS = [
    Form("buf", 0, 0, lambda b, n, T, t: b),
    Form("[buf, TYPE]", 0, 0, lambda b, n, T, t: [b, T]),
    Form("(buf, TYPE)", 0, 0, lambda b, n, T, t: (b, T)),
    Form("[buf, 'code']", 0, 0, lambda b, n, T, t: [b, t]),
    Form("[buf, count]", 0, 2, lambda b, n, T, t: [b, n]),
    Form("[buf, count, TYPE]", 0, 2, lambda b, n, T, t: [b, n, T]),
    Form("[buf, count, 'code']", 0, 2, lambda b, n, T, t: [b, n, t]),
    Form("[buf, (count, displ)]", 2, 1, lambda b, n, T, t: [b, (n, 2)]),
    Form("[buf, (count, displ), TYPE]", 2, 1,
         lambda b, n, T, t: [b, (n, 2), T]),
    Form("[buf, [count, displ], TYPE]", 3, 0,
         lambda b, n, T, t: [b, [n, 3], T]),
    Form("[buf, count, displ, TYPE]", 3, 1,
         lambda b, n, T, t: [b, n, 3, T]),
    Form("[buf, count, None, TYPE]", 0, 1,
         lambda b, n, T, t: [b, n, None, T]),
]
PLAIN = FORMS[0]
BY_NAME = {f.name: f for f in FORMS}
# the forms also run nonblocking (all forms parse the same way there)
NONBLOCKING_FORMS = {"buf", "[buf, TYPE]", "[buf, count, displ, TYPE]",
                     "[buf, 'code']"}


def form_pairs():
    """(send form, recv form): each form on both sides, then each against
    a plain array on the other side."""
    yield from ((f, f) for f in FORMS)
    yield from ((PLAIN, f) for f in FORMS[1:])
    yield from ((f, PLAIN) for f in FORMS[1:])


def modes(*forms) -> tuple:
    """Blocking, and nonblocking too for a form on both sides (or forms
    of NONBLOCKING_FORMS): every form runs through both parsers."""
    if len(set(forms)) == 1 or all(f.name in NONBLOCKING_FORMS
                                   for f in forms):
        return (False, True)
    return (False,)


def buffer(form: Form, count: int, blocks: int = 1, dtype="i", data=None):
    """(array, argument): ``count`` per block, ``blocks`` blocks."""
    b = full(form.lead + count * blocks + form.tail, dtype)
    if data is not None:
        b[form.lead:form.lead + count * blocks] = data
    return b, form.spec(b, count, mpitype(dtype), np.dtype(dtype).char)


def in_place(how):
    """The IN_PLACE marker of an in-place variant (``None`` is mpi4py's
    other spelling of it where ``sendbuf`` may be in place)."""
    return MPI.IN_PLACE if how == "IN_PLACE" else None


INPLACE = (False, "IN_PLACE", "None")


# ---------------------------------------------------------------- reductions


def allreduce_case(fs, fr, n, inplace=False, dtype="i", op=MPI.SUM,
                   name="Allreduce"):
    """Allreduce, Scan or Exscan (``name``)."""
    def case(c):
        x = vals(c.rank, n, dtype)
        r, rspec = buffer(fr, n, 1, dtype, x if inplace else None)
        if inplace:
            c(name, in_place(inplace), rspec, op)
            out = (r,)
        else:
            s, sspec = buffer(fs, n, 1, dtype, x)
            c(name, sspec, rspec, op)
            out = (s, r)
        if name == "Exscan" and c.rank == 0 and not STRICT:
            out = (*out[:-1], "undefined at rank 0 (MPI)")
        return out
    return case


def reduce_case(fs, fr, n, root, inplace=False, nonroot="None", dtype="i",
                op=MPI.SUM):
    def case(c):
        x = vals(c.rank, n, dtype)
        if c.rank == root:
            r, rspec = buffer(fr, n, 1, dtype, x if inplace else None)
            if inplace:
                c("Reduce", in_place(inplace), rspec, op, root)
                return (r,)
            s, sspec = buffer(fs, n, 1, dtype, x)
            c("Reduce", sspec, rspec, op, root)
            return s, r
        s, sspec = buffer(fs, n, 1, dtype, x)
        r = nonroot_buffer(nonroot, n, dtype)
        c("Reduce", sspec, r, op, root)
        return s, r
    return case


def nonroot_buffer(kind, n, dtype="i"):
    """What a non-root passes where mpi4py ignores the argument."""
    if kind == "None":
        return None
    if kind == "same":
        return full(n, dtype)
    if kind == "empty":
        return np.empty(0, dtype)
    raise ValueError(kind)


def reduce_scatter_block_case(fs, fr, n, inplace=False, dtype="i",
                              op=MPI.SUM):
    def case(c):
        x = vals(c.rank, n * c.size, dtype)
        if inplace:
            r, rspec = buffer(fr, n, c.size, dtype, x)
            c("Reduce_scatter_block", in_place(inplace), rspec, op)
            # MPI defines the first n elements (and leaves lead and tail)
            return (r[:fr.lead + n], r[fr.lead + n * c.size:])
        s, sspec = buffer(fs, n, c.size, dtype, x)
        r, rspec = buffer(fr, n, 1, dtype)
        c("Reduce_scatter_block", sspec, rspec, op)
        return s, r
    return case


def rs_counts(size, k):
    return [(i + k) % 3 for i in range(size)]


def reduce_scatter_case(fs, fr, k, counts_arg="list", inplace=False,
                        dtype="i", op=MPI.SUM):
    """``counts_arg``: "list", "tuple", "ndarray" or "None"."""
    def case(c):
        counts = rs_counts(c.size, k)
        total, mine = sum(counts), counts[c.rank]
        arg = {"list": counts, "tuple": tuple(counts),
               "ndarray": np.array(counts), "None": None}[counts_arg]
        x = vals(c.rank, total, dtype)
        if inplace:
            r, rspec = buffer(fr, total, 1, dtype, x)
            c("Reduce_scatter", in_place(inplace), rspec, arg, op)
            return (r[:fr.lead + mine], r[fr.lead + total:])
        s, sspec = buffer(fs, total, 1, dtype, x)
        r, rspec = buffer(fr, mine, 1, dtype)
        c("Reduce_scatter", sspec, rspec, arg, op)
        return s, r
    return case


def test_allreduce_forms(h):
    for fs, fr in form_pairs():
        for n in (0, 5) if fs is fr else (5,):
            h.check(f"Allreduce {fs.name} -> {fr.name} n={n}",
                    allreduce_case(fs, fr, n), "allreduce",
                    modes=modes(fs, fr))
    for f in FORMS:
        for inplace in INPLACE[1:]:
            h.check(f"Allreduce {inplace} -> {f.name} n=5",
                    allreduce_case(None, f, 5, inplace), "allreduce",
                    modes=modes(f))
    for n in (1, 1000):
        for inplace in INPLACE:
            h.check(f"Allreduce buf n={n} inplace={inplace}",
                    allreduce_case(PLAIN, PLAIN, n, inplace), "allreduce",
                    modes=(False, True))
    h.finish()


@pytest.mark.parametrize("name", ["Scan", "Exscan"])
def test_scan_forms(h, name):
    collective = name.lower()
    for fs, fr in form_pairs():
        for n in (0, 5) if fs is fr else (5,):
            h.check(f"{name} {fs.name} -> {fr.name} n={n}",
                    allreduce_case(fs, fr, n, name=name), collective,
                    modes=modes(fs, fr))
    for f in FORMS[:6]:
        for inplace in INPLACE[1:]:
            h.check(f"{name} {inplace} -> {f.name} n=5",
                    allreduce_case(None, f, 5, inplace, name=name),
                    collective, modes=modes(f))
    h.check(f"{name} buf n=1000", allreduce_case(PLAIN, PLAIN, 1000,
                                                 name=name),
            collective, modes=(False, True))
    h.finish()


def test_reduce_forms(h):
    root = h.size - 1
    for fs, fr in form_pairs():
        for n in (0, 5) if fs is fr else (5,):
            h.check(f"Reduce {fs.name} -> {fr.name} n={n} root={root}",
                    reduce_case(fs, fr, n, root), "reduce",
                    modes=modes(fs, fr))
    for f in FORMS:
        for inplace in INPLACE[1:]:
            h.check(f"Reduce {inplace} -> {f.name} n=5 root={root}",
                    reduce_case(PLAIN, f, 5, root, inplace), "reduce",
                    modes=modes(f))
    for nonroot in ("None", "same", "empty"):
        h.check(f"Reduce buf n=5 root={root}, non-root recvbuf {nonroot}",
                reduce_case(PLAIN, PLAIN, 5, root, nonroot=nonroot),
                "reduce", modes=(False, True))
    h.check("Reduce buf n=1000 root=0", reduce_case(PLAIN, PLAIN, 1000, 0),
            "reduce", modes=(False, True))
    h.finish()


def test_reduce_scatter_block_forms(h):
    for fs, fr in form_pairs():
        for n in (0, 3) if fs is fr else (3,):
            h.check(f"Reduce_scatter_block {fs.name} -> {fr.name} n={n}",
                    reduce_scatter_block_case(fs, fr, n),
                    "reduce_scatter_block", modes=modes(fs, fr))
    for f in FORMS:
        for inplace in INPLACE[1:]:
            h.check(f"Reduce_scatter_block {inplace} -> {f.name} n=3",
                    reduce_scatter_block_case(None, f, 3, inplace),
                    "reduce_scatter_block", modes=modes(f))
    h.check("Reduce_scatter_block buf n=300",
            reduce_scatter_block_case(PLAIN, PLAIN, 300),
            "reduce_scatter_block", modes=(False, True))
    h.finish()


def test_reduce_scatter_forms(h):
    for fs, fr in form_pairs():
        h.check(f"Reduce_scatter {fs.name} -> {fr.name} counts=list",
                reduce_scatter_case(fs, fr, 1), "reduce_scatter",
                modes=modes(fs, fr))
    for k in (0, 1):
        for counts_arg in ("list", "tuple", "ndarray", "None"):
            h.check(f"Reduce_scatter buf recvcounts={counts_arg} k={k}",
                    reduce_scatter_case(PLAIN, PLAIN, k, counts_arg),
                    "reduce_scatter", modes=(False, True))
    for f in FORMS:
        for inplace in INPLACE[1:]:
            h.check(f"Reduce_scatter {inplace} -> {f.name} counts=list",
                    reduce_scatter_case(None, f, 1, inplace=inplace),
                    "reduce_scatter", modes=modes(f))
    h.finish()


# --------------------------------------------------------------- data motion


def bcast_case(form, n, root, dtype="i"):
    def case(c):
        data = ids(root, n, dtype) if c.rank == root else None
        b, spec = buffer(form, n, 1, dtype, data)
        c("Bcast", spec, root)
        return b
    return case


def allgather_case(fs, fr, n, inplace=False, dtype="i"):
    def case(c):
        mine = ids(c.rank, n, dtype)
        r, rspec = buffer(fr, n, c.size, dtype)
        if inplace:
            r[fr.lead + c.rank * n:fr.lead + (c.rank + 1) * n] = mine
            c("Allgather", in_place(inplace), rspec)
            return (r,)
        s, sspec = buffer(fs, n, 1, dtype, mine)
        c("Allgather", sspec, rspec)
        return s, r
    return case


def alltoall_case(fs, fr, n, inplace=False, dtype="i"):
    def case(c):
        out = np.concatenate([ids(c.rank, n, dtype, k=j)
                              for j in range(c.size)]) if n else \
            np.empty(0, dtype)
        r, rspec = buffer(fr, n, c.size, dtype, out if inplace else None)
        if inplace:
            c("Alltoall", in_place(inplace), rspec)
            return (r,)
        s, sspec = buffer(fs, n, c.size, dtype, out)
        c("Alltoall", sspec, rspec)
        return s, r
    return case


def gather_case(fs, fr, n, root, inplace=False, nonroot="None", dtype="i"):
    def case(c):
        mine = ids(c.rank, n, dtype)
        if c.rank == root:
            r, rspec = buffer(fr, n, c.size, dtype)
            if inplace:
                r[fr.lead + root * n:fr.lead + (root + 1) * n] = mine
                c("Gather", in_place(inplace), rspec, root)
                return (r,)
            s, sspec = buffer(fs, n, 1, dtype, mine)
            c("Gather", sspec, rspec, root)
            return s, r
        s, sspec = buffer(fs, n, 1, dtype, mine)
        r = nonroot_buffer(nonroot, n * c.size, dtype)
        c("Gather", sspec, r, root)
        return s, r
    return case


def scatter_case(fs, fr, n, root, inplace=False, nonroot="None", dtype="i"):
    def case(c):
        if c.rank == root:
            blocks = np.concatenate([ids(j, n, dtype) for j in range(c.size)])
            s, sspec = buffer(fs, n, c.size, dtype, blocks)
            if inplace:
                c("Scatter", sspec, in_place(inplace), root)
                return (s,)
            r, rspec = buffer(fr, n, 1, dtype)
            c("Scatter", sspec, rspec, root)
            return s, r
        s = nonroot_buffer(nonroot, n * c.size, dtype)
        r, rspec = buffer(fr, n, 1, dtype)
        c("Scatter", s, rspec, root)
        return s, r
    return case


def test_bcast_forms(h):
    root = h.size - 1
    for f in FORMS:
        for n in (0, 5):
            h.check(f"Bcast {f.name} n={n} root={root}",
                    bcast_case(f, n, root), "bcast", modes=modes(f))
    h.check("Bcast buf n=1000 root=0", bcast_case(PLAIN, 1000, 0), "bcast",
            modes=(False, True))
    h.finish()


def test_allgather_forms(h):
    for fs, fr in form_pairs():
        for n in (0, 3) if fs is fr else (3,):
            h.check(f"Allgather {fs.name} -> {fr.name} n={n}",
                    allgather_case(fs, fr, n), "allgather",
                    modes=modes(fs, fr))
    for f in FORMS:
        for inplace in INPLACE[1:]:
            h.check(f"Allgather {inplace} -> {f.name} n=3",
                    allgather_case(None, f, 3, inplace), "allgather",
                    modes=modes(f))
    h.check("Allgather buf n=500", allgather_case(PLAIN, PLAIN, 500),
            "allgather", modes=(False, True))
    h.finish()


def test_alltoall_forms(h):
    for fs, fr in form_pairs():
        for n in (0, 2) if fs is fr else (2,):
            h.check(f"Alltoall {fs.name} -> {fr.name} n={n}",
                    alltoall_case(fs, fr, n), "alltoall",
                    modes=modes(fs, fr))
    for f in FORMS:
        for inplace in INPLACE[1:]:
            h.check(f"Alltoall {inplace} -> {f.name} n=2",
                    alltoall_case(None, f, 2, inplace), "alltoall",
                    modes=modes(f))
    h.check("Alltoall buf n=200", alltoall_case(PLAIN, PLAIN, 200),
            "alltoall", modes=(False, True))
    h.finish()


def test_gather_forms(h):
    root = h.size - 1
    for fs, fr in form_pairs():
        for n in (0, 3) if fs is fr else (3,):
            h.check(f"Gather {fs.name} -> {fr.name} n={n} root={root}",
                    gather_case(fs, fr, n, root), "gather",
                    modes=modes(fs, fr))
    for f in FORMS:
        for inplace in INPLACE[1:]:
            h.check(f"Gather {inplace} -> {f.name} n=3 root={root}",
                    gather_case(PLAIN, f, 3, root, inplace), "gather",
                    modes=modes(f))
    for nonroot in ("None", "same", "empty"):
        h.check(f"Gather buf n=3 root={root}, non-root recvbuf {nonroot}",
                gather_case(PLAIN, PLAIN, 3, root, nonroot=nonroot),
                "gather", modes=(False, True))
    h.check("Gather buf n=500 root=0", gather_case(PLAIN, PLAIN, 500, 0),
            "gather", modes=(False, True))
    h.finish()


def test_scatter_forms(h):
    root = h.size - 1
    for fs, fr in form_pairs():
        for n in (0, 3) if fs is fr else (3,):
            h.check(f"Scatter {fs.name} -> {fr.name} n={n} root={root}",
                    scatter_case(fs, fr, n, root), "scatter",
                    modes=modes(fs, fr))
    for f in FORMS:
        for inplace in INPLACE[1:]:
            h.check(f"Scatter {f.name} -> {inplace} n=3 root={root}",
                    scatter_case(f, PLAIN, 3, root, inplace), "scatter",
                    modes=modes(f))
    for nonroot in ("None", "same", "empty"):
        h.check(f"Scatter buf n=3 root={root}, non-root sendbuf {nonroot}",
                scatter_case(PLAIN, PLAIN, 3, root, nonroot=nonroot),
                "scatter", modes=(False, True))
    h.check("Scatter buf n=500 root=0", scatter_case(PLAIN, PLAIN, 500, 0),
            "scatter", modes=(False, True))
    h.finish()


def test_barrier(h):
    def case(c):
        c("Barrier")
        return "done"
    h.check("Barrier", case, "barrier", modes=(False, True))
    h.finish()


# --------------------------------------------------------- every root, bad


def test_every_root(h):
    for root in range(h.size):
        for nb in (False, True):
            m = (nb,)
            h.check(f"Bcast root={root}", bcast_case(PLAIN, 5, root),
                    "bcast", modes=m)
            h.check(f"Reduce root={root}",
                    reduce_case(PLAIN, PLAIN, 5, root), "reduce", modes=m)
            h.check(f"Reduce IN_PLACE root={root}",
                    reduce_case(PLAIN, PLAIN, 5, root, "IN_PLACE"),
                    "reduce", modes=m)
            h.check(f"Gather root={root}",
                    gather_case(PLAIN, PLAIN, 3, root), "gather", modes=m)
            h.check(f"Gather IN_PLACE root={root}",
                    gather_case(PLAIN, PLAIN, 3, root, "IN_PLACE"), "gather",
                    modes=m)
            h.check(f"Scatter root={root}",
                    scatter_case(PLAIN, PLAIN, 3, root), "scatter", modes=m)
            h.check(f"Scatter IN_PLACE root={root}",
                    scatter_case(PLAIN, PLAIN, 3, root, "IN_PLACE"),
                    "scatter", modes=m)
            h.check(f"Gatherv root={root}",
                    gatherv_case(PLAIN, VFORM["[buf, counts, displs, TYPE]"],
                                 root), "gatherv", modes=m)
            h.check(f"Scatterv root={root}",
                    scatterv_case(VFORM["[buf, counts, displs, TYPE]"], PLAIN,
                                  root), "scatterv", modes=m)
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


# --------------------------------------------------------- vector collectives


class VForm(NamedTuple):
    """A vector buffer argument. ``layout``: general (displacements out of
    order, with gaps), contiguous (no displacements), scalar (one count for
    every rank), strided (one displacement step), inferred (no counts)."""

    name: str
    layout: str
    spec: Callable  # (buf, counts, displs, stride, T, code) -> argument


VFORMS = [
    VForm("[buf, counts, displs, TYPE]", "general",
          lambda b, c, d, s, T, t: [b, c, d, T]),
    VForm("[buf, (counts, displs), TYPE]", "general",
          lambda b, c, d, s, T, t: [b, (c, d), T]),
    VForm("[buf, (counts, displs)]", "general",
          lambda b, c, d, s, T, t: [b, (c, d)]),
    VForm("[buf, ndarray counts, ndarray displs, TYPE]", "general",
          lambda b, c, d, s, T, t: [b, np.array(c), np.array(d), T]),
    VForm("[buf, counts]", "contiguous", lambda b, c, d, s, T, t: [b, c]),
    VForm("[buf, counts, TYPE]", "contiguous",
          lambda b, c, d, s, T, t: [b, c, T]),
    VForm("[buf, counts, 'code']", "contiguous",
          lambda b, c, d, s, T, t: [b, c, t]),
    VForm("[buf, (counts, None), TYPE]", "contiguous",
          lambda b, c, d, s, T, t: [b, (c, None), T]),
    VForm("[buf, counts, None, TYPE]", "contiguous",
          lambda b, c, d, s, T, t: [b, c, None, T]),
    VForm("[buf, count, None, TYPE]", "scalar",
          lambda b, c, d, s, T, t: [b, c[0], None, T]),
    VForm("[buf, count, TYPE]", "scalar",
          lambda b, c, d, s, T, t: [b, c[0], T]),
    VForm("[buf, (count, None), TYPE]", "scalar",
          lambda b, c, d, s, T, t: [b, (c[0], None), T]),
    VForm("[buf, counts, stride, TYPE]", "strided",
          lambda b, c, d, s, T, t: [b, c, s, T]),
    VForm("[buf, (counts, stride), TYPE]", "strided",
          lambda b, c, d, s, T, t: [b, (c, s), T]),
    VForm("buf", "inferred", lambda b, c, d, s, T, t: b),
    VForm("[buf, TYPE]", "inferred", lambda b, c, d, s, T, t: [b, T]),
    VForm("[buf, 'code']", "inferred", lambda b, c, d, s, T, t: [b, t]),
]
VFORM = {f.name: f for f in VFORMS}
# mpi4py reads a tuple in the counts place as (counts, displs): with every
# count equal to c, a size-2 tuple means count c, stride c (the contiguous
# layout) and any other size is a ValueError on every rank.
TUPLE_QUIRK = VForm("[buf, tuple(counts), TYPE]", "scalar",
                    lambda b, c, d, s, T, t: [b, tuple(c), T])


def layout_counts(layout: str, size: int, k: int = 1) -> list[int]:
    """Per-block counts that ``layout`` can express (k=0: some zero)."""
    if layout == "scalar":
        return [2 + k] * size
    if layout == "inferred":
        total = 2 * size + k
        return [total // size + (total % size > i) for i in range(size)]
    return [(i % 3) + k for i in range(size)]


def layout_of(vform: VForm, counts: list[int]):
    """(displs where each block lands, stride, total elements)."""
    size = len(counts)
    if vform.layout == "general":  # reversed order, one gap around each
        displs, at = [0] * size, 1
        for i in reversed(range(size)):
            displs[i] = at
            at += counts[i] + 1
        return displs, None, at
    if vform.layout == "strided":
        stride = max(counts) + 1
        return [i * stride for i in range(size)], stride, size * stride
    displs = list(np.cumsum([0, *counts[:-1]])) if size else []
    return [int(d) for d in displs], None, sum(counts)


def vbuffer(vform: VForm, counts, dtype="i", data=None):
    """(array, argument, displs) for a vector argument; ``data``: a
    function block index -> values to place there (None: FILL)."""
    displs, stride, total = layout_of(vform, counts)
    b = full(total, dtype)
    if data is not None:
        for i, (n, d) in enumerate(zip(counts, displs)):
            b[d:d + n] = data(i, n)
    spec = vform.spec(b, list(counts), displs, stride, mpitype(dtype),
                      np.dtype(dtype).char)
    return b, spec, displs


def allgatherv_case(fs, vr, k=1, inplace=False, dtype="i"):
    def case(c):
        counts = layout_counts(vr.layout, c.size, k)
        n = counts[c.rank]
        if inplace:
            r, rspec, _ = vbuffer(vr, counts, dtype, lambda i, m: (
                ids(c.rank, m, dtype) if i == c.rank else full(m, dtype)))
            c("Allgatherv", in_place(inplace), rspec)
            return (r,)
        s, sspec = buffer(fs, n, 1, dtype, ids(c.rank, n, dtype))
        r, rspec, _ = vbuffer(vr, counts, dtype)
        c("Allgatherv", sspec, rspec)
        return s, r
    return case


def gatherv_case(fs, vr, root, k=1, inplace=False, nonroot="None",
                 dtype="i"):
    def case(c):
        counts = layout_counts(vr.layout, c.size, k)
        n = counts[c.rank]
        if c.rank == root:
            if inplace:
                r, rspec, _ = vbuffer(vr, counts, dtype, lambda i, m: (
                    ids(c.rank, m, dtype) if i == c.rank else full(m, dtype)))
                c("Gatherv", in_place(inplace), rspec, root)
                return (r,)
            s, sspec = buffer(fs, n, 1, dtype, ids(c.rank, n, dtype))
            r, rspec, _ = vbuffer(vr, counts, dtype)
            c("Gatherv", sspec, rspec, root)
            return s, r
        s, sspec = buffer(fs, n, 1, dtype, ids(c.rank, n, dtype))
        r = nonroot_buffer(nonroot, sum(counts), dtype)
        c("Gatherv", sspec, r, root)
        return s, r
    return case


def scatterv_case(vs, fr, root, k=1, inplace=False, nonroot="None",
                  dtype="i"):
    def case(c):
        counts = layout_counts(vs.layout, c.size, k)
        n = counts[c.rank]
        if c.rank == root:
            s, sspec, _ = vbuffer(vs, counts, dtype,
                                  lambda i, m: ids(i, m, dtype))
            if inplace:
                c("Scatterv", sspec, in_place(inplace), root)
                return (s,)
            r, rspec = buffer(fr, n, 1, dtype)
            c("Scatterv", sspec, rspec, root)
            return s, r
        s = nonroot_buffer(nonroot, sum(counts), dtype)
        r, rspec = buffer(fr, n, 1, dtype)
        c("Scatterv", s, rspec, root)
        return s, r
    return case


def a2a_counts(layout, size, rank, k=1):
    """(send counts, recv counts) of ``rank`` for Alltoallv."""
    if layout in ("scalar", "inferred"):
        return [2 + k] * size, [2 + k] * size
    f = lambda i, j: (i + 2 * j) % 3 + k  # noqa: E731  (i sends to j)
    return ([f(rank, j) for j in range(size)],
            [f(j, rank) for j in range(size)])


def alltoallv_case(vs, vr, k=1, inplace=False, dtype="i"):
    def case(c):
        if inplace:  # one set of counts for both ways: symmetric
            counts = [(c.rank + j) % 3 + k for j in range(c.size)] \
                if vr.layout not in ("scalar", "inferred") else \
                [2 + k] * c.size
            r, rspec, _ = vbuffer(vr, counts, dtype,
                                  lambda j, m: ids(c.rank, m, dtype, k=j))
            c("Alltoallv", in_place(inplace), rspec)
            return (r,)
        scounts, _ = a2a_counts(vs.layout, c.size, c.rank, k)
        _, rcounts = a2a_counts(vr.layout, c.size, c.rank, k)
        if vs.layout in ("scalar", "inferred") or \
                vr.layout in ("scalar", "inferred"):
            scounts = rcounts = [2 + k] * c.size
        s, sspec, _ = vbuffer(vs, scounts, dtype,
                              lambda j, m: ids(c.rank, m, dtype, k=j))
        r, rspec, _ = vbuffer(vr, rcounts, dtype)
        c("Alltoallv", sspec, rspec)
        return s, r
    return case


SEND_FORMS = [BY_NAME["buf"], BY_NAME["[buf, TYPE]"],
              BY_NAME["[buf, count, TYPE]"],
              BY_NAME["[buf, count, displ, TYPE]"]]


def vmodes(vform) -> tuple:
    return (False, True) if vform.name in (
        "[buf, counts, displs, TYPE]", "buf") else (False,)


def test_allgatherv_forms(h):
    for vr in VFORMS:
        for k in (0, 1) if vr.layout == "general" else (1,):
            h.check(f"Allgatherv buf -> {vr.name} k={k}",
                    allgatherv_case(PLAIN, vr, k), "allgatherv",
                    modes=vmodes(vr))
    for fs in SEND_FORMS[1:]:
        vr = VFORMS[0]
        h.check(f"Allgatherv {fs.name} -> {vr.name}",
                allgatherv_case(fs, vr), "allgatherv")
    for vr in VFORMS:
        for inplace in INPLACE[1:]:
            h.check(f"Allgatherv {inplace} -> {vr.name}",
                    allgatherv_case(None, vr, inplace=inplace), "allgatherv",
                    modes=vmodes(vr))
    h.check(f"Allgatherv buf -> {TUPLE_QUIRK.name}",
            allgatherv_case(PLAIN, TUPLE_QUIRK), "allgatherv")
    h.finish()


def test_gatherv_forms(h):
    root = h.size - 1
    for vr in VFORMS:
        for k in (0, 1) if vr.layout == "general" else (1,):
            h.check(f"Gatherv buf -> {vr.name} k={k} root={root}",
                    gatherv_case(PLAIN, vr, root, k), "gatherv",
                    modes=vmodes(vr))
    for fs in SEND_FORMS[1:]:
        vr = VFORMS[0]
        h.check(f"Gatherv {fs.name} -> {vr.name} root={root}",
                gatherv_case(fs, vr, root), "gatherv")
    for vr in VFORMS[:1] + VFORMS[4:5] + VFORMS[-3:-2]:
        for inplace in INPLACE[1:]:
            h.check(f"Gatherv {inplace} -> {vr.name} root={root}",
                    gatherv_case(PLAIN, vr, root, inplace=inplace), "gatherv",
                    modes=vmodes(vr))
    for nonroot in ("None", "same", "empty"):
        vr = VFORMS[0]
        h.check(f"Gatherv buf -> {vr.name} root={root}, non-root recvbuf "
                f"{nonroot}", gatherv_case(PLAIN, vr, root, nonroot=nonroot),
                "gatherv")
    h.finish()


def test_scatterv_forms(h):
    root = h.size - 1
    for vs in VFORMS:
        for k in (0, 1) if vs.layout == "general" else (1,):
            h.check(f"Scatterv {vs.name} -> buf k={k} root={root}",
                    scatterv_case(vs, PLAIN, root, k), "scatterv",
                    modes=vmodes(vs))
    for fr in SEND_FORMS[1:]:
        vs = VFORMS[0]
        h.check(f"Scatterv {vs.name} -> {fr.name} root={root}",
                scatterv_case(vs, fr, root), "scatterv")
    for vs in VFORMS[:1] + VFORMS[4:5] + VFORMS[-3:-2]:
        for inplace in INPLACE[1:]:
            h.check(f"Scatterv {vs.name} -> {inplace} root={root}",
                    scatterv_case(vs, PLAIN, root, inplace=inplace),
                    "scatterv", modes=vmodes(vs))
    for nonroot in ("None", "same", "empty"):
        vs = VFORMS[0]
        h.check(f"Scatterv {vs.name} -> buf root={root}, non-root sendbuf "
                f"{nonroot}", scatterv_case(vs, PLAIN, root, nonroot=nonroot),
                "scatterv")
    h.finish()


def test_alltoallv_forms(h):
    for v in VFORMS:
        for k in (0, 1) if v.layout == "general" else (1,):
            h.check(f"Alltoallv {v.name} -> {v.name} k={k}",
                    alltoallv_case(v, v, k), "alltoallv", modes=vmodes(v))
    for v in VFORMS[1:]:
        h.check(f"Alltoallv {VFORMS[0].name} -> {v.name}",
                alltoallv_case(VFORMS[0], v), "alltoallv")
    for v in VFORMS:
        for inplace in INPLACE[1:]:
            h.check(f"Alltoallv {inplace} -> {v.name}",
                    alltoallv_case(None, v, inplace=inplace), "alltoallv",
                    modes=vmodes(v))
    h.check(f"Alltoallv {TUPLE_QUIRK.name} both ways",
            alltoallv_case(TUPLE_QUIRK, TUPLE_QUIRK), "alltoallv")
    h.finish()


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
            per = types.ints_per_item(name)

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
            del per

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
    packing (a plan cached for the caller's buffers once did, so a second
    nonblocking Allgather of a vector sent the first one's data)."""
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
                      **({"root": 0} if name in ROOTED else {}))
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


ROOTED = ("Bcast", "Gather", "Scatter")

# ------------------------------------------------------------ buffer objects


class DLPackOnly:
    """A DLPack exporter and nothing else (no buffer protocol)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, *args, **kwargs):
        return self.array.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


class ArrayInterfaceOnly:
    """``__array_interface__`` only: NumPy takes it, mpi4py does not."""

    def __init__(self, array):
        self.array = array
        self.__array_interface__ = array.__array_interface__


def readonly(a):
    a = a.copy()
    a.flags.writeable = False
    return a


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


def kind_case(kind, collective, n=4):
    """``collective`` with buffers of ``kind`` on every side (``n``: the
    per-rank count, even so that 2-D shapes fit)."""
    make, view = KINDS[kind]

    def case(c):
        v = lambda r, m: ids(r, m, "i") % 100  # noqa: E731  (fits int8)
        z = lambda m: make(np.zeros(m, "i") + 7)  # noqa: E731
        if collective == "Bcast":
            b = make(v(0, n)) if c.rank == 0 else z(n)
            c("Bcast", b, 0)
            return view(b)
        if collective == "Allgather":
            s, r = make(v(c.rank, n)), z(n * c.size)
            c("Allgather", s, r)
            return view(s), view(r)
        if collective == "Alltoall":
            s, r = make(v(c.rank, n * c.size)), z(n * c.size)
            c("Alltoall", s, r)
            return view(s), view(r)
        if collective == "Gather":
            s = make(v(c.rank, n))
            r = z(n * c.size) if c.rank == 0 else None
            c("Gather", s, r, 0)
            return view(s), (view(r) if r is not None else None)
        if collective == "Scatter":
            s = make(v(0, n * c.size)) if c.rank == 0 else None
            r = z(n)
            c("Scatter", s, r, 0)
            return (view(s) if s is not None else None), view(r)
        op = MPI.LOR if kind == "bool" else MPI.SUM
        if collective in ("Allreduce", "Scan"):
            s, r = make(vals(c.rank, n) % 4), z(n)
            c(collective, s, r, op)
            return view(s), view(r)
        if collective == "Reduce_scatter_block":
            s, r = make(vals(c.rank, n * c.size) % 4), z(n)
            c(collective, s, r, op)
            return view(s), view(r)
        raise ValueError(collective)
    return case


KIND_COLLECTIVES = ["Bcast", "Allgather", "Alltoall", "Gather", "Scatter",
                    "Allreduce", "Scan", "Reduce_scatter_block"]


@pytest.mark.parametrize("collective", KIND_COLLECTIVES)
def test_buffer_kinds(h, collective):
    for kind in KINDS:
        h.check(f"{collective} {kind}", kind_case(kind, collective),
                collective.lower(),
                modes=(False, True) if kind == "DLPack-only object" else
                (False,))
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


# -------------------------------------------------------------------- ops


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


REDUCTIONS = ["Allreduce", "Reduce", "Scan", "Exscan",
              "Reduce_scatter_block", "Reduce_scatter"]


def op_case(name, op, dtype="i", n=4, values=None, T=None):
    """Reduction ``name`` with ``op`` on ``dtype`` (or explicit MPI type
    ``T`` over ``values(rank, n)``)."""
    values = values or (lambda r, m: vals(r, m, dtype))

    def case(c):
        m = n * c.size if name in ("Reduce_scatter_block",
                                   "Reduce_scatter") else n
        s = values(c.rank, m)
        r = np.full((n, *s.shape[1:]), FILL).astype(s.dtype)
        sa, ra = ([s, T], [r, T]) if T is not None else (s, r)
        if name == "Reduce":
            c("Reduce", sa, ra, op, 0)
        elif name == "Reduce_scatter":
            c("Reduce_scatter", sa, ra, [len(r)] * c.size, op)
        else:
            c(name, sa, ra, op)
        if name == "Exscan" and c.rank == 0 and not STRICT:
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
    c_ = name.lower()
    for opname, op in PREDEFINED.items():
        h.check(f"{name} {opname} int32", op_case(name, op), c_)
    for opname in ("SUM", "PROD", "MAX", "MIN"):
        h.check(f"{name} {opname} float64",
                op_case(name, PREDEFINED[opname], "d"), c_)
    for opname in ("LAND", "LOR", "LXOR"):
        h.check(f"{name} {opname} bool",
                op_case(name, PREDEFINED[opname], "?"), c_)
    for opname in ("BAND", "BOR", "BXOR", "MAX"):
        h.check(f"{name} {opname} uint8",
                op_case(name, PREDEFINED[opname], "B"), c_)
    h.check(f"{name} SUM complex128", op_case(name, MPI.SUM, "D"), c_)
    h.check(f"{name} PROD complex64", op_case(name, MPI.PROD, "F"), c_)

    # MAXLOC / MINLOC on (int value, int index) pairs: MPI.TWOINT
    def pairs(r, m):
        v = np.empty((m, 2), "i")
        v[:, 0] = (np.arange(m) * 5 + r * 3) % 4  # ties: the lower index
        v[:, 1] = r
        return v
    for opname, op in (("MAXLOC", MPI.MAXLOC), ("MINLOC", MPI.MINLOC)):
        h.check(f"{name} {opname} TWOINT",
                op_case(name, op, values=pairs, T=MPI.TWOINT), c_)

    # user-defined ops
    add = MPI.Op.Create(_add, commute=True)
    first = MPI.Op.Create(_first, commute=False)
    affine = MPI.Op.Create(_affine, commute=False)
    try:
        h.check(f"{name} Op.Create(add, commute=True)", op_case(name, add),
                c_, modes=(False, True))
        h.check(f"{name} Op.Create(first, commute=False)",
                op_case(name, first), c_)
        h.check(f"{name} Op.Create(affine, commute=False) uint64",
                op_case(name, affine, values=affine_vals), c_,
                modes=(False, True))
    finally:
        for op in (add, first, affine):
            op.Free()
    h.finish()


@pytest.mark.parametrize("name", REDUCTIONS)
def test_op_errors(h, name):
    """Ops MPI rejects for the type, and ops that are not MPI.Op: every
    rank raises before any message moves."""
    c_ = name.lower()
    for label, op, dtype in (("MAX complex128", MPI.MAX, "D"),
                             ("BAND float64", MPI.BAND, "d"),
                             ("LAND float32", MPI.LAND, "f"),
                             ("MAXLOC int32", MPI.MAXLOC, "i"),
                             ("REPLACE int32", MPI.REPLACE, "i"),
                             ("NO_OP int32", MPI.NO_OP, "i"),
                             ("OP_NULL int32", MPI.OP_NULL, "i")):
        h.check(f"{name} {label} (rejected)", op_case(name, op, dtype), c_)

    def byte_sum(c):
        m = 4 * c.size if name.startswith("Reduce_s") else 4
        s, r = bytearray(m), bytearray(4)
        args = ([s, MPI.BYTE], [r, MPI.BYTE])
        if name == "Reduce":
            c(name, *args, MPI.SUM, 0)
        elif name == "Reduce_scatter":
            c(name, *args, [4] * c.size, MPI.SUM)
        else:
            c(name, *args, MPI.SUM)
        return r
    h.check(f"{name} SUM on MPI.BYTE (rejected)", byte_sum, c_)
    for label, op in (("a Python callable", operator.add),
                      ("the string 'sum'", "sum"), ("None", None),
                      ("an int", 3)):
        h.check(f"{name} op={label} (rejected)", op_case(name, op), c_)
    h.finish()


# ------------------------------------------------------------ argument errors


def error_cases(size):
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


def test_split_communicator(h):
    """A wrapped Split (unequal halves at odd sizes) against the raw one."""
    world = MPI.COMM_WORLD
    raw = world.Split(world.Get_rank() % 2, world.Get_rank())
    wrapped = raw if SELFTEST else mpicoll.Comm(raw)
    try:
        pair = (raw, wrapped)
        for f in (PLAIN, BY_NAME["[buf, count, displ, TYPE]"]):
            h.check(f"split: Allreduce {f.name}", allreduce_case(f, f, 5),
                    "allreduce", comms=pair, modes=(False, True))
            h.check(f"split: Allgather {f.name}", allgather_case(f, f, 3),
                    "allgather", comms=pair)
            h.check(f"split: Alltoall {f.name}", alltoall_case(f, f, 2),
                    "alltoall", comms=pair)
            h.check(f"split: Reduce_scatter_block {f.name}",
                    reduce_scatter_block_case(f, f, 2),
                    "reduce_scatter_block", comms=pair)
        # every world rank makes the same checks (the harness agrees on
        # outcomes over the world): roots modulo each half's size
        for root in range((h.size + 1) // 2):
            def at(make, root=root):
                return lambda c: make(root % c.size)(c)
            h.check(f"split: Bcast root={root}",
                    at(lambda r: bcast_case(PLAIN, 5, r)), "bcast",
                    comms=pair)
            h.check(f"split: Reduce root={root}",
                    at(lambda r: reduce_case(PLAIN, PLAIN, 5, r)), "reduce",
                    comms=pair)
            h.check(f"split: Gatherv root={root}",
                    at(lambda r: gatherv_case(PLAIN, VFORMS[0], r)),
                    "gatherv", comms=pair)
            h.check(f"split: Scatter root={root}",
                    at(lambda r: scatter_case(PLAIN, PLAIN, 3, r)),
                    "scatter", comms=pair)
        h.check("split: Allgatherv", allgatherv_case(PLAIN, VFORMS[0]),
                "allgatherv", comms=pair)
        h.check("split: Alltoallv", alltoallv_case(VFORMS[0], VFORMS[0]),
                "alltoallv", comms=pair)
        h.check("split: Reduce_scatter",
                reduce_scatter_case(PLAIN, PLAIN, 1), "reduce_scatter",
                comms=pair)
        h.check("split: Scan", allreduce_case(PLAIN, PLAIN, 4, name="Scan"),
                "scan", comms=pair)
        h.check("split: Barrier", lambda c: c("Barrier"), "barrier",
                comms=pair, modes=(False, True))
    finally:
        if SELFTEST:
            raw.Free()
        else:
            wrapped.Free()
    h.finish()


def test_argument_errors(h):
    for label, (collective, case) in error_cases(h.size).items():
        h.check(label, case, collective,
                modes=(False, True) if "Allreduce count" in label or
                "Bcast None" in label else (False,))
    h.finish()


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


@pytest.mark.skipif(SELFTEST, reason="checks mpicoll's classes")
def test_signatures(h):
    """Each mpicoll collective takes mpi4py's parameters (names, kinds and
    defaults, in order) plus keyword-only ``algorithm``."""
    wrong = []
    for name in COLLECTIVE_METHODS:
        for n in (name, "I" + name[0].lower() + name[1:]):
            theirs = inspect.signature(getattr(MPI.Intracomm, n))
            ours = inspect.signature(getattr(mpicoll.Comm, n))
            want = [(p.name, p.kind, p.default)
                    for p in theirs.parameters.values()]
            got = [(p.name, p.kind, p.default)
                   for p in ours.parameters.values() if p.name != "algorithm"]
            if got != want:
                wrong.append(f"{n}{ours} vs mpi4py's {n}{theirs}")
            alg = ours.parameters.get("algorithm")
            if alg is None or alg.kind != inspect.Parameter.KEYWORD_ONLY:
                wrong.append(f"{n}: no keyword-only algorithm=")
    h.problems += [("signatures", "-", w) for w in wrong]
    h.finish()


COLLECTIVE_METHODS = [
    "Allreduce", "Reduce", "Bcast", "Allgather", "Allgatherv", "Gather",
    "Gatherv", "Scatter", "Scatterv", "Alltoall", "Alltoallv",
    "Reduce_scatter", "Reduce_scatter_block", "Scan", "Exscan", "Barrier"]


# ------------------------------------------------- nonblocking request API


def _finish_all(reqs):
    for r in reqs:
        try:
            r.Wait()
        except Exception:  # already complete
            pass


def test_nonblocking_wait(h):
    """The promise: what a nonblocking collective returns has ``Wait()``
    (tested with every collective above) and ``wait()``."""
    def lower_wait(c):
        s, r = ids(c.rank, 3), full(3)
        req = c.comm.Iallreduce(s, r, MPI.SUM, **c.kw)
        got = req.wait()
        return r, got
    h.check("Iallreduce(...).wait()", lower_wait, "allreduce")

    def lower_wait_bcast(c):
        b = ids(0, 4) if c.rank == 0 else full(4)
        req = c.comm.Ibcast(b, 0, **c.kw)
        got = req.wait()
        return b, got
    h.check("Ibcast(...).wait()", lower_wait_bcast, "bcast")
    h.finish()


# ------------------------------------------------ the mpi4py tutorial, wrapped


def tutorial_cases():
    """The examples of mpi4py's tutorial (docs/source/tutorial.rst), each
    a function of ``comm`` returning what the program ends up with."""

    def p2p_objects(c):
        comm = c.comm
        rank = comm.Get_rank()
        data = None
        if comm.Get_size() < 2:
            return "needs 2 ranks"
        if rank == 0:
            data = {'a': 7, 'b': 3.14}
            comm.send(data, dest=1, tag=11)
        elif rank == 1:
            data = comm.recv(source=0, tag=11)
        return data

    def p2p_nonblocking(c):
        comm = c.comm
        rank = comm.Get_rank()
        data = None
        if comm.Get_size() < 2:
            return "needs 2 ranks"
        if rank == 0:
            data = {'a': 7, 'b': 3.14}
            req = comm.isend(data, dest=1, tag=11)
            req.wait()
        elif rank == 1:
            req = comm.irecv(source=0, tag=11)
            data = req.wait()
        return data

    def p2p_numpy(c):
        comm = c.comm
        rank = comm.Get_rank()
        if comm.Get_size() < 2:
            return "needs 2 ranks"
        out = []
        # passing MPI datatypes explicitly
        if rank == 0:
            data = np.arange(1000, dtype='i')
            comm.Send([data, MPI.INT], dest=1, tag=77)
            out.append(data)
        elif rank == 1:
            data = np.empty(1000, dtype='i')
            comm.Recv([data, MPI.INT], source=0, tag=77)
            out.append(data)
        # automatic MPI datatype discovery
        if rank == 0:
            data = np.arange(100, dtype=np.float64)
            comm.Send(data, dest=1, tag=13)
            out.append(data)
        elif rank == 1:
            data = np.empty(100, dtype=np.float64)
            comm.Recv(data, source=0, tag=13)
            out.append(data)
        return out

    def bcast_dict(c):
        comm = c.comm
        rank = comm.Get_rank()
        if rank == 0:
            data = {'key1': [7, 2.72, 2 + 3j],
                    'key2': ('abc', 'xyz')}
        else:
            data = None
        data = comm.bcast(data, root=0)
        return data

    def scatter_objects(c):
        comm = c.comm
        size = comm.Get_size()
        rank = comm.Get_rank()
        if rank == 0:
            data = [(i + 1)**2 for i in range(size)]
        else:
            data = None
        data = comm.scatter(data, root=0)
        assert data == (rank + 1)**2
        return data

    def gather_objects(c):
        comm = c.comm
        size = comm.Get_size()
        rank = comm.Get_rank()
        data = (rank + 1)**2
        data = comm.gather(data, root=0)
        if rank == 0:
            for i in range(size):
                assert data[i] == (i + 1)**2
        else:
            assert data is None
        return data

    def bcast_numpy(c):
        comm = c.comm
        rank = comm.Get_rank()
        if rank == 0:
            data = np.arange(100, dtype='i')
        else:
            data = np.empty(100, dtype='i')
        comm.Bcast(data, root=0)
        for i in range(100):
            assert data[i] == i
        return data

    def scatter_numpy(c):
        comm = c.comm
        size = comm.Get_size()
        rank = comm.Get_rank()
        sendbuf = None
        if rank == 0:
            sendbuf = np.empty([size, 100], dtype='i')
            sendbuf.T[:, :] = range(size)
        recvbuf = np.empty(100, dtype='i')
        comm.Scatter(sendbuf, recvbuf, root=0)
        assert np.allclose(recvbuf, rank)
        return recvbuf

    def gather_numpy(c):
        comm = c.comm
        size = comm.Get_size()
        rank = comm.Get_rank()
        sendbuf = np.zeros(100, dtype='i') + rank
        recvbuf = None
        if rank == 0:
            recvbuf = np.empty([size, 100], dtype='i')
        comm.Gather(sendbuf, recvbuf, root=0)
        if rank == 0:
            for i in range(size):
                assert np.allclose(recvbuf[i, :], i)
        return recvbuf

    def matvec(c):
        comm = c.comm

        def matvec(comm, A, x):
            m = A.shape[0]  # local rows
            p = comm.Get_size()
            xg = np.zeros(m * p, dtype='d')
            comm.Allgather([x, MPI.DOUBLE],
                           [xg, MPI.DOUBLE])
            y = np.dot(A, xg)
            return y
        p, m, rank = comm.Get_size(), 3, comm.Get_rank()
        A = np.arange(m * m * p, dtype='d').reshape(m, m * p) + rank
        x = np.arange(m, dtype='d') + rank * m
        return matvec(comm, A, x)

    def allreduce_numpy(c):  # the GPU example, on host arrays
        comm = c.comm
        size = comm.Get_size()
        sendbuf = np.arange(10, dtype='i')
        recvbuf = np.empty_like(sendbuf)
        comm.Allreduce(sendbuf, recvbuf)
        assert np.allclose(recvbuf, sendbuf * size)
        return recvbuf

    def compute_pi(c):  # the spawn example's worker, on an intracomm
        comm = c.comm
        size = comm.Get_size()
        rank = comm.Get_rank()
        N = np.array(100 if rank == 0 else 0, dtype='i')
        comm.Bcast([N, MPI.INT], root=0)
        h = 1.0 / N
        s = 0.0
        for i in range(rank, N, size):
            x = h * (i + 0.5)
            s += 4.0 / (1.0 + x**2)
        PI = np.array(s * h, dtype='d')
        total = np.array(0.0, 'd') if rank == 0 else None
        comm.Reduce([PI, MPI.DOUBLE], None if rank else [total, MPI.DOUBLE],
                    op=MPI.SUM, root=0)
        return N, total

    return {
        "p2p Python objects": p2p_objects,
        "p2p Python objects, nonblocking": p2p_nonblocking,
        "p2p NumPy arrays": p2p_numpy,
        "bcast a dict": bcast_dict,
        "scatter Python objects": scatter_objects,
        "gather Python objects": gather_objects,
        "Bcast a NumPy array": bcast_numpy,
        "Scatter NumPy arrays": scatter_numpy,
        "Gather NumPy arrays": gather_numpy,
        "parallel matrix-vector product": matvec,
        "Allreduce NumPy arrays (default op)": allreduce_numpy,
        "compute pi (Bcast 0-d, Reduce to root)": compute_pi,
    }


TUTORIAL_COLLECTIVE = {
    "Bcast a NumPy array": "bcast", "Scatter NumPy arrays": "scatter",
    "Gather NumPy arrays": "gather",
    "parallel matrix-vector product": "allgather",
    "Allreduce NumPy arrays (default op)": "allreduce",
}


def test_tutorial(h):
    """Each example unchanged (no ``algorithm=``) on the wrapped
    communicator; the buffer ones also with every algorithm forced."""
    for label, case in tutorial_cases().items():
        h.check(f"tutorial: {label}", case)
        if label in TUTORIAL_COLLECTIVE:
            def forced(c, case=case, name=TUTORIAL_COLLECTIVE[label]):
                return case(_Forcing(c, name))
            h.check(f"tutorial: {label} (algorithm forced)", forced,
                    TUTORIAL_COLLECTIVE[label], approx=True)
    h.finish()


class _Forcing:
    """A Call whose ``comm`` passes ``algorithm=`` to one collective."""

    def __init__(self, c, collective):
        self.comm = _ForcedComm(c.comm, collective, c.kw)
        self.rank, self.size = c.rank, c.size


class _ForcedComm:
    def __init__(self, comm, collective, kw):
        self._comm, self._collective, self._kw = comm, collective, kw

    def __getattr__(self, name):
        attr = getattr(self._comm, name)
        if name.lower() == self._collective and name[0].isupper():
            return lambda *a, **k: attr(*a, **k, **self._kw)
        return attr


# ------------------------------------------------ lowercase object methods


def test_lowercase_collectives(h):
    """mpi4py's pickle-based collectives, unchanged."""
    cases = {}
    for root in range(h.size):
        cases[f"bcast dict root={root}"] = lambda c, root=root: \
            c.comm.bcast({"root": root, "x": [1, 2.5, "s"]}
                         if c.rank == root else None, root=root)
        cases[f"gather root={root}"] = lambda c, root=root: \
            c.comm.gather((c.rank, str(c.rank) * 2), root=root)
        cases[f"scatter root={root}"] = lambda c, root=root: \
            c.comm.scatter([{"to": i} for i in range(c.size)]
                           if c.rank == root else None, root=root)
        cases[f"reduce SUM root={root}"] = lambda c, root=root: \
            c.comm.reduce(c.rank + 1, op=MPI.SUM, root=root)
        cases[f"reduce callable (str concat) root={root}"] = \
            lambda c, root=root: c.comm.reduce(str(c.rank),
                                               op=operator.add, root=root)
    cases.update({
        "bcast default root": lambda c: c.comm.bcast(
            "hello" if c.rank == 0 else None),
        "bcast numpy array": lambda c: c.comm.bcast(
            ids(0, 5) if c.rank == 0 else None, root=0),
        "gather numpy arrays": lambda c: c.comm.gather(ids(c.rank, 3)),
        "allgather": lambda c: c.comm.allgather({"rank": c.rank}),
        "allgather numpy": lambda c: c.comm.allgather(ids(c.rank, 2)),
        "alltoall": lambda c: c.comm.alltoall(
            [(c.rank, j) for j in range(c.size)]),
        "allreduce SUM": lambda c: c.comm.allreduce(c.rank + 1),
        "allreduce MAX": lambda c: c.comm.allreduce(c.rank, op=MPI.MAX),
        "allreduce MAXLOC": lambda c: c.comm.allreduce(
            (c.rank % 2, c.rank), op=MPI.MAXLOC),
        "allreduce numpy SUM": lambda c: c.comm.allreduce(ids(c.rank, 3)),
        "allreduce callable": lambda c: c.comm.allreduce(
            [c.rank], op=operator.add),
        "scan SUM": lambda c: c.comm.scan(c.rank + 1),
        "scan callable": lambda c: c.comm.scan(str(c.rank),
                                               op=operator.add),
        "exscan SUM": lambda c: c.comm.exscan(c.rank + 1),
        "barrier": lambda c: c.comm.barrier(),
    })
    for label, case in cases.items():
        h.check(label, case)
    h.finish()


def test_point_to_point(h):
    """mpi4py's point-to-point calls, objects and buffers, on a ring."""
    def ring(c):
        return (c.rank + 1) % c.size, (c.rank - 1) % c.size

    def status_of(st):
        return (st.Get_source(), st.Get_tag(), st.Get_error(),
                st.Get_count(MPI.BYTE))

    def send_recv(c):
        dest, source = ring(c)
        req = c.comm.isend({"from": c.rank}, dest=dest, tag=5)
        got = c.comm.recv(source=source, tag=5)
        req.wait()
        return got

    def blocking_send(c):  # even ranks send first; small messages
        dest, source = ring(c)
        if c.size == 1:
            return "needs 2 ranks"
        if c.rank % 2 == 0:
            c.comm.send([c.rank] * 3, dest=dest, tag=1)
            got = c.comm.recv(source=source, tag=1)
        else:
            got = c.comm.recv(source=source, tag=1)
            c.comm.send([c.rank] * 3, dest=dest, tag=1)
        return got

    def isend_irecv(c):
        dest, source = ring(c)
        r = c.comm.irecv(source=source, tag=3)
        s = c.comm.isend(("x", c.rank), dest=dest, tag=3)
        s.wait()
        return r.wait(), isinstance(r, MPI.Request)

    def recv_status(c):
        dest, _ = ring(c)
        req = c.comm.isend("payload", dest=dest, tag=9)
        st = MPI.Status()
        got = c.comm.recv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st)
        req.wait()
        return got, st.Get_source(), st.Get_tag()

    def sendrecv(c):
        dest, source = ring(c)
        return c.comm.sendrecv(("sr", c.rank), dest=dest, sendtag=4,
                               source=source, recvtag=4)

    def ssend_issend(c):
        dest, source = ring(c)
        req = c.comm.issend(c.rank, dest=dest, tag=6)
        got = c.comm.recv(source=source, tag=6)
        req.wait()
        return got

    def probe(c):
        dest, source = ring(c)
        req = c.comm.isend("probed", dest=dest, tag=8)
        st = MPI.Status()
        found = c.comm.probe(source=source, tag=8, status=st)
        got = c.comm.recv(source=source, tag=8)
        req.wait()
        return found, st.Get_source(), st.Get_tag(), got

    def iprobe_mprobe(c):
        dest, source = ring(c)
        req = c.comm.isend([1, 2, 3], dest=dest, tag=12)
        msg = c.comm.mprobe(source=source, tag=12)
        got = msg.recv()
        req.wait()
        c.comm.Barrier()  # mpi4py's own on both sides
        nothing = c.comm.iprobe(source=source, tag=12)
        return got, nothing

    def improbe(c):
        dest, source = ring(c)
        req = c.comm.isend("m", dest=dest, tag=13)
        msg = None
        while msg is None:
            msg = c.comm.improbe(source=source, tag=13)
        got = msg.recv()
        req.wait()
        return got

    def bsend(c):
        dest, source = ring(c)
        buf = bytearray(1 << 16)
        MPI.Attach_buffer(buf)
        try:
            c.comm.bsend(("b", c.rank), dest=dest, tag=14)
            got = c.comm.recv(source=source, tag=14)
            req = c.comm.ibsend(("ib", c.rank), dest=dest, tag=15)
            got2 = c.comm.recv(source=source, tag=15)
            req.wait()
        finally:
            MPI.Detach_buffer()
        return got, got2

    def Send_Recv_status(c):
        dest, _ = ring(c)
        s, r = ids(c.rank, 5), full(8)
        req = MPI.Comm.Isend(c.comm, s, dest, 20)  # mpi4py's own
        st = MPI.Status()
        c.comm.Recv(r, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st)
        req.Wait()
        return r, status_of(st), st.Get_count(MPI.INT), st.Get_elements(
            MPI.INT)

    def Send_forms(c):
        dest, source = ring(c)
        out = []
        for i, f in enumerate(FORMS):
            _, sspec = buffer(f, 3, 1, "i", ids(c.rank, 3))
            r, rspec = buffer(f, 3, 1, "i")
            req = c.comm.Irecv(rspec, source, 30 + i)
            if c.rank % 2 == 0:
                c.comm.Send(sspec, dest, 30 + i)
            else:
                c.comm.Ssend(sspec, dest, 30 + i)
            req.Wait()
            out.append(r)
        return out

    def Isend_Irecv_Waitall(c):
        dest, source = ring(c)
        s, r = ids(c.rank, 4), full(4)
        reqs = [c.comm.Irecv([r, MPI.INT], source, 21),
                c.comm.Isend([s, MPI.INT], dest, 21)]
        statuses = [MPI.Status(), MPI.Status()]
        MPI.Request.Waitall(reqs, statuses)
        return r, status_of(statuses[0]), [isinstance(q, MPI.Request)
                                           for q in reqs]

    def Issend_Testall(c):
        dest, source = ring(c)
        s, r = ids(c.rank, 4), full(4)
        reqs = [c.comm.Irecv(r, source, 22), c.comm.Issend(s, dest, 22)]
        while not MPI.Request.Testall(reqs):
            pass
        return r

    def Sendrecv(c):
        dest, source = ring(c)
        s, r = ids(c.rank, 4), full(4)
        st = MPI.Status()
        c.comm.Sendrecv(s, dest, 23, r, source, 23, st)
        return r, status_of(st)

    def Sendrecv_replace(c):
        dest, source = ring(c)
        b = ids(c.rank, 4)
        c.comm.Sendrecv_replace([b, MPI.INT], dest, 24, source, 24)
        return b

    def Sendrecv_proc_null(c):
        s, r = ids(c.rank, 4), full(4)
        st = MPI.Status()
        c.comm.Sendrecv(s, MPI.PROC_NULL, 0, r, MPI.PROC_NULL, 0, st)
        c.comm.Send(s, MPI.PROC_NULL)
        c.comm.Recv(r, MPI.PROC_NULL)
        return r, st.Get_source(), st.Get_tag()

    def Probe_Recv(c):
        dest, source = ring(c)
        s = ids(c.rank, 6)
        req = c.comm.Isend(s, dest, 25)
        st = MPI.Status()
        c.comm.Probe(source, 25, st)
        r = full(st.Get_count(MPI.INT))
        c.comm.Recv(r, source, 25)
        req.Wait()
        return r, status_of(st)

    def persistent(c):
        dest, source = ring(c)
        s, r = ids(c.rank, 4), full(4)
        reqs = [c.comm.Recv_init(r, source, 26),
                c.comm.Send_init(s, dest, 26)]
        out = []
        for k in range(2):
            s[:] += k
            MPI.Prequest.Startall(reqs)
            MPI.Request.Waitall(reqs)
            out.append(r.copy())
        for q in reqs:
            q.Free()
        return out

    def Rsend(c):
        dest, source = ring(c)
        s, r = ids(c.rank, 4), full(4)
        req = c.comm.Irecv(r, source, 27)
        MPI.Comm.Barrier(c.comm)
        c.comm.Rsend(s, dest, 27)
        req.Wait()
        return r

    def Send_derived(c):
        dest, source = ring(c)
        t = MPI.Datatype.Create_struct([1, 1], [0, 8],
                                       [MPI.INT, MPI.DOUBLE]).Commit()
        try:
            s = ids(c.rank, 8)
            r = full(8)
            req = c.comm.Irecv([r, 2, t], source, 28)
            c.comm.Send([s, 2, t], dest, 28)
            req.Wait()
            return r
        finally:
            t.Free()

    def Send_dlpack(c):
        dest, source = ring(c)
        s, r = DLPackOnly(ids(c.rank, 4)), DLPackOnly(full(4))
        req = c.comm.Irecv(r, source, 29)
        c.comm.Send(s, dest, 29)
        req.Wait()
        return r.array

    def Recv_readonly(c):  # every rank (mpi4py raises before posting)
        req = c.comm.Irecv(readonly(full(4)), c.rank, 98)
        req.Cancel()  # reached only where the buffer was accepted
        req.Wait()
        return "accepted"

    def Send_noncontiguous(c):  # every rank, to itself
        req = c.comm.Isend(ids(c.rank, 8)[::2], c.rank, 97)
        MPI.Comm.Recv(c.comm, full(4), c.rank, 97)  # where accepted
        req.Wait()
        return "accepted"

    def proc_null_unparsed(c):  # mpi4py does not look at the buffer
        c.comm.Recv(readonly(full(4)), MPI.PROC_NULL)
        c.comm.Send(ids(c.rank, 8)[::2], MPI.PROC_NULL)
        c.comm.Send("not a buffer", MPI.PROC_NULL)
        return "accepted"

    cases = {
        "isend/recv objects": send_recv, "send/recv objects": blocking_send,
        "isend/irecv + wait": isend_irecv,
        "recv ANY_SOURCE with status": recv_status,
        "sendrecv objects": sendrecv, "issend/recv": ssend_issend,
        "probe with status": probe, "mprobe/iprobe": iprobe_mprobe,
        "improbe": improbe, "bsend/ibsend with attached buffer": bsend,
        "Recv with status": Send_Recv_status,
        "Send/Ssend/Irecv every buffer form": Send_forms,
        "Isend/Irecv + Request.Waitall(statuses)": Isend_Irecv_Waitall,
        "Issend/Irecv + Request.Testall": Issend_Testall,
        "Sendrecv with status": Sendrecv,
        "Sendrecv_replace": Sendrecv_replace,
        "Sendrecv/Send/Recv PROC_NULL": Sendrecv_proc_null,
        "Probe then Recv": Probe_Recv,
        "Send_init/Recv_init persistent": persistent,
        "Rsend": Rsend,
        "Send/Irecv struct datatype": Send_derived,
        "Send/Irecv DLPack-only buffers": Send_dlpack,
        "Irecv read-only buffer (rejected)": Recv_readonly,
        "Isend non-contiguous buffer (rejected)": Send_noncontiguous,
        "Send/Recv PROC_NULL: buffer not parsed": proc_null_unparsed,
    }
    for label, case in cases.items():
        h.check(label, case)
    h.finish()


def test_messages_cross_faces(h):
    """Messages sent through the wrapped communicator are received by
    mpi4py code holding the raw one, and the other way round."""
    if SELFTEST:
        pytest.skip("raw vs raw")
    raw, wrapped = h.raw, h.wrapped
    rank, size = raw.Get_rank(), raw.Get_size()
    dest, source = (rank + 1) % size, (rank - 1) % size
    req = wrapped.isend(("w", rank), dest=dest, tag=40)
    got = raw.recv(source=source, tag=40)
    req.wait()
    s, r = ids(rank, 3), full(3)
    req = raw.Isend(s, dest, 41)
    wrapped.Recv(r, source, 41)
    req.Wait()
    problems = []
    if got != ("w", source):
        problems.append(f"wrapped isend -> raw recv gave {got!r}")
    if not np.array_equal(r, ids(source, 3)):
        problems.append(f"raw Isend -> wrapped Recv gave {r}")
    h.problems += [("messages across faces", "-", p) for p in problems]
    h.finish()


# ------------------------------------------------ the communicator itself


#: lowercase names mpicoll overrides on purpose (not behaviour changes)
DOCUMENTED_OVERRIDES = {
    "free": "also releases mpicoll's private duplicate (mpicoll/api/comm.py)",
}
#: uppercase non-collective names mpicoll overrides (mpicoll/api/comm.py: the
#: buffer point-to-point calls, for device buffers; Free)
P2P_OVERRIDES = {"Send", "Recv", "Isend", "Irecv", "Sendrecv",
                 "Sendrecv_replace", "Ssend", "Bsend", "Rsend", "Issend",
                 "Ibsend", "Irsend", "Send_init", "Recv_init", "Ssend_init",
                 "Bsend_init", "Rsend_init", "Free"}


def _public(cls):
    return [n for n in dir(cls) if not n.startswith("_")]


def _same(ours, theirs, name) -> bool:
    """``name`` on class ``ours`` resolves to the very attribute (function,
    classmethod, property) it resolves to on mpi4py's class ``theirs``."""
    try:
        return inspect.getattr_static(ours, name) is \
            inspect.getattr_static(theirs, name)
    except AttributeError:
        return False


def _owner(cls, name) -> str:
    for k in cls.__mro__:
        if name in vars(k):
            return f"{k.__module__}.{k.__qualname__}"
    return "nobody"


@pytest.mark.skipif(SELFTEST, reason="checks mpicoll's classes")
def test_lowercase_methods_are_mpi4pys(h):
    """Every lowercase method and property of mpi4py's communicator
    classes is mpi4py's own object on mpicoll's classes."""
    world = MPI.COMM_WORLD
    cart = world.Create_cart([world.Get_size()])
    try:
        pairs = [(type(mpicoll.Comm(world)), MPI.Intracomm),
                 (type(mpicoll.Comm(cart)), MPI.Cartcomm)]
        wrong = []
        for ours, theirs in pairs:
            for name in _public(theirs):
                if not name[0].islower() or name in DOCUMENTED_OVERRIDES:
                    continue
                if not _same(ours, theirs, name):
                    wrong.append(f"{ours.__name__}.{name} is "
                                 f"{_owner(ours, name)}'s, not mpi4py's "
                                 f"MPI.{theirs.__name__}.{name}")
        h.problems += [("lowercase methods", "-", w) for w in wrong]
    finally:
        cart.Free()
    h.finish()


@pytest.mark.skipif(SELFTEST, reason="checks mpicoll's classes")
def test_other_methods_are_mpi4pys(h):
    """Uppercase methods that are neither collectives (which take
    ``algorithm=``) nor mpicoll's documented point-to-point overrides are
    mpi4py's own (Get_rank, Split, Dup, Create_cart, Get_coords, ...)."""
    allowed = set(COLLECTIVE_METHODS) | P2P_OVERRIDES
    allowed |= {"I" + n[0].lower() + n[1:] for n in COLLECTIVE_METHODS}
    allowed |= {n + "_init" for n in COLLECTIVE_METHODS}  # persistent
    world = MPI.COMM_WORLD
    cart = world.Create_cart([world.Get_size()])
    try:
        wrong = []
        for ours, theirs in ((type(mpicoll.Comm(world)), MPI.Intracomm),
                             (type(mpicoll.Comm(cart)), MPI.Cartcomm)):
            for name in _public(theirs):
                if name[0].islower() or name in allowed:
                    continue
                if not _same(ours, theirs, name):
                    wrong.append(f"{ours.__name__}.{name} "
                                 f"({_owner(ours, name)})")
        h.problems += [("other methods", "-", f"overridden: {w}")
                       for w in wrong]
    finally:
        cart.Free()
    h.finish()


def test_communicator_identity(h):
    world = MPI.COMM_WORLD

    def facts(c):
        comm = c.comm
        return {
            "isinstance Intracomm": isinstance(comm, MPI.Intracomm),
            "isinstance Comm": isinstance(comm, MPI.Comm),
            "== itself": comm == comm,
            "rank": (comm.rank, comm.Get_rank()),
            "size": (comm.size, comm.Get_size()),
            "is_inter/is_intra/is_topo": (comm.is_inter, comm.is_intra,
                                          comm.is_topo),
            "Is_inter/Is_intra": (comm.Is_inter(), comm.Is_intra()),
            "topology": comm.Get_topology(),
            "bool": bool(comm),
            "group": MPI.Group.Compare(comm.Get_group(),
                                       world.Get_group()),
            "Compare world": MPI.Comm.Compare(comm, world),
            "TAG_UB": comm.Get_attr(MPI.TAG_UB),
            "errhandler": comm.Get_errhandler() == MPI.ERRORS_RETURN,
        }
    h.check("facts about the communicator", facts)

    # the wrapped communicator is the caller's handle
    w = mpicoll.Comm(world)
    d = h.raw
    problems = []
    if not isinstance(w, MPI.Intracomm):
        problems.append("mpicoll.Comm(world) is not an MPI.Intracomm")
    if not w == world:
        problems.append("mpicoll.Comm(world) != world")
    if w != world:
        problems.append("mpicoll.Comm(world) != world (__ne__)")
    if MPI.Comm.Compare(w, world) != MPI.IDENT:
        problems.append("Compare(mpicoll.Comm(world), world) != IDENT")
    if w.py2f() != world.py2f() or w.handle != world.handle:
        problems.append("handle/py2f differ")
    if MPI.Comm.f2py(w.py2f()) != w:
        problems.append("Comm.f2py(w.py2f()) != w")
    if not SELFTEST and mpicoll.Comm(d) != d:
        problems.append("mpicoll.Comm(dup) != dup")
    if not SELFTEST:  # a name set through one face shows through the other
        h.wrapped.Set_name("compat-dup")
        if d.Get_name() != "compat-dup":
            problems.append("Set_name on the wrapped not seen on the raw")
    every = h.ctl.allgather(problems)
    if any(every):
        h.problems.append(("communicator identity", "-",
                           "; ".join(p for ps in every for p in ps)))
    h.finish()


def test_derived_communicators(h):
    """Dup, Clone, Idup, Split, Split_type, Create(group), Create_group,
    Create_cart made from the wrapped communicator work as mpi4py's."""
    def use(comm):
        """What a new communicator is like, and a collective on it."""
        x = np.array([comm.Get_rank() + 1], "i")
        y = full(1)
        comm.Allreduce(x, y, MPI.SUM)
        return (isinstance(comm, MPI.Intracomm), comm.Get_size(),
                comm.Get_rank(), comm.allreduce(comm.Get_rank()), y,
                MPI.Comm.Compare(comm, MPI.COMM_WORLD))

    def made(make):
        def case(c):
            new = make(c.comm)
            if new == MPI.COMM_NULL:
                return "COMM_NULL"
            try:
                return use(new)
            finally:
                new.Free()
        return case

    def idup(comm):
        new, req = comm.Idup()
        req.Wait()
        return new

    def cart_facts(c):
        cart = c.comm.Create_cart([c.size], periods=[True], reorder=False)
        try:
            sub = cart.Sub([False])
            out = (isinstance(cart, MPI.Cartcomm), cart.Get_coords(c.rank),
                   cart.Shift(0, 1), cart.Get_dim(), cart.Get_topo(),
                   sub.Get_size(), use(cart))
            sub.Free()
            return out
        finally:
            cart.Free()

    h.check("Dup()", made(lambda comm: comm.Dup()))
    h.check("Clone()", made(lambda comm: comm.Clone()))
    h.check("Idup()", made(idup))
    h.check("Split(rank % 2)", made(
        lambda comm: comm.Split(comm.Get_rank() % 2, -comm.Get_rank())))
    h.check("Split(UNDEFINED on rank 0)", made(
        lambda comm: comm.Split(MPI.UNDEFINED if comm.Get_rank() == 0
                                else 1)))
    h.check("Split_type(COMM_TYPE_SHARED)", made(
        lambda comm: comm.Split_type(MPI.COMM_TYPE_SHARED)))
    h.check("Create(group)", made(
        lambda comm: comm.Create(comm.Get_group().Incl(
            list(range(0, comm.Get_size(), 2))))))
    h.check("Create_group(group)", made(
        lambda comm: comm.Create_group(comm.Get_group().Excl([0]))
        if comm.Get_rank() != 0 else MPI.COMM_NULL))
    h.check("Create_cart facts", cart_facts)
    h.finish()


def test_cartesian_wrapped(h):
    """``mpicoll.Comm(world.Create_cart([size]))`` keeps the Cartesian
    methods, and its collectives take ``algorithm=``."""
    raw = MPI.COMM_WORLD.Create_cart([h.size], periods=[True])
    wrapped = raw if SELFTEST else mpicoll.Comm(raw)
    try:
        def facts(c):
            comm = c.comm
            sub = comm.Sub([False])
            try:
                return (isinstance(comm, MPI.Cartcomm),
                        isinstance(comm, MPI.Intracomm),
                        comm.Get_coords(c.rank), comm.Shift(0, 1),
                        comm.Shift(0, -2), comm.Get_cart_rank([0]),
                        comm.Get_topo(), comm.dims, comm.periods,
                        comm.topology == MPI.CART, sub.Get_size(),
                        sub.Get_rank())
            finally:
                sub.Free()
        h.check("Cartcomm facts", facts, comms=(raw, wrapped))

        def shift_exchange(c):
            src, dest = c.comm.Shift(0, 1)
            s, r = ids(c.rank, 3), full(3)
            c.comm.Sendrecv(s, dest, 0, r, src, 0)
            return r
        h.check("Cartcomm Shift + Sendrecv", shift_exchange,
                comms=(raw, wrapped))

        def neighbor(c):
            s, r = ids(c.rank, 2), full(4)
            c.comm.Neighbor_allgather(s, r)
            return r
        h.check("Cartcomm Neighbor_allgather", neighbor,
                comms=(raw, wrapped))

        h.check("Cartcomm Allreduce", allreduce_case(PLAIN, PLAIN, 5),
                "allreduce", comms=(raw, wrapped), modes=(False, True))
        h.check("Cartcomm Bcast", bcast_case(PLAIN, 5, h.size - 1), "bcast",
                comms=(raw, wrapped))
        h.check("Cartcomm Allgatherv",
                allgatherv_case(PLAIN, VFORMS[0]), "allgatherv",
                comms=(raw, wrapped))
    finally:
        if SELFTEST:
            raw.Free()
        else:
            wrapped.Free()
    h.finish()


# (last: a documented difference, docs/compatibility.md "What still
# differs"; the test conftest stops the run at the first failed test)


@pytest.mark.xfail(strict=True, reason="nonblocking collectives return a "
                   "mpicoll.Work, not an MPI.Request (docs/compatibility.md)")
def test_nonblocking_request_interop(h):
    """Beyond ``Wait``/``wait``: what mpi4py programs also do with the
    request of a nonblocking collective (``Test()`` until done,
    ``MPI.Request.Waitall/Waitany/Testall``, ``Wait(status)``,
    ``isinstance(req, MPI.Request)``)."""
    finish_all = _finish_all

    def test_loop(c):
        s, r = ids(c.rank, 3), full(3)
        req = c.comm.Iallreduce(s, r, MPI.SUM, **c.kw)
        try:
            while not req.Test():
                pass
        except Exception:
            finish_all([req])
            raise
        return r
    h.check("Iallreduce(...): while not req.Test()", test_loop, "allreduce")

    def waitall(c):
        s, r = ids(c.rank, 3), full(3)
        b = ids(0, 4) if c.rank == 0 else full(4)
        reqs = [c.comm.Iallreduce(s, r, MPI.SUM, **c.kw),
                c.comm.Ibcast(b, 0)]
        try:
            MPI.Request.Waitall(reqs)
        except Exception:
            finish_all(reqs)
            raise
        return r, b
    h.check("MPI.Request.Waitall([Iallreduce, Ibcast])", waitall,
            "allreduce")

    def waitany(c):
        s, r = ids(c.rank, 3), full(3)
        reqs = [c.comm.Iallreduce(s, r, MPI.SUM, **c.kw)]
        try:
            index = MPI.Request.Waitany(reqs)
        except Exception:
            finish_all(reqs)
            raise
        return r, index
    h.check("MPI.Request.Waitany([Iallreduce])", waitany, "allreduce")

    def testall(c):
        s, r = ids(c.rank, 3), full(3)
        reqs = [c.comm.Iallreduce(s, r, MPI.SUM, **c.kw)]
        try:
            while not MPI.Request.Testall(reqs):
                pass
        except Exception:
            finish_all(reqs)
            raise
        return r
    h.check("MPI.Request.Testall([Iallreduce])", testall, "allreduce")

    def wait_status(c):
        s, r = ids(c.rank, 3), full(3)
        req = c.comm.Iallreduce(s, r, MPI.SUM, **c.kw)
        status = MPI.Status()
        try:
            req.Wait(status)
        except Exception:
            finish_all([req])
            raise
        return r, status.Get_error()
    h.check("Iallreduce(...).Wait(status)", wait_status, "allreduce")

    def is_request(c):
        req = c.comm.Ibarrier(**c.kw)
        req.Wait()
        return isinstance(req, MPI.Request)
    h.check("isinstance(Ibarrier(), MPI.Request)", is_request, "barrier")
    h.finish()
