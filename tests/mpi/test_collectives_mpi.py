"""Tier 2: every registered algorithm on real MPI, against native MPI.

Run under ``mpiexec -n N python -m mpi4py -m pytest --with-mpi -m mpi``.
Data are integer-valued and unique per (rank, index), so every algorithm
must agree *bitwise* with the MPI library's own call and with a NumPy
reference, whatever order it reduces in. Each test loops over the counts
{0, 1, p-1, p, p+1, 1000} itself, to keep pytest's overhead out of the
oversubscribed runs.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll import ProcessGroup as PG
from mpicoll.errors import ConstraintError
from mpidata import OPS, cases, counts_for, each_input, fold, refuses, values

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
@pytest.mark.parametrize(("algorithm", "op_name"), cases("allreduce"))
def test_allreduce(comm, algorithm, op_name, inplace):
    if refuses("allreduce", algorithm, op_name):
        x = values(comm.rank, 4, "uint64")
        with pytest.raises(ConstraintError, match="commutative"):
            comm.Allreduce(MPI.IN_PLACE, x, OPS[op_name][3],
                           algorithm=algorithm)
        with pytest.raises(ConstraintError, match="commutative"):
            PG(comm).all_reduce(x, OPS[op_name][0], algorithm=algorithm)
        return
    for count, dtype, op, reference in each_input(comm, op_name):
        x = values(comm.rank, count, dtype)
        expected = fold(op_name, [values(r, count, dtype)
                                  for r in range(comm.size)])
        native = np.empty_like(x)
        MPI.Intracomm(comm).Allreduce(x, native, reference)
        if inplace:
            got = x.copy()
            comm.Allreduce(MPI.IN_PLACE, got, op, algorithm=algorithm)
        else:
            got = np.full_like(x, 7)
            comm.Allreduce(x, got, op, algorithm=algorithm)
            assert np.array_equal(x, values(comm.rank, count, dtype))
        assert np.array_equal(got, native), (count, dtype)
        assert np.array_equal(got, expected), (count, dtype)
        if inplace:  # the torch face, with the op as it takes it (a name,
            # an MPI.Op or a Python callable)
            got = x.copy()
            PG(comm).all_reduce(got, OPS[op_name][0], algorithm=algorithm)
            assert np.array_equal(got, native), (count, dtype)


@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
@pytest.mark.parametrize(("algorithm", "op_name"),
                         cases("reduce", ("sum", "max", "affine")))
def test_reduce(comm, algorithm, op_name, inplace):
    if refuses("reduce", algorithm, op_name):
        with pytest.raises(ConstraintError):
            comm.Reduce(values(comm.rank, 3, "uint64"),
                        np.empty(3, np.uint64), OPS[op_name][3],
                        algorithm=algorithm)
        return
    for count, dtype, op, _ in each_input(comm, op_name):
        expected = fold(op_name, [values(r, count, dtype)
                                  for r in range(comm.size)])
        for root in range(comm.size):
            x = values(comm.rank, count, dtype)
            at_root = comm.rank == root
            if inplace and at_root:
                comm.Reduce(MPI.IN_PLACE, x, op, root=root,
                            algorithm=algorithm)
                got = x
            else:
                got = np.zeros_like(x) if at_root else None
                comm.Reduce(x, got, op, root=root, algorithm=algorithm)
                assert np.array_equal(x, values(comm.rank, count, dtype))
            if at_root:
                assert np.array_equal(got, expected), (count, dtype, root)


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("bcast"))
def test_bcast(comm, algorithm):
    for count in counts_for(comm.size):
        for dtype in ("int64", "float32", "complex64", "bool"):
            for root in range(comm.size):
                data = values(root, count, dtype)
                buf = data.copy() if comm.rank == root else \
                    np.zeros_like(data)
                comm.Bcast(buf, root=root, algorithm=algorithm)
                assert np.array_equal(buf, data), (count, dtype, root)


@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
@pytest.mark.parametrize("algorithm", mpicoll.algorithms("allgather"))
def test_allgather(comm, algorithm, inplace):
    for count in counts_for(comm.size):
        for dtype in ("int32", "float64", "uint8"):
            mine = values(comm.rank, count, dtype)
            expected = np.concatenate([values(r, count, dtype)
                                       for r in range(comm.size)])
            native = np.empty_like(expected)
            MPI.Intracomm(comm).Allgather(mine, native)
            got = np.zeros_like(expected)
            if inplace:
                got[comm.rank * count:(comm.rank + 1) * count] = mine
                comm.Allgather(MPI.IN_PLACE, got, algorithm=algorithm)
            else:
                comm.Allgather(mine, got, algorithm=algorithm)
            assert np.array_equal(got, native), (count, dtype)
            assert np.array_equal(got, expected), (count, dtype)


def _uneven(size: int, count: int) -> list[int]:
    """Per-rank counts with zeros in them, summing to about size*count."""
    return [(count + 3 * r) % (count + 2) if r % 3 else 0
            for r in range(size)]


@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
@pytest.mark.parametrize("collective",
                         ["reduce_scatter_block", "reduce_scatter"])
@pytest.mark.parametrize(("algorithm", "op_name"),
                         cases("reduce_scatter", ("sum", "max", "affine")))
def test_reduce_scatter(comm, collective, algorithm, op_name, inplace):
    if refuses(collective, algorithm, op_name):
        n = comm.size
        with pytest.raises(ConstraintError):
            comm.Reduce_scatter_block(values(comm.rank, n, "uint64"),
                                      np.empty(1, np.uint64),
                                      OPS[op_name][3], algorithm=algorithm)
        return
    for count, dtype, op, reference in each_input(comm, op_name):
        if collective == "reduce_scatter":
            counts = _uneven(comm.size, count)
        else:
            counts = [count] * comm.size
        total = sum(counts)
        x = values(comm.rank, total, dtype)
        full = fold(op_name, [values(r, total, dtype)
                              for r in range(comm.size)])
        start = sum(counts[:comm.rank])
        expected = full[start:start + counts[comm.rank]]
        native = np.empty(counts[comm.rank], dtype)
        MPI.Intracomm(comm).Reduce_scatter(x, native, counts, reference)
        if inplace:
            got = x.copy()
            send = MPI.IN_PLACE
        else:
            got = np.zeros(counts[comm.rank], dtype)
            send = x
        if collective == "reduce_scatter":
            comm.Reduce_scatter(send, got, counts, op, algorithm=algorithm)
        else:
            comm.Reduce_scatter_block(send, got, op, algorithm=algorithm)
        got = got[:counts[comm.rank]]
        assert np.array_equal(got, native), (count, dtype, counts)
        assert np.array_equal(got, expected), (count, dtype, counts)


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("barrier"))
def test_barrier_waits_for_the_last_rank(comm, algorithm):
    import time

    MPI.Intracomm(comm).Barrier()
    start = time.monotonic()
    if comm.rank == comm.size - 1:
        time.sleep(0.3)
    comm.Barrier(algorithm=algorithm)
    if comm.rank != comm.size - 1:
        assert time.monotonic() - start > 0.1
    for _ in range(3):
        PG(comm).barrier(algorithm=algorithm)


# ------------------------------------ array face: mpicoll.ProcessGroup


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("allreduce"))
def test_all_reduce_array_face_and_async(comm, algorithm):
    shape = (3, 5)
    x = np.arange(15, dtype=np.float64).reshape(shape) + comm.rank
    expected = sum(np.arange(15.0).reshape(shape) + r
                   for r in range(comm.size))
    PG(comm).all_reduce(x, algorithm=algorithm)
    assert np.array_equal(x, expected)
    # Two in flight at once, completed in reverse order: the rolling tag
    # keeps their messages apart.
    a = np.full(100, comm.rank, np.int64)
    b = np.full(7, comm.rank + 1, np.int64)
    wa = PG(comm).all_reduce(a, algorithm=algorithm, async_op=True)
    wb = PG(comm).all_reduce(b, op="max", algorithm=algorithm, async_op=True)
    wb.wait()
    wa.wait()
    assert wa.is_completed() and wb.test()
    assert np.all(a == sum(range(comm.size)))
    assert np.all(b == comm.size)


def test_array_face_collectives(comm):
    p, r = comm.size, comm.rank
    x = np.arange(6.0) * (r + 1)
    PG(comm).reduce(x, dst=p - 1)
    if r == p - 1:
        assert np.array_equal(x, np.arange(6.0) * sum(range(1, p + 1)))
    y = np.full((2, 2), r, np.int32)
    PG(comm).broadcast(y, src=p // 2)
    assert np.all(y == p // 2)
    out = np.empty((p, 3), np.int16)
    PG(comm).all_gather_into_tensor(out, np.full(3, r, np.int16))
    assert np.array_equal(out, np.repeat(np.arange(p), 3).reshape(p, 3))
    PG(comm).all_gather_into_tensor(out, out[r])  # in place: x is out's own block
    assert np.array_equal(out[:, 0], np.arange(p))
    mine = np.empty(2, np.int64)
    work = PG(comm).reduce_scatter_tensor(mine, np.arange(2 * p, dtype=np.int64),
                               async_op=True)
    work.wait(timeout=60)
    assert np.array_equal(mine, np.arange(2 * r, 2 * r + 2) * p)
    PG(comm).barrier(async_op=True).wait()


# ---------------------------------------------------- isolation, timeouts


def test_library_traffic_never_matches_user_messages(comm):
    """A user's pending message on the same communicator and tag range is
    untouched by a hand-built collective."""
    p, r = comm.size, comm.rank
    if p == 1:
        pytest.skip("needs two ranks")
    note = np.full(4, 100 + r, np.int64)
    req = MPI.Intracomm(comm).Isend(note, (r + 1) % p, tag=1)
    x = np.ones(64)
    for _ in range(3):
        PG(comm).all_reduce(x, algorithm="ring")
    got = np.empty(4, np.int64)
    MPI.Intracomm(comm).Recv(got, (r - 1) % p, tag=1)
    req.Wait()
    assert np.all(got == 100 + (r - 1) % p)
    assert np.all(x == p ** 3)


def test_wait_timeout_names_the_missing_peers(comm):
    """Rank 0 starts a collective the others join late: its timed wait
    raises naming the peers pending, and a later wait completes."""
    if comm.size == 1:
        pytest.skip("needs two ranks")
    if comm._settings.guard.check:
        pytest.skip("check mode: a nonblocking call agrees with its peers "
                    "when it is made, so rank 0 cannot start alone")
    x = np.ones(8)
    if comm.rank == 0:
        work = PG(comm).all_reduce(x, algorithm="recursive_doubling",
                               async_op=True)
        with pytest.raises(mpicoll.CollectiveTimeoutError) as info:
            work.wait(timeout=0.2)
        assert "rank 0" in str(info.value) and "allreduce" in str(info.value)
        assert info.value.pending
        MPI.Intracomm(comm).Barrier()
        work.wait()
    else:
        MPI.Intracomm(comm).Barrier()
        PG(comm).all_reduce(x, algorithm="recursive_doubling")
    assert np.all(x == comm.size)


@pytest.mark.parametrize("algorithm", ["native", "ring", "recursive_doubling",
                                       "auto"])
def test_repeated_calls_on_the_same_buffers(comm, algorithm):
    """Repeats replay the checked call (mpicoll.api.comm.Comm._replayed): the
    results must follow the buffers' new contents, and a dtype reassigned in
    place must not reuse the old plan."""
    p, r = comm.size, comm.rank
    x, y = np.zeros(10), np.zeros(10)
    counts = (2,) * p
    shard, full = np.zeros(2), np.zeros(2 * p)
    for i in range(3):
        x[:] = r + i
        comm.Allreduce(x, y, MPI.SUM, algorithm=algorithm)
        assert np.all(y == sum(range(p)) + i * p)
        PG(comm).all_reduce(x, op="max", algorithm=algorithm)
        assert np.all(x == p - 1 + i)
        for root in range(p):
            y[:] = root + i if r == root else -1
            comm.Bcast(y, root=root)
            assert np.all(y == root + i)
        full[:] = np.arange(2 * p) + i
        comm.Reduce_scatter(full, shard, counts, MPI.SUM)
        assert np.array_equal(shard, (np.arange(2 * r, 2 * r + 2) + i) * p)
        PG(comm).barrier()
    z = np.arange(4, dtype=np.int64) + r
    PG(comm).all_reduce(z, op="max", algorithm=algorithm)
    assert np.array_equal(z, np.arange(4) + p - 1)
    z.dtype = np.int32  # same memory, twice the elements
    # Viewed as int64 the max would pick whole pairs (rank 0's), not the
    # element-wise max of the int32s: a stale plan gives 0 in even slots.
    z[:] = np.where(np.arange(8) % 2 == 0, r, p - 1 - r)
    PG(comm).all_reduce(z, op="max", algorithm=algorithm)
    assert z.size == 8 and np.all(z == p - 1)


@pytest.mark.parametrize("algorithm", ["native", "ring", "recursive_doubling",
                                       "auto"])
def test_repeated_nonblocking_calls_on_the_same_buffers(comm, algorithm):
    """Nonblocking repeats relaunch the checked call
    (mpicoll.engine.engine.Engine.restarted): results follow the buffers, a
    relaunch while the previous one is still in flight on other buffers
    is its own call, and a dtype reassigned in place is parsed anew."""
    p, r = comm.size, comm.rank
    x, y = np.zeros(10), np.zeros(10)
    u, v = np.zeros(10), np.zeros(10)
    for i in range(3):
        x[:], u[:] = r + i, 2 * (r + i)
        first = comm.Iallreduce(x, y, MPI.SUM, algorithm=algorithm)
        second = comm.Iallreduce(u, v, MPI.SUM, algorithm=algorithm)
        mpicoll.waitall([second, first])
        assert np.all(y == sum(range(p)) + i * p)
        assert np.all(v == 2 * (sum(range(p)) + i * p))
        work = PG(comm).all_reduce(x, op="max", async_op=True,
                                   algorithm=algorithm)
        work.wait()
        assert np.all(x == p - 1 + i)
    z = np.arange(4, dtype=np.int64) + r
    PG(comm).all_reduce(z, op="max", async_op=True,
                        algorithm=algorithm).wait()
    assert np.array_equal(z, np.arange(4) + p - 1)
    z.dtype = np.int32  # as in the blocking test above
    z[:] = np.where(np.arange(8) % 2 == 0, r, p - 1 - r)
    PG(comm).all_reduce(z, op="max", async_op=True,
                        algorithm=algorithm).wait()
    assert z.size == 8 and np.all(z == p - 1)


@pytest.mark.parametrize("algorithm", ["native", *mpicoll.algorithms(
    "alltoall")])
def test_repeated_nonblocking_in_place_alltoall(comm, algorithm):
    """A relaunched in-place Ialltoall copies its input again."""
    p, r = comm.size, comm.rank
    buf = np.empty(2 * p)
    for k in range(3):
        buf[...] = np.arange(2 * p) + 100 * r + 1000 * k
        comm.Ialltoall(MPI.IN_PLACE, buf, algorithm=algorithm).wait()
        want = [2 * r + i + 100 * q + 1000 * k for q in range(p)
                for i in range(2)]
        assert np.array_equal(buf, want), (k, buf)


@pytest.mark.parametrize("algorithm", ["native", *mpicoll.algorithms(
    "alltoall")])
def test_repeated_in_place_alltoall_reads_the_new_input(comm, algorithm):
    """A repeated in-place Alltoall copies its input again on every call
    (the replayed call once ran on the first call's copy)."""
    p, r = comm.size, comm.rank
    buf = np.empty(2 * p)
    for k in range(3):
        buf[...] = np.arange(2 * p) + 100 * r + 1000 * k
        comm.Alltoall(MPI.IN_PLACE, buf, algorithm=algorithm)
        want = [2 * r + i + 100 * q + 1000 * k for q in range(p)
                for i in range(2)]
        assert np.array_equal(buf, want), (k, buf)


def outcome(call, comm):
    """What ``call(comm)`` gives: ("ok", None) or its exception's type and
    text (the rank's own words)."""
    try:
        call(comm)
    except Exception as exc:  # compared, not judged
        return type(exc).__name__, str(exc)
    return "ok", None


def test_calls_on_new_arrays_alike_to_an_earlier_one(comm):
    """A native call on new arrays alike to an earlier call's (same dtype
    and shape, plain, contiguous, writeable: mpicoll.engine.likeness) makes the
    library's call at once; its results follow the new arrays, and a call
    that differs in any way the full parse looks at (overlap, read-only
    or strided output, dtype, op, the same array twice) gives what a
    communicator that never saw the earlier call gives."""
    p, r = comm.size, comm.rank
    world = MPI.Intracomm(comm)
    fresh = mpicoll.Comm(world.Dup())  # its own engine: nothing kept
    for step in range(3):
        x = np.arange(4.0) + r + step
        y = np.full(4, -1.0)
        comm.Allreduce(x, y, MPI.SUM, algorithm="native")
        assert np.array_equal(y, p * (np.arange(4.0) + step) + p * (p - 1) / 2)
        z = x.copy()
        comm.Allreduce(MPI.IN_PLACE, z, MPI.MAX, algorithm="native")
        assert np.array_equal(z, np.arange(4.0) + p - 1 + step)
        b = np.full(4, float(r + step))
        comm.Bcast(b, root=p - 1, algorithm="native")
        assert np.all(b == p - 1 + step)
        g = np.empty(4 * p)
        comm.Allgather(x, g, algorithm="native")
        assert np.array_equal(g.reshape(p, 4)[:, 0],
                              np.arange(p, dtype=float) + step)
    keep = np.zeros(8)
    ro = np.zeros(4)
    ro.flags.writeable = False
    strided = np.zeros(8)[::2]
    cases = [
        lambda c: c.Allreduce(keep[:4], keep[2:6], MPI.SUM,
                              algorithm="native"),
        lambda c: c.Allreduce(np.ones(4), ro, MPI.SUM, algorithm="native"),
        lambda c: c.Allreduce(keep[:4], keep[:4], MPI.SUM,
                              algorithm="native"),
        lambda c: c.Allreduce(np.ones(4), strided, MPI.SUM,
                              algorithm="native"),
        lambda c: c.Allreduce(np.ones(4, np.float32), np.zeros(4, np.float32),
                              MPI.SUM, algorithm="native"),
        lambda c: c.Allreduce(np.ones(4), np.zeros(4), MPI.PROD,
                              algorithm="native"),
        lambda c: c.Allreduce(np.ones(4), np.zeros(3), MPI.SUM,
                              algorithm="native"),
    ]
    for i, case in enumerate(cases):
        assert outcome(case, comm) == outcome(case, fresh), i
    fresh.Free()
