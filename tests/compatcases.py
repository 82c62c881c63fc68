"""The cases the compatibility suite shares (tests/mpi/test_compat_*_mpi.py).

The promise they check: wrapping the communicator of a working mpi4py
program (``comm = mpicoll.Comm(MPI.COMM_WORLD)``) changes nothing but what
the caller asks for (``algorithm=`` on the buffer collectives). Each case
runs on a raw ``MPI.COMM_WORLD.Dup()`` and on ``mpicoll.Comm`` of it, with
``algorithm`` set to ``"auto"`` and to each name of
``mpicoll.algorithms(collective)``, and must give the same results (every
buffer the case allocated, send buffers included) or raise the same
exception type; ``tests/compat.py`` is the harness that compares them and
lists its switches (``COMPAT_SELFTEST``, ``COMPAT_STRICT``, ...). Run::

    MPIR_CVAR_ENABLE_HEAVY_YIELD=1 mpiexec -n 4 python -m mpi4py -m pytest \\
        -q --with-mpi -m mpi tests/mpi/test_compat_*_mpi.py

Here: the values buffers hold; the ways mpi4py lets a buffer argument be
written (:data:`FORMS`); a case builder for the fixed-count collectives
(:func:`fixed_case`), read from ``mpicoll.collectives.COLLECTIVES``
(method, root, reduction, which buffer holds every rank's block, what
in-place means); and the form checks each family's file runs over its
collectives (:func:`check_forms`). tests/compatvectors.py has the same for
the vector collectives.

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
  on some ranks only;
* the tuple-counts quirk (``compatvectors.TUPLE_QUIRK``) of a rooted
  vector collective (it raises at the root only).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Callable, NamedTuple

import numpy as np
from mpi4py import MPI

from compat import STRICT
from mpicoll.collectives import COLLECTIVES

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


def readonly(a):
    a = a.copy()
    a.flags.writeable = False
    return a


class DLPackOnly:
    """A DLPack exporter and nothing else (no buffer protocol)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, *args, **kwargs):
        return self.array.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


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


def nonroot_buffer(kind, n, dtype="i"):
    """What a non-root passes where mpi4py ignores the argument."""
    if kind == "None":
        return None
    if kind == "same":
        return full(n, dtype)
    if kind == "empty":
        return np.empty(0, dtype)
    raise ValueError(kind)


def root_only_side(name: str) -> str:
    """The buffer of rooted ``name`` that only the root reads or writes:
    "send" (scatter's, scatterv's) or "recv" (reduce's, the gathers')."""
    return "send" if COLLECTIVES[name].all_blocks == "send" else "recv"


# ------------------------------------------------- fixed-count collectives


def payload(name: str, rank: int, size: int, n: int) -> np.ndarray:
    """What ``rank`` sends in a call of ``name`` with ``n`` elements per
    block: small values for a reduction; values unique per rank and index
    otherwise, alltoall's unique per destination block too and scatter's
    (the root's blocks) telling the destination ranks apart."""
    row = COLLECTIVES[name]
    if row.reducing:
        return vals(rank, n * (size if row.all_blocks == "send" else 1))
    if name == "alltoall":
        return np.concatenate([ids(rank, n, k=j) for j in range(size)])
    if name == "scatter":
        return np.concatenate([ids(j, n) for j in range(size)])
    return ids(rank, n)


def fixed_case(name, fs, fr, n, root=None, inplace=False, nonroot="None"):
    """A call of fixed-count collective ``name`` (a ``COLLECTIVES`` row
    with "whole" or "block" counts): ``n`` elements per block, the send
    buffer written in form ``fs``, the receive buffer in ``fr`` (bcast's
    one buffer in ``fr``); the case returns every buffer it passed.

    ``root``: a rooted collective's root. ``inplace``: False, "IN_PLACE"
    or "None" (how it is spelled); the input then lies in the receive
    buffer (this rank's block of it where that holds every rank's), or,
    at scatter's root, stays in the send buffer. ``nonroot``: what a
    non-root passes for the buffer only the root uses
    (:func:`nonroot_buffer`). Reductions use ``MPI.SUM``; Exscan's output
    at rank 0 is undefined (not compared unless ``COMPAT_STRICT``).
    """
    row = COLLECTIVES[name]
    tail = ((MPI.SUM,) if row.reducing else ()) + \
        ((root,) if row.rooted else ())

    def case(c):
        sends = c.size if row.all_blocks in ("send", "both") else 1
        recvs = c.size if row.all_blocks in ("recv", "both") else 1
        x = payload(name, c.rank, c.size, n)
        if row.single_buffer:
            b, spec = buffer(fr, n, 1, data=x if c.rank == root else None)
            c(row.method, spec, *tail)
            return b
        if row.rooted and c.rank != root:
            if root_only_side(name) == "send":
                s = nonroot_buffer(nonroot, n * sends)
                r, rspec = buffer(fr, n, recvs)
                c(row.method, s, rspec, *tail)
            else:
                s, sspec = buffer(fs, n, sends, data=x)
                r = nonroot_buffer(nonroot, n * recvs)
                c(row.method, sspec, r, *tail)
            return s, r
        if inplace and row.inplace == "root_keeps":
            s, sspec = buffer(fs, n, sends, data=x)
            c(row.method, sspec, in_place(inplace), *tail)
            return (s,)
        if inplace:
            blocks = max(sends, recvs)
            r, rspec = buffer(fr, n, blocks)
            at = fr.lead + (c.rank * n if sends < blocks else 0)
            r[at:at + x.size] = x
            c(row.method, in_place(inplace), rspec, *tail)
            # a reduce-scatter defines this rank's block only (at the front)
            out = (r,) if row.all_blocks != "send" else \
                (r[:fr.lead + n], r[fr.lead + n * blocks:])
        else:
            s, sspec = buffer(fs, n, sends, data=x)
            r, rspec = buffer(fr, n, recvs)
            c(row.method, sspec, rspec, *tail)
            out = (s, r)
        if name == "exscan" and c.rank == 0 and not STRICT:
            out = (*out[:-1], "undefined at rank 0 (MPI)")
        return out
    return case


