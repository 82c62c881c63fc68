"""The vector collectives' share of the compatibility cases.

The forms mpi4py takes for a vector buffer argument (:data:`VFORMS`: counts
and displacements written every way, and the layouts each can express), a
case builder for Allgatherv, Gatherv, Scatterv and Alltoallv
(:func:`vector_case`) read from ``mpicoll.collectives.COLLECTIVES``, and the
form checks their families' files run (:func:`check_vector_forms`).
tests/compatcases.py has the fixed-count counterparts and says what the
suite compares.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Callable, NamedTuple

import numpy as np

from compatcases import (BY_NAME, INPLACE, PLAIN, buffer, full, ids,
                         in_place, mpitype, nonroot_buffer, root_only_side)
from mpicoll.collectives import COLLECTIVES


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
GENERAL = VFORMS[0]
# one form each of the general, contiguous and inferred layouts
VFORM_SAMPLE = [GENERAL, VFORM["[buf, counts]"], VFORM["buf"]]
# mpi4py reads a tuple in the counts place as (counts, displs): with every
# count equal to c, a size-2 tuple means count c, stride c (the contiguous
# layout) and any other size is a ValueError on every rank.
TUPLE_QUIRK = VForm("[buf, tuple(counts), TYPE]", "scalar",
                    lambda b, c, d, s, T, t: [b, tuple(c), T])
# forms of the fixed-count side of a vector collective (its other side)
FIXED_SIDE_FORMS = [BY_NAME["buf"], BY_NAME["[buf, TYPE]"],
              BY_NAME["[buf, count, TYPE]"],
              BY_NAME["[buf, count, displ, TYPE]"]]


def vmodes(vform) -> tuple:
    return (False, True) if vform.name in (
        "[buf, counts, displs, TYPE]", "buf") else (False,)


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
    """(array, argument) for a vector argument; ``data``: a function
    block index -> values to place there (None: FILL)."""
    displs, stride, total = layout_of(vform, counts)
    b = full(total, dtype)
    if data is not None:
        for i, (n, d) in enumerate(zip(counts, displs)):
            b[d:d + n] = data(i, n)
    return b, vform.spec(b, list(counts), displs, stride, mpitype(dtype),
                         np.dtype(dtype).char)


def vector_case(name, send, recv, root=None, k=1, inplace=False,
                nonroot="None"):
    """A call of vector collective ``name``: ``send``/``recv`` are a
    :class:`VForm` on the side holding every rank's block (both sides of
    alltoallv) and a :class:`Form` on the other; counts from
    :func:`layout_counts` of the vector side's layout. ``root``,
    ``inplace``, ``nonroot``: as :func:`fixed_case`."""
    row = COLLECTIVES[name]
    if row.all_blocks == "both":
        return alltoallv_case(send, recv, k, inplace)
    tail = (root,) if row.rooted else ()
    scatters = row.all_blocks == "send"
    layout = (send if scatters else recv).layout

    def case(c):
        counts = layout_counts(layout, c.size, k)
        n = counts[c.rank]
        if row.rooted and c.rank != root:
            if scatters:
                s = nonroot_buffer(nonroot, sum(counts))
                r, rspec = buffer(recv, n, 1)
                c(row.method, s, rspec, *tail)
            else:
                s, sspec = buffer(send, n, 1, data=ids(c.rank, n))
                r = nonroot_buffer(nonroot, sum(counts))
                c(row.method, sspec, r, *tail)
            return s, r
        if inplace and scatters:
            s, sspec = vbuffer(send, counts, data=lambda i, m: ids(i, m))
            c(row.method, sspec, in_place(inplace), *tail)
            return (s,)
        if inplace:
            r, rspec = vbuffer(recv, counts, data=lambda i, m: (
                ids(c.rank, m) if i == c.rank else full(m)))
            c(row.method, in_place(inplace), rspec, *tail)
            return (r,)
        if scatters:
            s, sspec = vbuffer(send, counts, data=lambda i, m: ids(i, m))
            r, rspec = buffer(recv, n, 1)
        else:
            s, sspec = buffer(send, n, 1, data=ids(c.rank, n))
            r, rspec = vbuffer(recv, counts)
        c(row.method, sspec, rspec, *tail)
        return s, r
    return case


def a2a_counts(layout, size, rank, k=1):
    """(send counts, recv counts) of ``rank`` for Alltoallv."""
    if layout in ("scalar", "inferred"):
        return [2 + k] * size, [2 + k] * size
    f = lambda i, j: (i + 2 * j) % 3 + k  # noqa: E731  (i sends to j)
    return ([f(rank, j) for j in range(size)],
            [f(j, rank) for j in range(size)])


def alltoallv_case(vs, vr, k=1, inplace=False):
    def case(c):
        if inplace:  # one set of counts for both ways: symmetric
            counts = [(c.rank + j) % 3 + k for j in range(c.size)] \
                if vr.layout not in ("scalar", "inferred") else \
                [2 + k] * c.size
            r, rspec = vbuffer(vr, counts,
                               data=lambda j, m: ids(c.rank, m, k=j))
            c("Alltoallv", in_place(inplace), rspec)
            return (r,)
        scounts, _ = a2a_counts(vs.layout, c.size, c.rank, k)
        _, rcounts = a2a_counts(vr.layout, c.size, c.rank, k)
        if vs.layout in ("scalar", "inferred") or \
                vr.layout in ("scalar", "inferred"):
            scounts = rcounts = [2 + k] * c.size
        s, sspec = vbuffer(vs, scounts,
                           data=lambda j, m: ids(c.rank, m, k=j))
        r, rspec = vbuffer(vr, rcounts)
        c("Alltoallv", sspec, rspec)
        return s, r
    return case


def check_vector_forms(h, name: str, inplace_forms: Sequence[VForm]) -> None:
    """Every vector form of ``name`` against a plain buffer (alltoallv:
    against itself), some counts zero for the general layout; each
    fixed-count form of the other side (alltoallv: each vector form of the
    receive side) against the general layout; every in-place spelling in
    each of ``inplace_forms``; for a rooted collective, what a non-root
    may pass for the buffer it does not use and every root (in place too);
    for the others, :data:`TUPLE_QUIRK`."""
    row = COLLECTIVES[name]
    root = h.size - 1 if row.rooted else None
    at = f" root={root}" if row.rooted else ""

    def sides(v, other=None):
        """(send, recv): ``v`` on the side holding every rank's blocks,
        ``other`` on the other side (by default a plain buffer; for
        alltoallv, whose both sides hold them, ``v`` again)."""
        if row.all_blocks == "both":
            return v, v if other is None else other
        other = PLAIN if other is None else other
        return (v, other) if row.all_blocks == "send" else (other, v)

    for v in VFORMS:
        for k in (0, 1) if v.layout == "general" else (1,):
            s, r = sides(v)
            h.check(f"{row.method} {s.name} -> {r.name} k={k}{at}",
                    vector_case(name, s, r, root, k), name, modes=vmodes(v))
    others = VFORMS[1:] if row.all_blocks == "both" else \
        FIXED_SIDE_FORMS[1:]
    for other in others:
        s, r = sides(GENERAL, other)
        h.check(f"{row.method} {s.name} -> {r.name}{at}",
                vector_case(name, s, r, root), name)
    for v in inplace_forms:
        for how in INPLACE[1:]:
            shown = f"{v.name} -> {how}" if row.inplace == "root_keeps" \
                else f"{how} -> {v.name}"
            h.check(f"{row.method} {shown}{at}",
                    vector_case(name, *sides(v), root, inplace=how), name,
                    modes=vmodes(v))
    if row.rooted:
        side = root_only_side(name)
        s, r = sides(GENERAL)
        for nonroot in ("None", "same", "empty"):
            h.check(f"{row.method} {s.name} -> {r.name}{at}, non-root "
                    f"{side}buf {nonroot}",
                    vector_case(name, s, r, root, nonroot=nonroot), name)
        for each in range(h.size):
            h.check(f"{row.method} root={each}",
                    vector_case(name, s, r, each), name, modes=(False, True))
            if row.inplace:
                h.check(f"{row.method} IN_PLACE root={each}",
                        vector_case(name, s, r, each, inplace="IN_PLACE"),
                        name, modes=(False, True))
    else:
        s, r = sides(TUPLE_QUIRK)
        h.check(f"{row.method} {s.name} -> {r.name}",
                vector_case(name, s, r), name)
    h.finish()
