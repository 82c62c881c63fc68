"""Tier 2: persistent collectives (``X_init``, ``ProcessGroup.prepare``):
every collective with every algorithm, started several times with new
input each time, against raw mpi4py's blocking call on the same input;
also with inputs read through mpicoll's scratch (derived datatypes,
blocks with gaps, a read-only root buffer)."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.engine import grequests
from mpicoll import errors

pytestmark = pytest.mark.mpi
ROUNDS = 3


def setup(comm, name: str):
    """``(method, args, inputs, outputs, skip_output)`` for one call of
    mpi4py's ``method``: ``inputs`` are refilled every round, ``outputs``
    compared (not on ranks where MPI leaves them undefined)."""
    p, r = comm.size, comm.rank
    n, root = 3, p - 1
    counts = [q % 3 + 1 for q in range(p)]
    empty, f = np.empty, np.float64

    def a(size):
        return empty(size, f)

    if name == "Allreduce":
        x, y = a(n), a(n)
        return name, (x, y, MPI.SUM), [x], [y]
    if name == "Allreduce/in place":
        y = a(n)
        return "Allreduce", (MPI.IN_PLACE, y, MPI.SUM), [y], [y]
    if name == "Reduce":
        x, y = a(n), a(n)
        return name, (x, y, MPI.MAX, root), [x], [y] if r == root else []
    if name == "Bcast":
        x = a(n)
        return name, (x, root), [x] if r == root else [], [x]
    if name == "Allgather":
        x, y = a(n), a(n * p)
        return name, (x, y), [x], [y]
    if name == "Allgatherv":
        x, y = a(counts[r]), a(sum(counts))
        return name, (x, [y, counts]), [x], [y]
    if name == "Gather":
        x, y = a(n), a(n * p)
        return name, (x, y, root), [x], [y] if r == root else []
    if name == "Gatherv":
        x, y = a(counts[r]), a(sum(counts))
        return name, (x, [y, counts], root), [x], [y] if r == root else []
    if name == "Scatter":
        x, y = a(n * p), a(n)
        return name, (x, y, root), [x] if r == root else [], [y]
    if name == "Scatterv":
        x, y = a(sum(counts)), a(counts[r])
        return name, ([x, counts], y, root), [x] if r == root else [], [y]
    if name == "Alltoall":
        x, y = a(n * p), a(n * p)
        return name, (x, y), [x], [y]
    if name == "Alltoall/in place":
        y = a(n * p)
        return "Alltoall", (MPI.IN_PLACE, y), [y], [y]
    if name == "Alltoallv":
        sc = [(r + q) % 3 + 1 for q in range(p)]
        rc = [(q + r) % 3 + 1 for q in range(p)]
        x, y = a(sum(sc)), a(sum(rc))
        return name, ([x, sc], [y, rc]), [x], [y]
    if name == "Reduce_scatter_block":
        x, y = a(n * p), a(n)
        return name, (x, y, MPI.SUM), [x], [y]
    if name == "Reduce_scatter":
        x, y = a(sum(counts)), a(counts[r])
        return name, (x, y, counts, MPI.SUM), [x], [y]
    if name == "Scan":
        x, y = a(n), a(n)
        return name, (x, y, MPI.SUM), [x], [y]
    if name == "Exscan":
        x, y = a(n), a(n)
        return name, (x, y, MPI.SUM), [x], [y] if r > 0 else []
    if name == "Barrier":
        return name, (), [], []
    return staged(comm, name, a)


def staged(comm, name: str, a):
    """Calls whose input a hand-built algorithm reads through scratch of
    mpicoll's (a derived datatype packed, blocks with gaps between them
    packed, a read-only root buffer copied), which every start must
    refresh from the caller's buffer. ``VECTOR`` elements are 2 doubles
    of every 3."""
    p, r = comm.size, comm.rank
    n, root = 2, p - 1
    counts = [q % 3 + 1 for q in range(p)]
    gaps = [sum(counts[:q]) + q for q in range(p)]  # one unused between
    V = VECTOR
    if name == "Bcast/vector":
        x = a(3 * n)
        return "Bcast", ([x, n, V], root), [x] if r == root else [], [x]
    if name == "Bcast/read-only root":
        x = a(n)
        view = x.view()
        view.flags.writeable = False
        return ("Bcast", (view if r == root else x, root),
                [x] if r == root else [], [] if r == root else [x])
    if name == "Allgather/vector":
        x, y = a(3 * n), a(3 * n * p)
        return "Allgather", ([x, n, V], [y, n, V]), [x], [y]
    if name == "Gather/vector":
        x, y = a(3 * n), a(3 * n * p)
        return ("Gather", ([x, n, V], [y, n, V], root), [x],
                [y] if r == root else [])
    if name == "Scatter/vector":
        x, y = a(3 * n * p), a(3 * n)
        return ("Scatter", ([x, n, V], [y, n, V], root),
                [x] if r == root else [], [y])
    if name == "Alltoall/vector":
        x, y = a(3 * n * p), a(3 * n * p)
        return "Alltoall", ([x, n, V], [y, n, V]), [x], [y]
    if name == "Allgatherv/vector":
        x, y = a(3 * counts[r]), a(3 * sum(counts))
        return "Allgatherv", ([x, counts[r], V], [y, counts, V]), [x], [y]
    if name == "Allgatherv/in place, gaps":
        y = a(sum(counts) + p)
        return ("Allgatherv", (MPI.IN_PLACE, [y, counts, gaps, MPI.DOUBLE]),
                [y], [y])
    if name == "Scatterv/gaps":
        x, y = a(sum(counts) + p), a(counts[r])
        return ("Scatterv", ([x, counts, gaps, MPI.DOUBLE], y, root),
                [x] if r == root else [], [y])
    if name == "Alltoallv/gaps":
        sc = [(r + q) % 3 + 1 for q in range(p)]
        rc = [(q + r) % 3 + 1 for q in range(p)]
        sd = [sum(sc[:q]) + q for q in range(p)]
        x, y = a(sum(sc) + p), a(sum(rc))
        return ("Alltoallv", ([x, sc, sd, MPI.DOUBLE], [y, rc]), [x], [y])
    raise AssertionError(name)


VECTOR = MPI.DOUBLE.Create_vector(2, 1, 2).Commit()
NAMES = ["Allreduce", "Allreduce/in place", "Reduce", "Bcast", "Allgather",
         "Allgatherv", "Gather", "Gatherv", "Scatter", "Scatterv", "Alltoall",
         "Alltoall/in place", "Alltoallv", "Reduce_scatter_block",
         "Reduce_scatter", "Scan", "Exscan", "Barrier",
         "Bcast/vector", "Bcast/read-only root", "Allgather/vector",
         "Gather/vector", "Scatter/vector", "Alltoall/vector",
         "Allgatherv/vector", "Allgatherv/in place, gaps", "Scatterv/gaps",
         "Alltoallv/gaps"]


def collective(method: str) -> str:
    return {"Reduce_scatter_block": "reduce_scatter_block",
            "Reduce_scatter": "reduce_scatter"}.get(method, method.lower())


def fill(arrays, rank: int, k: int) -> None:
    for i, x in enumerate(arrays):
        x[...] = np.arange(x.size) * 3 + rank * 17 + k * 101 + i


def clear(outputs, inputs) -> None:
    """-1 in every output that is not also an input (gaps included)."""
    for y in outputs:
        if not any(y is x for x in inputs):
            y[...] = -1


@pytest.mark.parametrize("name", NAMES)
def test_every_algorithm_started_again_and_again(comm, name):
    raw = MPI.Intracomm(comm)
    r = comm.rank
    method, args, inputs, outputs = setup(comm, name)
    c = collective(method)
    for algorithm in ["auto", "native", *mpicoll.algorithms(c)]:
        try:
            request = getattr(comm, method + "_init")(*args,
                                                      algorithm=algorithm)
        except errors.ConstraintError:
            continue  # declared limits (power of two, ...): every rank
        if grequests.usable():  # else a hand-built one is a Persistent
            assert isinstance(request, MPI.Prequest)  # mpi4py's take it
        assert request.Test()  # inactive: complete, as MPI says
        for k in range(ROUNDS):
            fill(inputs, r, k)
            clear(outputs, inputs)
            getattr(raw, method)(*args)  # the reference, on the same input
            want = [y.copy() for y in outputs]
            fill(inputs, r, k)
            clear(outputs, inputs)
            request.Start()
            if k % 2:
                request.Wait()
            else:
                mpicoll.waitall([request], timeout=60)
            for y, w in zip(outputs, want):
                assert np.array_equal(y, w), (algorithm, k, y, w)
        request.Free()


@pytest.mark.parametrize("name", NAMES)
def test_a_request_keeps_its_buffers_alive(comm, name):
    """mpi4py's ``X_init`` keeps no reference to its buffers, so a request
    made on temporaries runs on freed memory; mpicoll's requests keep them
    until the request goes, with every algorithm (the buffers the call
    uses on this rank)."""
    method = setup(comm, name)[0]
    made = []
    for algorithm in ["native", *mpicoll.algorithms(collective(method))]:
        _, args, inputs, outputs = setup(comm, name)
        refs = [weakref.ref(a) for a in inputs + outputs]
        try:
            request = getattr(comm, method + "_init")(*args,
                                                      algorithm=algorithm)
        except errors.ConstraintError:
            continue
        made.append((algorithm, request, refs))
    del args, inputs, outputs  # the arrays' last references but mpicoll's
    gc.collect(1)  # and any cycle of the call's own that still held them
    for algorithm, request, refs in made:
        assert all(ref() is not None for ref in refs), algorithm
        request.Start()
        request.Wait()
        request.Free()


def test_start_while_active_and_after_free_are_errors(comm):
    """Rank 0 starts while the others hold back (a raw barrier), so its
    request is surely still active when it starts it again."""
    x = np.ones(4)
    for algorithm in ("ring", "native"):
        request = comm.Allreduce_init(MPI.IN_PLACE, x, algorithm=algorithm)
        if comm.rank == 0:
            request.Start()
            if comm.size > 1:
                with pytest.raises(MPI.Exception) as info:
                    request.Start()
                assert info.value.Get_error_class() == MPI.ERR_REQUEST
            MPI.Intracomm(comm).Barrier()
        else:
            MPI.Intracomm(comm).Barrier()
            request.Start()
        request.Wait()
        request.Free()
    with pytest.raises(errors.MpicollError, match="freed"):
        request.Start()
    comm.Barrier()


def test_startall_and_the_torch_style_face(comm):
    p = comm.size
    pg = mpicoll.ProcessGroup(comm)
    t = np.empty(4)
    out = np.empty((p, 4))
    requests = [pg.prepare("all_reduce", t, algorithm="recursive_doubling"),
                pg.prepare("all_gather_into_tensor", out, t[:4])]
    with pytest.raises(errors.InvalidArgumentError, match="not a collective"):
        pg.prepare("send", t, 0)
    for k in range(3):
        t[...] = comm.rank + k
        mpicoll.startall(requests[:1])
        requests[0].wait(timeout=60)
        assert np.all(t == sum(q + k for q in range(p)))
        requests[1].start()
        requests[1].wait()
        assert np.all(out == sum(q + k for q in range(p)))
    for request in requests:
        request.free()


@pytest.mark.parametrize("face", ["torch", "mpi4py"])
def test_prepared_after_the_same_nonblocking_and_blocking_calls(comm, face):
    """Preparing a call that was just made on the same objects, nonblocking
    and blocking (each remembered for its repeats), still prepares it: a
    Persistent that runs only when started."""
    p = comm.size
    t, y = np.empty(4), np.empty(4)
    if face == "torch":
        pg = mpicoll.ProcessGroup(comm)
        for _ in range(2):
            pg.all_reduce(t, async_op=True).wait()
            pg.all_reduce(t)
        request = pg.prepare("all_reduce", t)
    else:
        for _ in range(2):
            comm.Iallreduce(t, y).Wait()
            comm.Allreduce(t, y)
        request = comm.Allreduce_init(t, y)
    assert isinstance(request, (mpicoll.Persistent, MPI.Prequest))
    t[...] = comm.rank + 1
    y[...] = -1
    request.start()
    request.wait(timeout=60)
    total = sum(q + 1 for q in range(p))
    assert np.all((t if face == "torch" else y) == total)
    request.free()


def block(q: int, j: int, k: int, n: int = 3) -> np.ndarray:
    """Rank ``q``'s tensor for rank ``j`` in round ``k``."""
    return np.arange(n) + q * 100 + j * 10 + k * 1000.0