def rs_counts(size, k):
    return [(i + k) % 3 for i in range(size)]


def reduce_scatter_case(fs, fr, k, counts_arg="list", inplace=False):
    """Reduce_scatter with ``rs_counts(size, k)``, passed as
    ``counts_arg``: "list", "tuple", "ndarray" or "None"."""
    def case(c):
        counts = rs_counts(c.size, k)
        total, mine = sum(counts), counts[c.rank]
        arg = {"list": counts, "tuple": tuple(counts),
               "ndarray": np.array(counts), "None": None}[counts_arg]
        x = vals(c.rank, total)
        if inplace:
            r, rspec = buffer(fr, total, 1, data=x)
            c("Reduce_scatter", in_place(inplace), rspec, arg, MPI.SUM)
            return (r[:fr.lead + mine], r[fr.lead + total:])
        s, sspec = buffer(fs, total, 1, data=x)
        r, rspec = buffer(fr, mine, 1)
        c("Reduce_scatter", sspec, rspec, arg, MPI.SUM)
        return s, r
    return case


class FormPlan(NamedTuple):
    """What :func:`check_forms` runs for one fixed-count collective."""

    n: int  # elements per block (the forms on both sides also run n=0)
    large: tuple  # counts of plain-buffer calls, blocking and nonblocking
    inplace_forms: Sequence[Form] = FORMS  # forms of the in-place buffer
    large_inplace: bool = False  # the large calls in place too


def check_forms(h, name: str, plan: FormPlan) -> None:
    """Every buffer form of ``name``: each form pair (:func:`form_pairs`;
    bcast's one buffer in each form), every in-place spelling in each of
    ``plan.inplace_forms``; for a rooted collective, each thing a non-root
    may pass for a buffer only the root uses, and every root (in place
    too); then ``plan.large`` elements."""
    row = COLLECTIVES[name]
    root = h.size - 1 if row.rooted else None
    at = f" root={root}" if row.rooted else ""
    pairs = ((f, f) for f in FORMS) if row.single_buffer else form_pairs()
    for fs, fr in pairs:
        shown = fr.name if row.single_buffer else f"{fs.name} -> {fr.name}"
        for n in (0, plan.n) if fs is fr else (plan.n,):
            h.check(f"{row.method} {shown} n={n}{at}",
                    fixed_case(name, fs, fr, n, root), name,
                    modes=modes(fs, fr))
    for f in plan.inplace_forms if row.inplace else ():
        for how in INPLACE[1:]:
            if row.inplace == "root_keeps":
                shown, fs, fr = f"{f.name} -> {how}", f, PLAIN
            else:
                shown, fs, fr = f"{how} -> {f.name}", PLAIN, f
            h.check(f"{row.method} {shown} n={plan.n}{at}",
                    fixed_case(name, fs, fr, plan.n, root, how), name,
                    modes=modes(f))
    if row.rooted and not row.single_buffer:
        side = root_only_side(name)
        for nonroot in ("None", "same", "empty"):
            h.check(f"{row.method} buf n={plan.n}{at}, non-root {side}buf "
                    f"{nonroot}", fixed_case(name, PLAIN, PLAIN, plan.n,
                                             root, nonroot=nonroot),
                    name, modes=(False, True))
    if row.rooted:
        for r in range(h.size):
            h.check(f"{row.method} root={r}",
                    fixed_case(name, PLAIN, PLAIN, plan.n, r), name,
                    modes=(False, True))
            if row.inplace:
                h.check(f"{row.method} IN_PLACE root={r}",
                        fixed_case(name, PLAIN, PLAIN, plan.n, r,
                                   "IN_PLACE"), name, modes=(False, True))
    for n in plan.large:
        for how in INPLACE if plan.large_inplace else (False,):
            shown = f" inplace={how}" if plan.large_inplace else ""
            h.check(f"{row.method} buf n={n}{shown}"
                    f"{' root=0' if row.rooted else ''}",
                    fixed_case(name, PLAIN, PLAIN, n,
                               0 if row.rooted else None, how), name,
                    modes=(False, True))
    h.finish()
