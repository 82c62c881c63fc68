"""Tier 2: repeated nonblocking and persistent calls against mpi4py.

A repeated ``I*`` call on the very same objects is relaunched without
parsing (:meth:`mpicoll.engine.replay.Replays.restarted`; its handle a
:class:`mpicoll.engine.work.RequestWork` when native), and a persistent
hand-built call of one short round runs on a
:class:`mpicoll.engine.executor.ShortRound`, not the generic executor. Each
case here repeats calls on the same objects inside one run (so every call
after the first takes the fast path) and is compared by
``tests/compat.py``'s harness with the raw mpi4py communicator on the
same arguments: results after the buffers change contents, what the
request's ``Wait``/``Test`` return, and exceptions; and calls that differ
in one argument (op, root, roles, in place, dtype) on the same objects
must not be taken for the earlier call.
"""

from __future__ import annotations

import weakref
from functools import partial

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll

pytestmark = pytest.mark.mpi


def ids(rank: int, n: int, k: int = 0, dtype="i8") -> np.ndarray:
    """Values unique per (rank, index, k), exact under any reduction."""
    return (rank * 1000 + np.arange(n) + 1 + k * 100).astype(dtype)


def test_repeated_nonblocking_calls_follow_the_new_contents(h):
    def allreduce(c):
        x, y = ids(c.rank, 5), np.zeros(5, "i8")
        out = []
        for k in range(4):
            x[...] = ids(c.rank, 5, k)
            req = c.comm.Iallreduce(x, y, MPI.SUM, **c.kw)
            out += [req.Wait(), y.copy(), req.Test(), req.Wait()]
        return out
    h.check("Iallreduce x4 on the same arrays", allreduce, "allreduce")

    def earlier_request(c):
        x, y = ids(c.rank, 5), np.zeros(5, "i8")
        first = c.comm.Iallreduce(x, y, MPI.SUM, **c.kw)
        first.Wait()
        x[...] = ids(c.rank, 5, 1)
        second = c.comm.Iallreduce(x, y, MPI.SUM, **c.kw)  # in flight
        out = [first.Test()]
        second.Wait()
        return [*out, first.Test(), first.Wait(), second.Test(), y]
    h.check("a completed request, after the same call again", earlier_request,
            "allreduce")

    def bcast(c):
        b = np.zeros(4, "i8")
        out = []
        for k in range(3):
            b[...] = ids(c.rank, 4, k)
            req = c.comm.Ibcast(b, 0, **c.kw)
            while not req.Test():
                pass
            out += [b.copy(), req.Test()]
        return out
    h.check("Ibcast x3, Test until done", bcast, "bcast")

    def barrier(c):
        reqs = [c.comm.Ibarrier(**c.kw) for _ in range(3)]  # all in flight
        for req in reversed(reqs):
            req.Wait()
        return [req.Test() for req in reqs]
    h.check("Ibarrier x3 in flight at once", barrier, "barrier")
    h.finish()


