"""Tier 2 for the progress thread (:mod:`mpicoll.engine.progress`): hand-built
nonblocking collectives advance while the caller computes without calling
anything; results, timeouts and errors are as without it; turned off, the
old progress-on-test/wait returns.

"Done" is read from the execution's flag, which nothing but an advancing
thread changes (``test()``, ``wait()`` and ``is_completed()`` advance)."""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll import ProcessGroup as PG
from mpicoll.engine import grequests, progress
from mpicoll.engine.executor import EAGER_BYTES
from mpidata import values

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(60)]


@pytest.fixture
def thread_on():
    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        pytest.skip("the progress thread needs MPI_THREAD_MULTIPLE")
    progress.set_enabled(True)
    yield
    progress.set_enabled(None)


@pytest.fixture
def thread_off():
    progress.set_enabled(False)
    yield
    progress.set_enabled(None)


def _compute_until(flag, seconds: float) -> bool:
    """Pure Python and NumPy work, no MPI, until ``flag()`` or ``seconds``
    pass; returns ``flag()``."""
    a = np.random.default_rng(0).random(4096)
    deadline = time.monotonic() + seconds
    while not flag() and time.monotonic() < deadline:
        sum(i * i for i in range(2000))
        a = np.sqrt(a * a + 1.0)
    return flag()


def _several_rounds(comm):
    if comm.size == 1:
        pytest.skip("one rank: the ring has no rounds")


def test_one_short_round_stays_with_the_caller(comm, thread_on):
    """At two ranks recursive doubling is one exchange and one reduction:
    with a short message nothing is left for the thread but the
    reduction, so the call is not handed to it; test/wait complete it.
    On the torch-style face: the mpi4py face's request is a generalized
    one, which the thread completes (the next test)."""
    if comm.size != 2:
        pytest.skip("one round of messages at two ranks only")
    x = values(comm.rank, 16, "float64")
    work = PG(comm).all_reduce(
        x, async_op=True, algorithm="recursive_doubling")
    assert not _compute_until(lambda: work._execution.done, 0.2)
    work.wait()
    assert np.array_equal(x, values(0, 16, "float64") +
                          values(1, 16, "float64"))


def test_the_thread_completes_a_request_waited_on_by_mpi4py(comm, thread_on):
    """The mpi4py face's request of a hand-built call is completed by the
    thread, so ``MPI.Request.Waitall`` returns with the result in place,
    also for a short call that the torch-style face leaves to its
    caller (above)."""
    if not grequests.usable():
        pytest.skip("generalized requests are off (MPICOLL_GREQUESTS)")
    x = values(comm.rank, 16, "float64")
    request = comm.Iallreduce(MPI.IN_PLACE, x, MPI.SUM,
                              algorithm="recursive_doubling")
    assert isinstance(request, MPI.Request)
    MPI.Request.Waitall([request, MPI.Intracomm(comm).Ibarrier()])
    assert request == MPI.REQUEST_NULL
    assert np.array_equal(x, sum(values(q, 16, "float64")
                                 for q in range(comm.size)))


def test_progress_without_test_or_wait(comm, thread_on):
    """A ring allreduce (2(p-1) rounds) finishes while the caller only
    computes: every round after the first is posted by the thread."""
    _several_rounds(comm)
    p = comm.size
    x = values(comm.rank, 4096 * p, "float64")
    work = comm.Iallreduce(MPI.IN_PLACE, x, MPI.SUM, algorithm="ring")
    assert _compute_until(lambda: work._execution.done, 20)
    work.wait()
    expected = sum(values(q, 4096 * p, "float64") for q in range(p))
    assert np.array_equal(x, expected)


def test_switch_interval_short_only_while_in_flight(comm, thread_on):
    """The GIL switch interval drops to SWITCH_INTERVAL while a collective
    is in flight and is back to the caller's afterwards."""
    _several_rounds(comm)
    before = sys.getswitchinterval()
    x = values(comm.rank, (1 << 18) * comm.size, "float64")  # takes ms
    work = comm.Iallreduce(MPI.IN_PLACE, x, MPI.SUM, algorithm="ring")
    in_flight = sys.getswitchinterval()
    work.wait()
    assert in_flight == min(before, progress.SWITCH_INTERVAL)
    assert _compute_until(lambda: sys.getswitchinterval() == before, 10)


def test_without_the_thread_nothing_moves(comm, thread_off):
    """Turned off, only test()/wait() post the next round."""
    _several_rounds(comm)
    assert not progress.enabled()
    x = np.ones(64 * comm.size)
    work = PG(comm).all_reduce(x, algorithm="ring", async_op=True)
    assert not _compute_until(lambda: work._execution.done, 0.3)
    work.wait(timeout=30)
    assert np.all(x == comm.size)


