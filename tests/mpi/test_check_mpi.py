"""Tier 2: check mode (mpicoll.guard.check_mode). Every mismatch between the ranks'
calls, and a local error on some ranks only, raises the same error on every
rank before the collective runs; nothing hangs (pytest-timeout fails a
test that would).

Each case makes the ranks disagree on purpose, so it needs 2 ranks or more
(skipped on one rank, where nothing can disagree)."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll import errors
from mpicoll.guard.check_mode import describe, said
from mpicoll.errors import spans

pytestmark = pytest.mark.mpi
WORLD = MPI.COMM_WORLD
several = pytest.mark.skipif(WORLD.Get_size() < 2,
                             reason="a mismatch needs two ranks or more")


@pytest.fixture(scope="module")
def comm():
    c = mpicoll.Comm(WORLD.Dup(), check=True)
    yield c
    c.Free()


def agreed_error(call) -> str:
    """Run ``call``, which must raise CollectiveCheckError; return its text
    without the rank prefix, after checking every rank got the same."""
    with pytest.raises(errors.CollectiveCheckError) as info:
        call()
    text = str(info.value).split("] ", 1)[1].split(": ", 1)[1]
    assert len(set(WORLD.allgather(text))) == 1, text
    return text


@several
def test_agreeing_calls_run(comm):
    x = np.arange(6.0)
    y = np.empty(6)
    for algorithm in ["auto", *mpicoll.algorithms("allreduce")]:
        comm.Allreduce(x, y, MPI.SUM, algorithm=algorithm)
        assert np.array_equal(y, x * comm.size)
    comm.Iallgather(x[:2], np.empty(2 * comm.size)).Wait()
    counts = [q + 1 for q in range(comm.size)]
    got = np.empty(sum(counts))
    comm.Allgatherv(np.full(comm.rank + 1, 1.0 * comm.rank), [got, counts])
    assert np.array_equal(got, np.repeat(np.arange(comm.size), counts))
    assert type(comm).guarded and isinstance(comm, mpicoll.Comm)


@several
@pytest.mark.parametrize("field", ["op", "algorithm", "count", "dtype",
                                   "root", "inplace", "collective"])
def test_each_field_that_differs_is_named(comm, field):
    r, last = comm.rank, comm.size - 1
    odd = r == last  # one rank differs
    x = np.ones(4, np.int32 if field == "dtype" and odd else np.float64)
    y = np.empty_like(x)
    calls = {
        "op": lambda: comm.Allreduce(x, y, MPI.MAX if odd else MPI.SUM),
        "algorithm": lambda: comm.Allreduce(
            x, y, MPI.SUM,
            algorithm="ring" if odd else "recursive_doubling"),
        "count": lambda: comm.Allreduce(x[:3] if odd else x,
                                        y[:3] if odd else y, MPI.SUM),
        "dtype": lambda: comm.Allreduce(x, y, MPI.SUM),
        "root": lambda: comm.Bcast(x, root=last if odd else 0),
        "inplace": lambda: comm.Allreduce(
            MPI.IN_PLACE if odd else x, y, MPI.SUM),
        "collective": lambda: (comm.Bcast(x, 0) if odd else
                               comm.Allreduce(x, y, MPI.SUM)),
    }
    text = agreed_error(calls[field])
    assert f"{field} differs" in text
    assert f"on rank {last}" in text  # the odd one named
    others = spans(list(range(last)))
    assert f"on rank{'s' if last > 1 else ''} {others}" in text
    comm.Allreduce(np.ones(2), np.empty(2), MPI.SUM)  # still usable


@several
def test_different_ndim_and_collectives_do_not_break_the_check(comm):
    """Fingerprints of different lengths (a tuple of counts, a matrix)
    against plain ints: the exchange still agrees on a verdict."""
    p, r = comm.size, comm.rank
    if r == 0:
        call = lambda: comm.Alltoallv(  # noqa: E731
            [np.ones(p), [1] * p], [np.empty(p), [1] * p])
    else:
        call = lambda: comm.Reduce_scatter(  # noqa: E731
            np.ones(p), np.empty(1), [1] * p, MPI.SUM)
    text = agreed_error(call)
    assert "collective differs" in text or "stage differs" in text


@several
def test_a_local_error_on_one_rank_raises_everywhere(comm):
    """The failing rank raises its own error (mpi4py's type), the others a
    CollectiveCheckError naming it; nobody waits in the collective."""
    r, last = comm.rank, comm.size - 1
    x = np.ones(5)
    bad = np.empty(4) if r == last else np.empty(5)
    with pytest.raises(errors.MpicollError) as info:
        comm.Allreduce(x, bad, MPI.SUM, algorithm="ring")
    if r == last:
        assert type(info.value) is errors.BufferSpecError
        assert "mismatch in send count 5" in str(info.value)
    else:
        assert type(info.value) is errors.CollectiveCheckError
        assert f"rank {last} failed its local checks" in str(info.value)
        assert "mismatch in send count 5" in str(info.value)
    # a root-only problem: only the root can see it (its receive buffer)
    with pytest.raises(errors.MpicollError) as info:
        comm.Gather(np.ones(2), np.empty(1) if r == 0 else None, root=0)
    assert ("failed its local checks" in str(info.value)) != (r == 0)
    # a v-collective whose counts the others wait to agree on
    with pytest.raises(errors.MpicollError) as info:
        comm.Gatherv(np.ones(2) if r != last else "not a buffer",
                     [np.empty(2 * comm.size), [2] * comm.size]
                     if r == 0 else None, root=0)
    comm.Barrier()


@several
def test_a_mismatch_after_500_good_calls_names_its_number(comm):
    x, y = np.ones(3), np.empty(3)
    comm.Barrier()
    start = comm._engine.recorder.seq  # the sequence so far (the same on all)
    assert len(set(WORLD.allgather(start))) == 1
    for _ in range(500):
        comm.Allreduce(x, y, MPI.SUM)
    odd = comm.rank == comm.size - 1
    text = agreed_error(lambda: comm.Allreduce(x, y, MPI.MAX if odd else
                                               MPI.SUM))
    assert text.startswith(f"call #{start + 501}: op differs")


@several
def test_the_torch_style_face_is_checked(comm):
    pg = mpicoll.ProcessGroup(comm)
    assert type(pg).guarded
    odd = pg.rank() == pg.size() - 1
    with pytest.raises(errors.CollectiveCheckError, match="count differs"):
        pg.all_reduce(np.ones(4 if odd else 5))
    t = np.full(3, 1.0 * pg.rank())
    pg.all_reduce(t, async_op=True).wait()
    assert np.all(t == sum(range(pg.size())))


@several
def test_an_error_on_a_sub_communicator_stays_there():
    """A mismatch on one half is raised on that half; the other half, a
    disjoint communicator, keeps working meanwhile."""
    half = WORLD.Split(WORLD.rank % 2, WORLD.rank)
    sub = mpicoll.Comm(half, check=True)
    x, y = np.ones(3), np.empty(3)
    if WORLD.rank % 2 == 0 and sub.size > 1:
        odd = sub.rank == sub.size - 1
        with pytest.raises(errors.CollectiveCheckError, match="op differs"):
            sub.Allreduce(x, y, MPI.MAX if odd else MPI.SUM)
    else:
        for _ in range(20):
            sub.Allreduce(x, y, MPI.SUM, algorithm="ring")
        assert np.all(y == sub.size)
    sub.Allreduce(x, y, MPI.SUM)
    assert np.all(y == sub.size)
    sub.Free()


@several
def test_split_communicators_inherit_check_mode(comm):
    sub = comm.split(comm.rank % 2, comm.rank)
    assert type(sub).guarded and sub._settings.guard.check
    sub.Free()
    assert not mpicoll.Comm(WORLD, check=False)._settings.guard.check


@several
@pytest.mark.parametrize("algorithm", ["native", "ring"])
def test_replayed_calls_are_checked(comm, algorithm):
    """Repeated calls are replayed in check mode, and each replay still
    makes the exchange: a rank that then changes the op (a new call, on
    the same arrays) meets its peers' replays there, and every rank
    raises."""
    x, y = np.ones(4), np.empty(4)
    for _ in range(5):
        comm.Allreduce(x, y, MPI.SUM, algorithm=algorithm)
    assert comm._engine._replays  # kept, checked at each replay
    odd = comm.rank == comm.size - 1
    text = agreed_error(lambda: comm.Allreduce(
        x, y, MPI.MAX if odd else MPI.SUM, algorithm=algorithm))
    assert "op differs" in text
    comm.Allreduce(x, y, MPI.SUM, algorithm=algorithm)  # still in step
    assert np.all(y == comm.size)


@several
@pytest.mark.parametrize("algorithm", ["native", "ring"])
def test_repeated_nonblocking_calls_are_checked(comm, algorithm):
    """Nonblocking calls are not replayed in check mode (a relaunch could
    decline after its check): each repeat is checked in full."""
    x, y = np.ones(4), np.empty(4)
    for _ in range(3):
        comm.Iallreduce(x, y, MPI.SUM, algorithm=algorithm).wait()
    assert not comm._engine._restarts
    odd = comm.rank == comm.size - 1
    text = agreed_error(lambda: comm.Iallreduce(
        x, y, MPI.MAX if odd else MPI.SUM, algorithm=algorithm).wait())
    assert "op differs" in text


@several
def test_mpi4py_made_children_keep_check_mode(comm):
    """A communicator made the mpi4py way (``Split``) is checked as its
    parent: a count that differs raises on every rank, not MPI's abort."""
    sub = comm.Split(0, comm.size - comm.rank)  # every rank, reversed
    assert type(sub).guarded and isinstance(sub, mpicoll.Comm)
    n = 4 if sub.rank == 0 else 5
    text = agreed_error(lambda: sub.Allreduce(np.ones(n), np.empty(n),
                                              MPI.SUM))
    assert "count differs" in text
    sub.Free()


def test_verdicts_read_well():
    """The diff text itself (no MPI needed beyond the module)."""
    assert spans([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"
    assert said(["'sum'", "'max'", "'sum'"], str) == \
        "'max' on rank 1; 'sum' on ranks 0, 2"
    rows = [(4, {"collective": "allreduce", "op": "sum"}, None),
            (4, {"collective": "allreduce", "op": "max"}, None)]
    assert describe(rows) == \
        "call #4: op differs: 'sum' on rank 0; 'max' on rank 1"
    rows[1] = (5, rows[1][1], None)
    assert describe(rows) == \
        "the ranks are at different calls: #4 on rank 0; #5 on rank 1"
    rows = [(4, {"collective": "bcast", "root": 0}, None),
            (4, {"collective": "allreduce", "op": "sum"}, None)]
    assert describe(rows) == ("call #4: collective differs: 'bcast' on "
                              "rank 0; 'allreduce' on rank 1")


def test_bad_settings_fail_at_creation(monkeypatch):
    with pytest.raises(errors.InvalidArgumentError, match="number of sec"):
        mpicoll.Comm(WORLD, timeout=-1)
    with pytest.raises(errors.InvalidArgumentError, match="on_timeout"):
        mpicoll.Comm(WORLD, timeout=5, on_timeout="ignore")
    monkeypatch.setenv("MPICOLL_TIMEOUT", "soon")
    with pytest.raises(errors.InvalidArgumentError, match="MPICOLL_TIMEOUT"):
        mpicoll.Comm(WORLD)


def test_the_default_deadline_and_how_to_turn_it_off(monkeypatch):
    """600 s by default, kept by the watch thread (no guarded class, calls
    replayed); 0 turns it off, from the keyword or the environment."""
    monkeypatch.delenv("MPICOLL_TIMEOUT", raising=False)
    monkeypatch.delenv("MPICOLL_ON_TIMEOUT", raising=False)
    guard = mpicoll.Comm(WORLD)._settings.guard
    assert guard.timeout == 600.0 and guard.watched and not guard.polled
    assert mpicoll.Comm(WORLD, timeout=0)._settings.guard.timeout is None
    monkeypatch.setenv("MPICOLL_TIMEOUT", "0")
    assert mpicoll.Comm(WORLD)._settings.guard.timeout is None
    raised = mpicoll.Comm(WORLD, timeout=5, on_timeout="raise")
    assert raised._settings.guard.polled
