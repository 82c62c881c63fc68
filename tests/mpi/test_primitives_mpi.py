"""Tier 2 for gather, scatter, allgatherv, alltoall, scan, exscan and the
nonblocking ``I*`` forms of every collective: each registered algorithm
against native MPI and a NumPy reference, bitwise."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll import ProcessGroup as PG
from mpicoll import errors
from mpidata import OPS, cases, counts_for, each_input, fold, refuses, values

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
@pytest.mark.parametrize("algorithm", mpicoll.algorithms("gather"))
def test_gather(comm, algorithm, inplace):
    p, r = comm.size, comm.rank
    for count in counts_for(p):
        for dtype in ("int32", "float64"):
            expected = np.concatenate([values(q, count, dtype)
                                       for q in range(p)])
            for root in range(p):
                mine = values(r, count, dtype)
                if r != root:
                    comm.Gather(mine, None, root=root, algorithm=algorithm)
                    continue
                got = np.zeros_like(expected)
                if inplace:
                    got[r * count:(r + 1) * count] = mine
                    comm.Gather(MPI.IN_PLACE, got, root=root,
                                algorithm=algorithm)
                else:
                    comm.Gather(mine, got, root=root, algorithm=algorithm)
                assert np.array_equal(got, expected), (count, dtype, root)


@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
@pytest.mark.parametrize("algorithm", mpicoll.algorithms("scatter"))
def test_scatter(comm, algorithm, inplace):
    p, r = comm.size, comm.rank
    for count in counts_for(p):
        for root in range(p):
            whole = values(root, count * p, "int64")
            mine = whole[r * count:(r + 1) * count]
            if r == root and inplace:
                data = whole.copy()
                comm.Scatter(data, MPI.IN_PLACE, root=root,
                             algorithm=algorithm)
                assert np.array_equal(data, whole), (count, root)
                continue
            got = np.zeros(count, np.int64)
            comm.Scatter(whole if r == root else None, got, root=root,
                         algorithm=algorithm)
            assert np.array_equal(got, mine), (count, root)


def _uneven(p: int, count: int) -> list[int]:
    return [0 if q % 3 == 1 else count + q for q in range(p)]


@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
@pytest.mark.parametrize("algorithm", mpicoll.algorithms("allgatherv"))
def test_allgatherv(comm, algorithm, inplace):
    p, r = comm.size, comm.rank
    for count in counts_for(p):
        counts = _uneven(p, count)
        displs = list(np.cumsum([0, *counts[:-1]]))
        blocks = [values(q, counts[q], "float32") for q in range(p)]
        expected = np.concatenate(blocks)
        native = np.empty_like(expected)
        MPI.Intracomm(comm).Allgatherv(blocks[r], [native, counts])
        for spec in ([counts], [(counts, displs), MPI.FLOAT],
                     [counts, displs, MPI.FLOAT]):
            got = np.zeros_like(expected)
            if inplace:
                got[displs[r]:displs[r] + counts[r]] = blocks[r]
                comm.Allgatherv(MPI.IN_PLACE, [got, *spec],
                                algorithm=algorithm)
            else:
                comm.Allgatherv(blocks[r], [got, *spec], algorithm=algorithm)
            assert np.array_equal(got, native), (count, spec)
            assert np.array_equal(got, expected), (count, spec)


@pytest.mark.parametrize("algorithm", ["native", "ring", "linear",
                                       "binomial", "pairwise"])
def test_unpacked_displacements(comm, algorithm):
    """Blocks in reverse order with gaps: staged through a packed copy,
    results where the displacements say, gaps untouched."""
    p, r = comm.size, comm.rank
    counts = [q % 3 + 1 for q in range(p)]
    displs = [sum(counts[q + 1:]) + 2 * (p - 1 - q) for q in range(p)]
    span = max(d + n for d, n in zip(displs, counts))

    def laid_out(blocks):
        out = np.full(span, -1.0)
        for q in range(p):
            out[displs[q]:displs[q] + counts[q]] = blocks[q]
        return out

    blocks = [np.full(counts[q], float(q)) for q in range(p)]

    def spec_of(buf):
        return [buf, (counts, displs), MPI.DOUBLE]

    if algorithm in mpicoll.algorithms("allgatherv"):
        got = np.full(span, -1.0)
        comm.Allgatherv(blocks[r], spec_of(got), algorithm=algorithm)
        assert np.array_equal(got, laid_out(blocks))
        got = laid_out([blocks[q] if q == r else np.full(counts[q], -1.0)
                        for q in range(p)])
        comm.Allgatherv(MPI.IN_PLACE, spec_of(got), algorithm=algorithm)
        assert np.array_equal(got, laid_out(blocks))
    if algorithm in mpicoll.algorithms("gatherv"):
        got = np.full(span, -1.0)
        comm.Gatherv(blocks[r], spec_of(got) if r == 0 else None, root=0,
                     algorithm=algorithm)
        if r == 0:
            assert np.array_equal(got, laid_out(blocks))
        mine = np.zeros(counts[r])
        comm.Scatterv(spec_of(laid_out(blocks)) if r == p - 1 else None,
                      mine, root=p - 1, algorithm=algorithm)
        assert np.all(mine == r)
    if algorithm in mpicoll.algorithms("alltoallv"):
        # rank r sends counts[j] elements valued 10 r + j to rank j
        send = laid_out([np.full(counts[j], 10.0 * r + j) for j in range(p)])
        rcounts = [counts[r]] * p
        rdispls = [2 * (p - 1 - i) * counts[r] for i in range(p)]
        got = np.full(max(rdispls) + counts[r], -1.0)
        comm.Alltoallv(spec_of(send), [got, (rcounts, rdispls), MPI.DOUBLE],
                       algorithm=algorithm)
        for i in range(p):
            assert np.all(got[rdispls[i]:rdispls[i] + counts[r]]
                          == 10 * i + r)


def test_overlapping_receive_blocks_are_refused(comm):
    counts = [2] * comm.size
    displs = [0] * comm.size
    if comm.size > 1:
        with pytest.raises(errors.BufferSpecError, match="overlap"):
            comm.Allgatherv(np.ones(2), [np.zeros(2), counts, displs,
                                         MPI.DOUBLE])
    with pytest.raises(errors.BufferSpecError, match="from byte -8"):
        comm.Allgatherv(np.ones(2), [np.zeros(9), counts,
                                     [-1] * comm.size, MPI.DOUBLE])


@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
@pytest.mark.parametrize("algorithm", mpicoll.algorithms("alltoall"))
def test_alltoall(comm, algorithm, inplace):
    p, r = comm.size, comm.rank
    for count in counts_for(p):
        x = values(r, count * p, "int64")
        expected = np.concatenate(
            [values(q, count * p, "int64")[r * count:(r + 1) * count]
             for q in range(p)])
        native = np.empty_like(x)
        MPI.Intracomm(comm).Alltoall(x, native)
        if inplace:
            got = x.copy()
            comm.Alltoall(MPI.IN_PLACE, got, algorithm=algorithm)
        else:
            got = np.zeros_like(x)
            comm.Alltoall(x, got, algorithm=algorithm)
        assert np.array_equal(got, native), count
        assert np.array_equal(got, expected), count


@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
@pytest.mark.parametrize("collective", ["scan", "exscan"])
@pytest.mark.parametrize(("algorithm", "op_name"),
                         cases("scan", ("sum", "max", "affine", "callable")))
def test_scan(comm, collective, algorithm, op_name, inplace):
    if algorithm not in mpicoll.algorithms(collective):
        pytest.skip(f"{collective} has no {algorithm}")
    if refuses(collective, algorithm, op_name):
        with pytest.raises(errors.ConstraintError):
            comm.Scan(values(comm.rank, 3, "uint64"), np.empty(3, np.uint64),
                      OPS[op_name][3], algorithm=algorithm)
        return
    call = comm.Scan if collective == "scan" else comm.Exscan
    r = comm.rank
    for count, dtype, op, reference in each_input(comm, op_name):
        x = values(r, count, dtype)
        native = np.empty_like(x)  # every rank makes the reference call
        getattr(MPI.Intracomm(comm), call.__name__)(x, native, reference)
        last = r + 1 if collective == "scan" else r
        if last == 0:  # exscan on rank 0: undefined, left untouched
            got = np.full_like(x, 3)
            call(x, got, op, algorithm=algorithm)
            assert np.all(got == 3)
            continue
        expected = fold(op_name, [values(q, count, dtype)
                                  for q in range(last)])
        if inplace:
            got = x.copy()
            call(MPI.IN_PLACE, got, op, algorithm=algorithm)
        else:
            got = np.zeros_like(x)
            call(x, got, op, algorithm=algorithm)
        assert np.array_equal(got, native), (count, dtype)
        assert np.array_equal(got, expected), (count, dtype)


# ------------------------------------------------- nonblocking I* forms


def _each_algorithm(collective):
    """native and every hand-built algorithm of ``collective``."""
    return mpicoll.algorithms(collective)


@pytest.mark.parametrize("collective", ["allreduce", "reduce", "bcast",
                                        "allgather", "gather", "scatter",
                                        "alltoall", "scan", "exscan",
                                        "reduce_scatter_block",
                                        "reduce_scatter", "allgatherv",
                                        "gatherv", "scatterv", "alltoallv",
                                        "barrier"])
def test_nonblocking_forms(comm, collective):
    """Every I* call, native and hand-built, several in flight at once,
    completed with waitall/Wait/Test; results as from the blocking call."""
    p, r = comm.size, comm.rank
    n = 5
    for algorithm in _each_algorithm(collective):
        x = np.arange(n * p, dtype=np.int64) + r
        out = np.zeros(n * p, np.int64)
        if collective == "allreduce":
            work = comm.Iallreduce(x[:n], out[:n], MPI.SUM,
                                   algorithm=algorithm)
            want = np.arange(n) * p + sum(range(p))
            got = out[:n]
        elif collective == "reduce":
            work = comm.Ireduce(x[:n], out[:n], MPI.SUM, root=p - 1,
                                algorithm=algorithm)
            want = np.arange(n) * p + sum(range(p)) if r == p - 1 else 0
            got = out[:n]
        elif collective == "bcast":
            out[:n] = x[:n] if r == 0 else -1
            work = comm.Ibcast(out[:n], root=0, algorithm=algorithm)
            want, got = np.arange(n), out[:n]
        elif collective in ("allgather", "gather"):
            args = (x[:n], out)
            work = comm.Iallgather(*args, algorithm=algorithm) \
                if collective == "allgather" else \
                comm.Igather(*args, root=0, algorithm=algorithm)
            want = np.concatenate([np.arange(n) + q for q in range(p)]) \
                if collective == "allgather" or r == 0 else 0
            got = out
        elif collective == "allgatherv":
            work = comm.Iallgatherv(x[:n], [out, [n] * p],
                                    algorithm=algorithm)
            want = np.concatenate([np.arange(n) + q for q in range(p)])
            got = out
        elif collective == "gatherv":
            work = comm.Igatherv(x[:n], [out, [n] * p] if r == 0 else None,
                                 root=0, algorithm=algorithm)
            want = np.concatenate([np.arange(n) + q for q in range(p)]) \
                if r == 0 else 0
            got = out
        elif collective in ("scatter", "scatterv"):
            work = comm.Iscatter(x, out[:n], root=0, algorithm=algorithm) \
                if collective == "scatter" else comm.Iscatterv(
                    [x, [n] * p] if r == 0 else None, out[:n], root=0,
                    algorithm=algorithm)
            want, got = np.arange(r * n, (r + 1) * n), out[:n]
        elif collective == "alltoallv":
            work = comm.Ialltoallv([x, [n] * p], [out, [n] * p],
                                   algorithm=algorithm)
            want = np.concatenate([np.arange(r * n, (r + 1) * n) + q
                                   for q in range(p)])
            got = out
        elif collective == "alltoall":
            work = comm.Ialltoall(x, out, algorithm=algorithm)
            want = np.concatenate([np.arange(r * n, (r + 1) * n) + q
                                   for q in range(p)])
            got = out
        elif collective in ("scan", "exscan"):
            call = comm.Iscan if collective == "scan" else comm.Iexscan
            work = call(x[:n], out[:n], MPI.SUM, algorithm=algorithm)
            last = r + 1 if collective == "scan" else r
            want = np.arange(n) * last + sum(range(last))
            got = out[:n]
        elif collective == "reduce_scatter_block":
            work = comm.Ireduce_scatter_block(x, out[:n], MPI.SUM,
                                              algorithm=algorithm)
            want = np.arange(r * n, (r + 1) * n) * p + sum(range(p))
            got = out[:n]
        elif collective == "reduce_scatter":
            work = comm.Ireduce_scatter(x, out[:n], [n] * p, MPI.SUM,
                                        algorithm=algorithm)
            want = np.arange(r * n, (r + 1) * n) * p + sum(range(p))
            got = out[:n]
        else:
            work = comm.Ibarrier(algorithm=algorithm)
            want, got = 0, np.zeros(1)
        barrier = comm.Ibarrier()  # a second operation in flight
        mpicoll.waitall([barrier, work], timeout=60)
        assert work.Test() and barrier.is_completed()
        work.Wait()  # waiting again on a completed request is a no-op
        if collective == "exscan" and r == 0:
            continue
        assert np.array_equal(got, np.broadcast_to(want, got.shape)), \
            (collective, algorithm)


# ------------------------------------------------------------ array face


def test_array_face_primitives(comm):
    p, r = comm.size, comm.rank
    x = np.full(3, r, np.int32)
    out = np.zeros((p, 3), np.int32) if r == 0 else None
    PG(comm).gather(x, list(out) if r == 0 else None, dst=0)  # rows of out
    if r == 0:
        assert np.array_equal(out[:, 0], np.arange(p))
    mine = np.zeros(2, np.float64)
    parts = list(np.arange(2.0 * p).reshape(p, 2)) if r == p - 1 else None
    PG(comm).scatter(mine, parts, src=p - 1)
    assert np.array_equal(mine, [2 * r, 2 * r + 1])
    send = np.repeat(np.arange(p) * 10 + r, 2)  # block j goes to rank j
    recv = np.zeros_like(send)
    PG(comm).all_to_all_single(recv, send)
    assert np.array_equal(recv, np.repeat(np.arange(p) + 10 * r, 2))
    y = np.full(4, r + 1, np.int64)
    PG(comm).scan(y)
    assert np.all(y == (r + 1) * (r + 2) // 2)
    z = np.full(4, r + 1, np.int64)
    PG(comm).exscan(z, op="max", async_op=True).wait()
    assert np.all(z == (r if r else 1))
    with pytest.raises(errors.BufferSpecError, match="equal blocks"):
        PG(comm).all_to_all_single(np.zeros(p), np.zeros(2 * p))
    pending = [comm.Ibarrier(algorithm="dissemination"), comm.Ibarrier()]
    while not mpicoll.testall(pending):
        pass
    assert all(w.is_completed() for w in pending)


# ----------------------------------------------------------- v-variants


@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
@pytest.mark.parametrize("algorithm", mpicoll.algorithms("gatherv"))
def test_gatherv(comm, algorithm, inplace):
    p, r = comm.size, comm.rank
    for count in counts_for(p):
        counts = _uneven(p, count)
        blocks = [values(q, counts[q], "int32") for q in range(p)]
        for root in range(p):
            if r != root:
                comm.Gatherv(blocks[r], None, root=root, algorithm=algorithm)
                continue
            got = np.zeros(sum(counts), np.int32)
            if inplace:
                start = sum(counts[:r])
                got[start:start + counts[r]] = blocks[r]
                comm.Gatherv(MPI.IN_PLACE, [got, counts, MPI.INT],
                             root=root, algorithm=algorithm)
            else:
                comm.Gatherv(blocks[r], [got, counts], root=root,
                             algorithm=algorithm)
            assert np.array_equal(got, np.concatenate(blocks)), (count, root)


@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
@pytest.mark.parametrize("algorithm", mpicoll.algorithms("scatterv"))
def test_scatterv(comm, algorithm, inplace):
    p, r = comm.size, comm.rank
    for count in counts_for(p):
        counts = _uneven(p, count)
        starts = np.cumsum([0, *counts])
        for root in range(p):
            whole = values(root, sum(counts), "float64")
            mine = whole[starts[r]:starts[r + 1]]
            if r == root and inplace:
                data = whole.copy()
                comm.Scatterv([data, counts], MPI.IN_PLACE, root=root,
                              algorithm=algorithm)
                assert np.array_equal(data, whole)
                continue
            got = np.zeros(counts[r])
            comm.Scatterv([whole, (counts, list(starts[:-1])), MPI.DOUBLE]
                          if r == root else None, got, root=root,
                          algorithm=algorithm)
            assert np.array_equal(got, mine), (count, root)


@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
@pytest.mark.parametrize("algorithm", mpicoll.algorithms("alltoallv"))
def test_alltoallv(comm, algorithm, inplace):
    p, r = comm.size, comm.rank

    def sent(i, j):  # elements rank i sends to rank j
        return (i + 2 * j) % 3 if not inplace else (i + j) % 3

    scounts = [sent(r, j) for j in range(p)]
    rcounts = [sent(i, r) for i in range(p)]
    x = values(r, sum(scounts), "int64")
    starts = np.cumsum([0, *scounts])
    expected = np.concatenate([
        values(i, sum(sent(i, j) for j in range(p)), "int64")[
            sum(sent(i, j) for j in range(r)):][:sent(i, r)]
        for i in range(p)])
    if inplace:  # symmetric counts: what r sends to j is what j sends r
        got = np.zeros(sum(rcounts), np.int64)
        got[:] = x
        comm.Alltoallv(MPI.IN_PLACE, [got, rcounts], algorithm=algorithm)
    else:
        got = np.zeros(sum(rcounts), np.int64)
        comm.Alltoallv([x, (scounts, list(starts[:-1])), MPI.INT64_T],
                       [got, rcounts], algorithm=algorithm)
    assert np.array_equal(got, expected)


def test_v_counts_that_disagree_fail_on_every_rank(comm):
    p, r = comm.size, comm.rank
    counts = [2] * p
    counts[p - 1] = 3  # the root expects 3 from the last rank, which sends 2
    with pytest.raises(errors.InvalidArgumentError,
                       match=f"rank {p - 1} sends 2") as info:
        comm.Gatherv(np.ones(2), [np.zeros(sum(counts)), counts]
                     if r == 0 else None, root=0)
    assert f"[rank {r}] gatherv" in str(info.value)
    scounts = [1] * p
    rcounts = [1] * p
    rcounts[0] = 2 if r == p - 1 else 1  # p-1 expects 2 from rank 0
    with pytest.raises(errors.InvalidArgumentError, match="which expects 2"):
        comm.Alltoallv([np.ones(p), scounts], [np.zeros(p + 1), rcounts])


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("alltoallv"))
def test_all_to_all_with_splits(comm, algorithm):
    """torch's all_to_all_single: rank r sends (r + j) % 3 elements to j."""
    p, r = comm.size, comm.rank
    in_splits = [(r + j) % 3 for j in range(p)]
    out_splits = [(i + r) % 3 for i in range(p)]
    x = np.concatenate([np.full(n, 100 * r + j) for j, n in
                        enumerate(in_splits)]).astype(np.int64)
    out = np.zeros(sum(out_splits), np.int64)
    PG(comm).all_to_all_single(out, x, out_splits, in_splits, algorithm=algorithm)
    want = np.concatenate([np.full(n, 100 * i + r) for i, n in
                           enumerate(out_splits)])
    assert np.array_equal(out, want)
    with pytest.raises(errors.BufferSpecError, match="summing"):
        PG(comm).all_to_all_single(out, x, out_splits, [x.size + 1] + [0] * (p - 1))


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("allgatherv"))
def test_all_gather_into_uneven_list(comm, algorithm):
    p, r = comm.size, comm.rank
    outs = [np.zeros((q % 3, 2)) for q in range(p)]  # rank q gives q%3 rows
    x = np.full((r % 3, 2), float(r))
    work = PG(comm).all_gather(outs, x, algorithm=algorithm, async_op=True)
    work.wait(timeout=60)
    for q, o in enumerate(outs):
        assert np.all(o == q) and o.shape == (q % 3, 2)
    bad = [np.zeros(1) for _ in range(p)]
    bad[r] = np.zeros(2)  # each rank claims a different size for itself
    if p > 1:
        with pytest.raises(errors.InvalidArgumentError, match="disagree"):
            PG(comm).all_gather(bad, np.zeros(2))