def test_repeated_nonblocking_calls_with_other_arguments(h):
    """The same objects with one argument changed are another call."""
    def allreduce(c):
        x, y = ids(c.rank, 6), np.zeros(6, "i8")
        out = []
        for op in (MPI.SUM, MPI.MAX, MPI.SUM, MPI.PROD, MPI.MIN):
            c.comm.Iallreduce(x, y, op, **c.kw).Wait()
            out.append(y.copy())
        c.comm.Iallreduce(y, x, MPI.SUM, **c.kw).Wait()  # roles swapped
        out += [x.copy(), y.copy()]
        c.comm.Iallreduce(MPI.IN_PLACE, x, MPI.SUM, **c.kw).Wait()
        out.append(x.copy())
        c.comm.Iallreduce(x, y, MPI.SUM, **c.kw).Wait()  # the first again
        out.append(y.copy())
        return out
    h.check("Iallreduce: op, roles, in place changed", allreduce,
            "allreduce")

    def reduce(c):
        x, y = ids(c.rank, 3), np.zeros(3, "i8")
        out = []
        for root in (0, c.size - 1, 0, c.size // 2):
            y[...] = -1
            c.comm.Ireduce(x, y, MPI.SUM, root, **c.kw).Wait()
            out.append(y.copy() if c.rank == root else None)
        return out
    h.check("Ireduce: root changed", reduce, "reduce")

    def bcast(c):
        b = np.zeros(4, "i8")
        out = []
        for root in (0, c.size - 1, 0):
            b[...] = ids(c.rank, 4)
            c.comm.Ibcast(b, root, **c.kw).Wait()
            out.append(b.copy())
        return out
    h.check("Ibcast: root changed", bcast, "bcast")

    def dtype(c):
        x, y = ids(c.rank, 4), np.zeros(4, "i8")
        c.comm.Iallreduce(x, y, MPI.MAX, **c.kw).Wait()
        out = [y.copy()]
        x.dtype = y.dtype = np.int32  # the same memory, twice the elements
        x[...] = np.where(np.arange(8) % 2 == 0, c.rank, c.size - c.rank)
        c.comm.Iallreduce(x, y, MPI.MAX, **c.kw).Wait()
        return [*out, y.copy()]
    h.check("Iallreduce: dtype reassigned in place", dtype, "allreduce")
    h.finish()


def test_repeated_nonblocking_calls_raise_as_mpi4py(h):
    """A call that was good, made again once its arguments went bad,
    raises what mpi4py raises (on every rank, before any message)."""
    def wrong_size(c):
        x, y = ids(c.rank, 4), np.zeros(4, "i8")
        c.comm.Iallreduce(x, y, MPI.SUM, **c.kw).Wait()
        c.comm.Iallreduce(x, y[:3], MPI.SUM, **c.kw).Wait()
    h.check("Iallreduce again, recvbuf too short", wrong_size, "allreduce")

    def bad_op(c):
        x, y = np.ones(4), np.zeros(4)
        c.comm.Iallreduce(x, y, MPI.SUM, **c.kw).Wait()
        c.comm.Iallreduce(x, y, MPI.BAND, **c.kw).Wait()
    h.check("Iallreduce again, BAND on floats", bad_op, "allreduce")
    h.finish()


def test_repeated_persistent_starts(h):
    """A prepared call started again and again on new contents (one
    round at two ranks: the short-round path), the request's answers when
    inactive, waitall, and use after Free."""
    def allreduce(c):
        x, y = ids(c.rank, 5), np.zeros(5, "i8")
        req = c.comm.Allreduce_init(x, y, MPI.SUM, **c.kw)
        out = [req.Test(), req.Wait()]  # inactive: complete at once
        for k in range(4):
            x[...] = ids(c.rank, 5, k)
            req.Start()
            if k % 2:
                while not req.Test():
                    pass
            elif isinstance(req, MPI.Request):
                MPI.Request.Waitall([req])
            else:
                mpicoll.waitall([req])
            out += [y.copy(), req.Test(), req.Wait()]
        req.Free()
        return out
    h.check("Allreduce_init: Start x4, Wait/Test/waitall", allreduce,
            "allreduce")

    def in_place(c):
        y = ids(c.rank, 3)
        req = c.comm.Allreduce_init(MPI.IN_PLACE, y, MPI.MAX, **c.kw)
        out = []
        for k in range(3):
            y[...] = ids(c.size - 1 - c.rank, 3, k)
            req.Start()
            req.Wait()
            out.append(y.copy())
        req.Free()
        return out
    h.check("Allreduce_init in place: Start x3", in_place, "allreduce")

    def start_after_free(c):
        x, y = ids(c.rank, 2), np.zeros(2, "i8")
        req = c.comm.Allreduce_init(x, y, MPI.SUM, **c.kw)
        req.Start()
        req.Wait()
        req.Free()
        req.Start()
    h.check("Allreduce_init: Start after Free", start_after_free,
            "allreduce")
    h.finish()


def test_an_error_in_a_one_round_persistent_call(comm):
    """A user op that raises in a prepared call's reduction: Wait raises
    it, and so does every later Wait/Test (the request stays active), on
    every rank (all of them reduce in the first round at a power of two;
    elsewhere some would wait for a rank that raised); a new request then
    runs as usual."""
    if comm.size & (comm.size - 1):
        pytest.skip("a rank that does not reduce would wait forever")
    def broken(a, b):
        raise ArithmeticError("broken op")

    op = mpicoll.Op.from_callable(broken, commute=True)
    x = np.ones(4)
    req = mpicoll.ProcessGroup(comm).prepare("all_reduce", x, op,
                                             algorithm="recursive_doubling")
    req.Start()
    if comm.size > 1:  # one rank: a copy, no reduction
        for again in (req.Wait, req.Wait, req.Test):
            with pytest.raises(ArithmeticError, match="broken op"):
                again()
    else:
        req.Wait()
        req.Free()
    good = comm.Allreduce_init(MPI.IN_PLACE, x, MPI.SUM,
                               algorithm="recursive_doubling")
    for _ in range(2):
        x[...] = 1
        good.Start()
        good.Wait()
        assert np.all(x == comm.size)
    good.Free()


def test_a_timed_wait_on_a_prepared_call_names_the_missing_peers(comm):
    """Rank 0 starts a prepared recursive doubling (one round at two
    ranks: the short-round path) while the others hold back: its timed wait
    raises, naming what is pending, and the request completes later."""
    if comm.size == 1:
        pytest.skip("no peer to wait for")
    x = np.ones(4)
    req = comm.Allreduce_init(MPI.IN_PLACE, x, MPI.SUM,
                              algorithm="recursive_doubling")
    if comm.rank == 0:
        req.Start()
        with pytest.raises(mpicoll.CollectiveTimeoutError) as info:
            req.wait(timeout=0.2)
        assert "receive from rank" in str(info.value), info.value
        assert info.value.pending
        MPI.Intracomm(comm).Barrier()
    else:
        MPI.Intracomm(comm).Barrier()
        req.Start()
    req.wait(timeout=60)
    assert np.all(x == comm.size)
    assert req.Test() and req.Wait()
    req.Free()


def test_blocking_calls_on_new_arrays_alike_to_earlier_ones(h):
    """A blocking call on *new* arrays alike to an earlier call's (same
    dtype and shape, plain, contiguous, writeable) skips the parse: a
    native one makes the library's call at once, a hand-built one binds
    its plan again to the new arrays (mpicoll.engine.rebind). Results
    follow the new arrays (1-D and 2-D, in place and not), against the
    raw communicator, for every algorithm of each collective."""
    def fresh(c, k, shape):
        return ids(c.rank, int(np.prod(shape)), k).reshape(shape)

    # collective -> (input shape, output shape, the call's other arguments)
    calls = {
        "Allreduce": ((2, 3), (2, 3), (MPI.SUM,)),
        "Reduce": ((6,), (6,), (MPI.SUM, 0)),
        "Allgather": ((6,), lambda p: (p, 6), ()),
        "Reduce_scatter_block": (lambda p: (2 * p,), (2,), (MPI.SUM,)),
        "Alltoall": (lambda p: (2 * p,), lambda p: (2 * p,), ()),
        "Scan": ((6,), (6,), (MPI.SUM,)),
    }
    for name, (ins, outs, rest) in calls.items():
        def case(c, name=name, ins=ins, outs=outs, rest=rest):
            out = []
            for k in range(4):
                y = np.zeros(outs(c.size) if callable(outs) else outs, "i8")
                c(name, fresh(c, k, ins(c.size) if callable(ins) else ins),
                  y, *rest)
                out.append(y)
            if name == "Allreduce":  # in place, 1-D
                for k in range(3):
                    z = fresh(c, k, (6,))
                    c(name, MPI.IN_PLACE, z, MPI.MAX)
                    out.append(z)
            return out
        h.check(f"{name} on new arrays", case, name.lower())

    def bcast(c):
        out = []
        for k in range(4):
            b = fresh(c, k, (3, 2))
            c("Bcast", b, c.size - 1)
            out.append(b)
        return out
    h.check("Bcast on new arrays", bcast, "bcast")
    h.finish()


@pytest.mark.parametrize("algorithm", ["auto", "ring", "recursive_doubling",
                                       "rabenseifner"])
def test_calls_unlike_an_earlier_one_take_the_full_path(comm, algorithm):
    """After hand-built calls on new arrays were kept by their likeness, a
    call that differs in what the parse checks (overlapping, read-only or
    strided output, the same array twice, another dtype, op or size) gives
    what a communicator that never saw the earlier calls gives (the native
    twin is tests/mpi/test_collectives_mpi.py's)."""
    world = MPI.Intracomm(comm)
    fresh = mpicoll.Comm(world.Dup())  # its own engine: nothing kept
    r = comm.rank
    for k in range(3):  # kept by likeness, then made alike
        y = np.zeros(4, "i8")
        comm.Allreduce(ids(r, 4, k), y, MPI.SUM, algorithm=algorithm)
        assert np.array_equal(y, world.allreduce(ids(r, 4, k)))
    keep = np.zeros(8, "i8")
    ro = np.zeros(4, "i8")
    ro.flags.writeable = False
    strided = np.zeros(8, "i8")[::2]
    cases = [(keep[:4], keep[2:6], MPI.SUM), (ids(r, 4), ro, MPI.SUM),
             (keep[:4], keep[:4], MPI.SUM), (ids(r, 4), strided, MPI.SUM),
             (ids(r, 4, dtype="i4"), np.zeros(4, "i4"), MPI.SUM),
             (ids(r, 4), np.zeros(4, "i8"), MPI.PROD),
             (ids(r, 4), np.zeros(3, "i8"), MPI.SUM)]
    for i, (x, y, op) in enumerate(cases):
        mine = allreduce_outcome(comm, x, y, op, algorithm), y.copy()
        theirs = allreduce_outcome(fresh, x, y, op, algorithm), y.copy()
        assert mine[0] == theirs[0] and np.array_equal(mine[1], theirs[1]), \
            (i, mine, theirs)
    fresh.Free()


def allreduce_outcome(comm, x, y, op, algorithm):
    """("ok", None), or the exception's type and text."""
    try:
        comm.Allreduce(x, y, op, algorithm=algorithm)
    except Exception as exc:  # compared, not judged
        return type(exc).__name__, str(exc)
    return "ok", None


def test_a_kept_alike_call_beside_a_nonblocking_one_in_flight(comm):
    """The plan a hand-built alike call binds again has scratch of its
    own: running it while a nonblocking call of the same algorithm on the
    arrays of the earlier call is in flight (whose cached plan owns the
    other scratch) gives both right results."""
    p, r = comm.size, comm.rank
    n = 1 << 14
    want = p * (p - 1) / 2
    x, y = np.full(n, float(r)), np.zeros(n)
    comm.Allreduce(x, y, algorithm="ring")  # plan cached for x, y
    comm.Allreduce(np.full(n, float(r)), np.zeros(n), algorithm="ring")
    work = comm.Iallreduce(x, y, algorithm="ring")
    z = np.zeros(n)
    comm.Allreduce(np.full(n, float(r)), z, algorithm="ring")  # alike
    work.Wait()
    assert np.all(y == want) and np.all(z == want)


def test_calls_of_two_algorithms_on_the_same_arrays_keep_an_entry_each(comm):
    """Two algorithms (and two collectives) called in turn on the same
    arrays each keep their own replay entry (mpicoll.engine.replay), so
    neither runs by its likeness every time after the other took its
    place."""
    if comm._settings.guard.timeout is not None:
        pytest.skip("a deadline: nothing is replayed")
    x, y = np.ones(4), np.zeros(4)
    for _ in range(3):
        for algorithm in ("ring", "recursive_doubling", "native"):
            comm.Allreduce(x, y, MPI.SUM, algorithm=algorithm)
            assert np.all(y == comm.size)
        comm.Reduce(x, y, MPI.SUM, 0, algorithm="native")
    kept = {(e[4], e[5]) for e in comm._engine._replays.values()
            if e[0] is y and e[1] is x}
    assert kept == {("Allreduce", "ring"), ("Allreduce", "recursive_doubling"),
                    ("Allreduce", "native"), ("Reduce", "native")}


@pytest.mark.parametrize("algorithm", ["native", "ring"])
def test_arrays_that_come_again_after_alike_calls(comm, algorithm):
    """Arrays first met when their kind was already kept by likeness (so
    they run by likeness, not from a replay entry of their own), used
    again with new contents and after other new arrays came in between:
    every result follows the arrays' current contents."""
    r, world = comm.rank, MPI.Intracomm(comm)
    comm.Allreduce(ids(r, 4), np.zeros(4, "i8"), MPI.SUM,
                   algorithm=algorithm)  # the kind kept
    x, y = ids(r, 4), np.zeros(4, "i8")
    for k in range(4):
        x[...] = ids(r, 4, k)
        comm.Allreduce(x, y, MPI.SUM, algorithm=algorithm)
        assert np.array_equal(y, world.allreduce(ids(r, 4, k)))
        if k == 2:  # others in between
            z = np.zeros(4, "i8")
            comm.Allreduce(ids(r, 4, 9), z, MPI.SUM, algorithm=algorithm)
            assert np.array_equal(z, world.allreduce(ids(r, 4, 9)))


@pytest.mark.parametrize("algorithm", ["native", "ring"])
def test_pairs_of_arrays_used_in_turn_are_kept(comm, algorithm):
    """Twelve pairs of arrays used in turn (buckets of one size), made one
    after another: the later eleven, alike to the first, run by their
    likeness. A hand-built call's pairs, when the very same arrays come
    again among the kind's recent calls, take the full path and are kept
    for replay, each under its own entry (mpicoll.engine.replay: keyed by
    the pair of ids; with their XOR, pairs of nearby arrays took each
    other's entry); a native call's go on running by their likeness (the
    library's call on them, no rebinding to save). Arrays made anew for
    each call are never kept: once the caller drops them, nothing of
    mpicoll holds them."""
    if comm._settings.guard.on:
        pytest.skip("check mode or a deadline: nothing runs by likeness")
    r, world = comm.rank, MPI.Intracomm(comm)
    pairs = [(ids(r, 6), np.zeros(6, "i8")) for _ in range(12)]
    for k in range(3):
        for x, y in pairs:
            x[...] = ids(r, 6, k)
            comm.Allreduce(x, y, MPI.SUM, algorithm=algorithm)
            assert np.array_equal(y, world.allreduce(ids(r, 6, k)))
    kept = [(e[0], e[1]) for e in comm._engine._replays.values()
            if e[4] == "Allreduce" and e[5] == algorithm]
    if algorithm != "native":
        for x, y in pairs:
            assert any(a is y and b is x for a, b in kept), "a pair not kept"
    dropped = []
    for k in range(3):  # new arrays every call
        x, y = ids(r, 6, k), np.zeros(6, "i8")
        comm.Allreduce(x, y, MPI.SUM, algorithm=algorithm)
        assert np.array_equal(y, world.allreduce(ids(r, 6, k)))
        dropped.append((weakref.ref(x), weakref.ref(y)))
        del x, y
    assert all(ref() is None for pair in dropped for ref in pair), \
        "arrays run by their likeness are held"


def test_counts_in_arrays_changed_between_calls(h):
    """Counts and displacements held in NumPy arrays are read anew on
    every call: the same message spec with its count arrays changed in
    place, and a new spec whose count arrays have the shape of the last
    one's but other values, are not taken for the earlier call (neither
    by replay nor by likeness), for every algorithm, against the raw
    communicator."""
    def layout(p, k):
        counts = np.array([1 + (j + k) % 3 for j in range(p)])
        return counts, np.concatenate(([0], np.cumsum(counts)[:-1]))

    def allgatherv(c, *, new_spec):
        p, me = c.size, c.rank
        r = np.zeros(3 * p, "i8")
        counts, displs = layout(p, 0)
        spec = [r, (counts, displs), MPI.INT64_T]
        out = []
        for k in range(4):
            if new_spec:
                counts, displs = layout(p, k)
                spec = [r, (counts, displs), MPI.INT64_T]
            else:
                counts[:], displs[:] = layout(p, k)
            r[:] = 0
            r[displs[me]:displs[me] + counts[me]] = ids(me, counts[me], k)
            c("Allgatherv", MPI.IN_PLACE, spec)
            out.append(r.copy())
        return out
    h.check("Allgatherv, count arrays changed in place",
            partial(allgatherv, new_spec=False), "allgatherv")
    h.check("Allgatherv, new count arrays alike to the last",
            partial(allgatherv, new_spec=True), "allgatherv")

    def alltoallv(c):
        p, me = c.size, c.rank
        s, r = ids(me, 3 * p), np.zeros(3 * p, "i8")
        sc, sd = layout(p, me)
        rc, rd = layout(p, 0)
        send, recv = [s, (sc, sd), MPI.INT64_T], [r, (rc, rd), MPI.INT64_T]
        out = []
        for k in range(4):  # i sends 1 + (i + k + j) % 3 to j
            sc[:], sd[:] = layout(p, me + k)
            rc[:] = [1 + (i + k + me) % 3 for i in range(p)]
            rd[:] = np.concatenate(([0], np.cumsum(rc)[:-1]))
            r[:] = 0
            c("Alltoallv", send, recv)
            out.append(r.copy())
        return out
    h.check("Alltoallv, count arrays changed in place", alltoallv,
            "alltoallv")

    def gatherv(c):
        p, me = c.size, c.rank
        s, r = ids(me, 3), np.zeros(3 * p, "i8")
        counts, displs = layout(p, 0)
        send, recv = [s, 1, MPI.INT64_T], [r, (counts, displs), MPI.INT64_T]
        out = []
        for k in range(4):
            counts[:], displs[:] = layout(p, k)
            send[1] = int(counts[me])
            r[:] = 0
            c("Gatherv", send, recv, 0)
            out.append(r.copy())
        return out
    h.check("Gatherv, count arrays changed in place", gatherv, "gatherv")

    def scatterv(c):
        p, me = c.size, c.rank
        s, r = ids(me, 3 * p), np.zeros(3, "i8")
        counts, displs = layout(p, 0)
        send, recv = [s, (counts, displs), MPI.INT64_T], [r, 1, MPI.INT64_T]
        out = []
        for k in range(4):
            counts[:], displs[:] = layout(p, k)
            recv[1] = int(counts[me])
            r[:] = 0
            c("Scatterv", send, recv, 0)
            out.append(r.copy())
        return out
    h.check("Scatterv, count arrays changed in place", scatterv, "scatterv")
    h.finish()


@pytest.mark.parametrize("fresh", [False, True], ids=["same", "alike"])
@pytest.mark.parametrize("algorithm", ["auto", *mpicoll.algorithms("alltoallv")])
def test_kept_alltoallv_meets_counts_changed_elsewhere(comm, algorithm, fresh):
    """A kept Alltoallv exchanges its counts again before each replay, and
    before each call on new objects alike to it (mpicoll.engine.agreeing):
    where another rank's counts changed while this rank's call did not,
    this rank's kept call is declined and its full path reads the rows
    already gathered. Counts that now disagree raise the same error on
    every rank; counts changed consistently by other ranks give mpi4py's
    result; the kept call runs again after."""
    world, p, me = MPI.Intracomm(comm), comm.size, comm.rank
    r = np.zeros(4 * p, "i8")

    def specs(sc, rc):
        sd, rd = ([sum(c[:j]) for j in range(p)] for c in (sc, rc))
        return [ids(me, 4 * p), (list(sc), sd), MPI.INT64_T], \
            [r, (list(rc), rd), MPI.INT64_T]

    def expect(send, recv):
        got = r.copy()
        r[:] = 0
        world.Alltoallv(send, recv)
        assert np.array_equal(got, r)

    first = specs([2] * p, [2] * p)

    def kept():
        return specs([2] * p, [2] * p) if fresh else first

    for _ in range(3):  # the full path, then replays or alike calls
        now = kept()
        r[:] = 0
        comm.Alltoallv(*now, algorithm=algorithm)
        expect(*now)
    last = p - 1
    if me == last and p > 1:  # sends rank 0 one more than it expects
        send, _ = specs([3] + [2] * (p - 1), [2] * p)
        with pytest.raises(mpicoll.InvalidArgumentError,
                           match="counts disagree"):
            comm.Alltoallv(send, kept()[1], algorithm=algorithm)
    elif p > 1:
        with pytest.raises(mpicoll.InvalidArgumentError,
                           match="counts disagree"):
            comm.Alltoallv(*kept(), algorithm=algorithm)
    if p > 2:  # ranks 1 and 2 move one more to each other; rank 0 as kept
        now = kept()
        if me in (1, 2):
            more = [3 if q == 3 - me else 2 for q in range(p)]
            now = specs(more, more)
        r[:] = 0
        comm.Alltoallv(*now, algorithm=algorithm)
        expect(*now)
    now = kept()
    r[:] = 0
    comm.Alltoallv(*now, algorithm=algorithm)
    expect(*now)