def test_many_in_flight_waited_in_a_different_order_on_each_rank(comm,
                                                                  thread_on):
    """Ten collectives in flight at once, waited on in a random order that
    differs between ranks (without the thread this can deadlock: each rank
    blocks in a collective whose next round a peer has not posted)."""
    p, r = comm.size, comm.rank
    n = 8 * p + 3
    mine = values(r, n, "int64")
    everyone = [values(q, n, "int64") for q in range(p)]
    total = sum(everyone)
    block = 5
    blocks = [values(q, block * p, "int32") for q in range(p)]
    root = p - 1
    out = {}
    works = []

    def allreduce(algorithm):
        out[algorithm] = mine.copy()
        works.append(comm.Iallreduce(MPI.IN_PLACE, out[algorithm], MPI.SUM,
                                     algorithm=algorithm))

    for algorithm in ("ring", "recursive_doubling", "rabenseifner",
                      "reduce_bcast"):
        allreduce(algorithm)
    out["bcast"] = mine.copy() if r == root else np.zeros(n, np.int64)
    works.append(comm.Ibcast(out["bcast"], root=root, algorithm="binomial"))
    out["allgather"] = np.zeros(n * p, np.int64)
    works.append(comm.Iallgather(mine, out["allgather"], algorithm="bruck"))
    out["rsb"] = np.zeros(block, np.int32)
    works.append(comm.Ireduce_scatter_block(blocks[r], out["rsb"], MPI.SUM,
                                            algorithm="ring"))
    out["alltoall"] = np.zeros(block * p, np.int32)
    works.append(comm.Ialltoall(blocks[r], out["alltoall"],
                                algorithm="pairwise"))
    out["scan"] = np.zeros(n, np.int64)
    works.append(comm.Iscan(mine, out["scan"], MPI.SUM,
                            algorithm="recursive_doubling"))
    works.append(comm.Ibarrier(algorithm="dissemination"))
    order = np.random.default_rng(1000 + r).permutation(len(works))
    for i in order:
        works[i].wait()
    for algorithm in ("ring", "recursive_doubling", "rabenseifner",
                      "reduce_bcast"):
        assert np.array_equal(out[algorithm], total), algorithm
    assert np.array_equal(out["bcast"], everyone[root])
    assert np.array_equal(out["allgather"], np.concatenate(everyone))
    assert np.array_equal(out["rsb"],
                          sum(blocks)[r * block:(r + 1) * block])
    assert np.array_equal(out["alltoall"], np.concatenate(
        [blocks[q][r * block:(r + 1) * block] for q in range(p)]))
    assert np.array_equal(out["scan"], sum(everyone[:r + 1]))
    assert all(w.is_completed() for w in works)


def test_timeout_names_the_pending_peers(comm, thread_on):
    """Rank 0 starts a ring allreduce the others join late: its timed wait
    raises naming the peers still pending; after they join it completes."""
    if comm._settings.guard.check:
        pytest.skip("check mode: a nonblocking call agrees with its peers "
                    "when it is made, so rank 0 cannot start alone")
    _several_rounds(comm)
    x = np.ones(16 * comm.size)
    if comm.rank == 0:
        work = PG(comm).all_reduce(x, algorithm="ring", async_op=True)
        with pytest.raises(mpicoll.CollectiveTimeoutError) as info:
            work.wait(timeout=0.2)
        assert info.value.pending
        assert all("rank" in peer for peer in info.value.pending)
        assert "still pending: " in str(info.value)
        assert "ring" in str(info.value)
        MPI.Intracomm(comm).Barrier()
        work.wait(timeout=30)
    else:
        MPI.Intracomm(comm).Barrier()
        PG(comm).all_reduce(x, algorithm="ring")
    assert np.all(x == comm.size)


def test_an_error_in_a_reduction_surfaces_on_wait(comm, thread_on):
    """A user op that raises, met by the thread: the execution ends, the
    error comes out of test() and wait() (every time), and the thread goes
    on serving later collectives."""
    _several_rounds(comm)

    def broken(a, b):
        raise ArithmeticError("broken op")

    op = mpicoll.Op.from_callable(broken, commute=True)
    x = np.ones(8 * comm.size)
    work = PG(comm).all_reduce(x, op, async_op=True, algorithm="ring")
    execution = work._execution
    assert _compute_until(lambda: execution.error is not None, 20)
    with pytest.raises(ArithmeticError, match="broken op"):
        work.test()
    with pytest.raises(ArithmeticError, match="broken op"):
        work.wait()
    with pytest.raises(ArithmeticError, match="broken op"):
        work.wait(timeout=5)
    y = np.ones(8 * comm.size)
    later = comm.Iallreduce(MPI.IN_PLACE, y, MPI.SUM, algorithm="ring")
    assert _compute_until(lambda: later._execution.done, 20)
    later.wait()
    assert np.all(y == comm.size)


def test_finish_runs_once_when_the_thread_completes(comm, thread_on):
    """A staged result (in-place reduce_scatter_block copies it back in
    ``finish``) lands once, in the first test/wait after completion.
    (Blocks longer than EAGER_BYTES: at two ranks the ring's one round is
    then the thread's too.)"""
    _several_rounds(comm)
    p, r, block = comm.size, comm.rank, EAGER_BYTES // 8 + 1
    data = values(r, block * p, "int64")
    work = comm.Ireduce_scatter_block(MPI.IN_PLACE, data, MPI.SUM,
                                      algorithm="ring")
    assert _compute_until(lambda: work._execution.done, 20)
    # a generalized request completes once the thread has run finish
    assert _compute_until(work.Test, 5) is True and work.Test() is True
    work.wait()
    expected = sum(values(q, block * p, "int64") for q in range(p))
    assert np.array_equal(data[:block], expected[r * block:(r + 1) * block])