@pytest.mark.parametrize("name", ["reduce_scatter", "scatter", "all_to_all"])
def test_torch_face_lists_are_read_at_every_start(comm, name):
    """Tensor lists go through one flat buffer; a prepared call must copy
    them into it at every start, natively and hand-built (they were
    copied once, when prepared: every start sent the first data)."""
    p, r, root = comm.size, comm.rank, comm.size - 1
    pg = mpicoll.ProcessGroup(comm)
    ins = [np.empty(3) for _ in range(p)]
    if name == "reduce_scatter":
        out = np.empty(3)
        args, c = (out, ins), "reduce_scatter"
    elif name == "scatter":
        out = np.empty(3)
        args, c = (out, ins if r == root else None, root), "scatter"
    else:
        outs = [np.empty(3) for _ in range(p)]
        args, c = (outs, ins), "alltoallv"
    for algorithm in ["native", *mpicoll.algorithms(c)]:
        try:
            request = pg.prepare(name, *args, algorithm=algorithm)
        except errors.ConstraintError:
            continue
        for k in range(ROUNDS):
            for j, x in enumerate(ins):
                x[...] = block(r, j, k)
            request.start()
            request.wait(timeout=60)
            if name == "reduce_scatter":
                want = sum(block(q, r, k) for q in range(p))
                assert np.array_equal(out, want), (algorithm, k)
            elif name == "scatter":
                assert np.array_equal(out, block(root, r, k)), (algorithm, k)
            else:
                for i, y in enumerate(outs):
                    assert np.array_equal(y, block(i, r, k)), (algorithm, k)
        request.free()


