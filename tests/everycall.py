"""One call of every collective on each face, on small new buffers: what
the leak and security tests run (they care that every code path runs, not
about the values, which test_collectives_mpi checks)."""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

BLOCK = 3  # elements per rank's block: small messages


def counts(p: int) -> list[int]:
    """Uneven per-rank block sizes for the v-collectives."""
    return [BLOCK + q % 2 for q in range(p)]


def pairwise(p: int, r: int) -> list[int]:
    """Alltoallv's counts on rank ``r``: what it sends to rank ``q`` is
    what ``q`` expects from it (symmetric in ``r`` and ``q``)."""
    return [BLOCK + (r + q) % 2 for q in range(p)]


def nonblocking(name: str) -> str:
    """mpi4py's nonblocking twin of a collective's method name."""
    return "I" + name[0].lower() + name[1:]


def mpi4py_args(c: str, p: int, r: int, variant: int = 0):
    """``(method, args)`` of one mpi4py-face call of collective ``c`` on
    new buffers; an odd ``variant`` takes the in-place form (allreduce,
    allgather) or ``recvcounts=None`` (reduce_scatter: the counts agreed
    in the call); the root is ``variant % p``."""
    n, cs = BLOCK, counts(p)
    root = variant % p
    if c == "allreduce":
        if variant % 2:
            return "Allreduce", (MPI.IN_PLACE, np.ones(n), MPI.SUM)
        return "Allreduce", (np.ones(n), np.empty(n), MPI.SUM)
    if c == "reduce":
        return "Reduce", (np.ones(n), np.empty(n), MPI.MAX, root)
    if c == "bcast":
        return "Bcast", (np.ones(n), root)
    if c == "allgather":
        if variant % 2:
            return "Allgather", (MPI.IN_PLACE, np.ones(n * p))
        return "Allgather", (np.ones(n), np.empty(n * p))
    if c == "reduce_scatter_block":
        return "Reduce_scatter_block", (np.ones(n * p), np.empty(n), MPI.SUM)
    if c == "reduce_scatter":
        given = None if variant % 2 else cs
        return "Reduce_scatter", (np.ones(sum(cs)), np.empty(cs[r]), given,
                                  MPI.SUM)
    if c == "barrier":
        return "Barrier", ()
    if c == "gather":
        return "Gather", (np.ones(n), np.empty(n * p), root)
    if c == "scatter":
        return "Scatter", (np.ones(n * p), np.empty(n), root)
    if c == "allgatherv":
        return "Allgatherv", (np.ones(cs[r]), [np.empty(sum(cs)), cs])
    if c == "alltoall":
        return "Alltoall", (np.ones(n * p), np.empty(n * p))
    if c == "scan":
        return "Scan", (np.ones(n, np.int64), np.empty(n, np.int64), MPI.SUM)
    if c == "exscan":
        return "Exscan", (np.ones(n, np.int64), np.empty(n, np.int64),
                          MPI.SUM)
    if c == "gatherv":
        return "Gatherv", (np.ones(cs[r]), [np.empty(sum(cs)), cs], root)
    if c == "scatterv":
        return "Scatterv", ([np.ones(sum(cs)), cs], np.empty(cs[r]), root)
    if c == "alltoallv":
        sc = pairwise(p, r)
        return "Alltoallv", ([np.ones(sum(sc)), sc], [np.empty(sum(sc)), sc])
    raise AssertionError(f"no call for {c}")


def torch_call(pg, c: str, alg: str, async_op: bool, variant: int = 0
               ) -> bool:
    """One ProcessGroup call of collective ``c`` on new tensors, waited on
    when ``async_op``; False where the torch face has no call for ``c``
    (gatherv, scatterv). allgatherv is ``all_gather`` of uneven sizes;
    alltoallv is ``all_to_all_single`` with split sizes (even
    ``variant``) or ``all_to_all`` of lists of uneven tensors (odd)."""
    p, r, n = pg.size(), pg.rank(), BLOCK
    root = variant % p
    kw = {"algorithm": alg, "async_op": async_op}
    if c == "allreduce":
        work = pg.all_reduce(np.ones(n), "sum", **kw)
    elif c == "reduce":
        work = pg.reduce(np.ones(n), root, "max", **kw)
    elif c == "bcast":
        work = pg.broadcast(np.ones(n), root, **kw)
    elif c == "allgather":
        work = pg.all_gather_into_tensor(np.empty(n * p), np.ones(n), **kw)
    elif c == "reduce_scatter_block":
        work = pg.reduce_scatter_tensor(np.empty(n), np.ones(n * p), **kw)
    elif c == "reduce_scatter":
        cs = counts(p)
        work = pg.reduce_scatter(np.empty(cs[r]),
                                 [np.ones(k) for k in cs], **kw)
    elif c == "barrier":
        work = pg.barrier(**kw)
    elif c == "gather":
        out = [np.empty(n) for _ in range(p)] if r == root else None
        work = pg.gather(np.ones(n), out, root, **kw)
    elif c == "scatter":
        parts = [np.ones(n) for _ in range(p)] if r == root else None
        work = pg.scatter(np.empty(n), parts, root, **kw)
    elif c == "allgatherv":
        cs = counts(p)
        work = pg.all_gather([np.empty(k) for k in cs], np.ones(cs[r]), **kw)
    elif c == "alltoall":
        work = pg.all_to_all_single(np.empty(n * p), np.ones(n * p), **kw)
    elif c in ("scan", "exscan"):
        work = getattr(pg, c)(np.ones(n), "sum", **kw)
    elif c == "alltoallv":
        sc = pairwise(p, r)
        if variant % 2:
            work = pg.all_to_all([np.empty(k) for k in sc],
                                 [np.ones(k) for k in sc], **kw)
        else:
            work = pg.all_to_all_single(np.empty(sum(sc)), np.ones(sum(sc)),
                                        sc, sc, **kw)
    else:
        return False
    if async_op:
        work.wait()
    return True