@pytest.mark.skipif(not grequests.usable(),
                    reason="hand-built persistent requests are MPI.Prequests "
                    "only with generalized requests (docs/api.md#limits)")
def test_mpi4py_startall_refuses_a_hand_built_request_before_starting(comm):
    """MPI has no persistent generalized requests: a hand-built one's
    handle is null while inactive, so ``MPI.Prequest.Startall`` raises
    ``ERR_REQUEST`` on every rank and starts nothing; ``mpicoll.startall``
    starts it beside mpi4py's, and ``MPI.Request.Waitall`` completes both."""
    x, y = np.full(4, comm.rank + 1.0), np.zeros(4)
    request = comm.Allreduce_init(x, y, algorithm="ring")
    barrier = MPI.Intracomm(comm).Barrier_init()
    assert isinstance(request, MPI.Prequest)
    with pytest.raises(MPI.Exception) as info:
        MPI.Prequest.Startall([barrier, request])
    assert info.value.Get_error_class() == MPI.ERR_REQUEST
    assert barrier.Get_status()  # inactive: not started
    for _ in range(2):
        y[...] = 0
        mpicoll.startall([barrier, request])
        MPI.Request.Waitall([barrier, request])
        assert np.all(y == sum(q + 1 for q in range(comm.size)))
    request.Free()
    barrier.Free()
