"""The device path on every collective, against the host path.

Device arrays here are :mod:`mpicoll.device.hostmodel`'s: host memory that
mpicoll runs through its whole CUDA path (communication stream, events,
fences, pinned mirrors, staged copies), on streams whose work takes effect
only once observed complete, so a missing fence is a wrong answer. Every
call, both faces, native and every hand-built algorithm, blocking and
nonblocking, CUDA-aware and staged, must give bitwise the host result
(itself checked against native MPI in test_collectives_mpi and
test_primitives_mpi).
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from mpicoll.device import hostmodel
import mpicoll
from mpicoll import ProcessGroup as PG
import mpicoll.device.steps
import mpicoll.engine.device_calls
import mpicoll.engine.progress
from mpidata import values

pytestmark = [pytest.mark.mpi, pytest.mark.interface]
LATE = hostmodel.Latencies(copy=2e-4, kernel=2e-4)
N = 13  # elements per rank: odd, so blocks split unevenly


@pytest.fixture(scope="module")
def runtime():
    # Device work late enough that the host reaches its next step first:
    # a result read without waiting for it is stale.
    yield hostmodel.install(LATE)
    hostmodel.uninstall()


@pytest.fixture(scope="module")
def comm():
    return mpicoll.Comm(MPI.COMM_WORLD)


@pytest.fixture(params=["aware", "staged"])
def mode(request, monkeypatch):
    monkeypatch.setenv("MPICOLL_CUDA_AWARE",
                       "1" if request.param == "aware" else "0")
    return request.param


def invoke(comm, name, nonblocking, *args, **kwargs):
    """``comm.name(*args)`` (``comm`` a ProcessGroup for the lowercase,
    torch-style names), its nonblocking form waited on, or (``nonblocking
    == "persistent"``) its persistent form started once (restarts:
    test_persistent_restarts_on_device_arrays)."""
    if nonblocking == "persistent":
        if name[0].isupper():
            request = getattr(comm, name + "_init")(*args, **kwargs)
        else:
            request = comm.prepare(name, *args, **kwargs)
        request.Start()
        request.Wait()
        request.Free()
        return None
    if not nonblocking:
        return getattr(comm, name)(*args, **kwargs)
    if name[0].isupper():
        work = getattr(comm, "I" + name[0].lower() + name[1:])(*args,
                                                               **kwargs)
    else:
        work = getattr(comm, name)(*args, async_op=True, **kwargs)
    work.wait()
    return None


def rows(a, p):
    """``p`` equal blocks of flat array ``a``, as views: the list a
    ProcessGroup's gather fills and its scatter sends."""
    n = a.size // p
    return [a[q * n:(q + 1) * n] for q in range(p)]


CASES = {}  # name -> (collective whose algorithms apply, run)


def case(name, collective):
    def register(run):
        CASES[name] = (collective, run)
        return run
    return register


def uneven(p):
    return [N + q % 3 for q in range(p)]


@case("Allreduce", "allreduce")
def _allreduce(c, new, alg, nb):
    out = new(np.zeros(N))
    invoke(c, "Allreduce", nb, new(values(c.rank, N, "float64")), out,
           MPI.SUM, algorithm=alg)
    inplace = new(values(c.rank, N, "int32"))
    invoke(c, "Allreduce", nb, MPI.IN_PLACE, inplace, MPI.MAX,
           algorithm=alg)
    return out, inplace


@case("all_reduce", "allreduce")
def _all_reduce(c, new, alg, nb):
    x = new(values(c.rank, N, "complex128"))
    invoke(PG(c), "all_reduce", nb, x, "prod", algorithm=alg)
    return (x,)


@case("Reduce", "reduce")
def _reduce(c, new, alg, nb):
    root = c.size - 1
    out = new(np.zeros(N, np.int64))
    invoke(c, "Reduce", nb, new(values(c.rank, N, "int64")), out, MPI.SUM,
           root, algorithm=alg)
    x = new(values(c.rank, N, "float32"))
    invoke(PG(c), "reduce", nb, x, 0, "min", algorithm=alg)
    return out, x


@case("Bcast", "bcast")
def _bcast(c, new, alg, nb):
    x = new(values(c.rank, N, "float64"))
    invoke(c, "Bcast", nb, x, c.size // 2, algorithm=alg)
    y = new(values(c.rank, N, "uint8"))
    invoke(PG(c), "broadcast", nb, y, 0, algorithm=alg)
    return x, y


@case("Allgather", "allgather")
def _allgather(c, new, alg, nb):
    out = new(np.zeros(N * c.size))
    invoke(c, "Allgather", nb, new(values(c.rank, N, "float64")), out,
           algorithm=alg)
    inplace = new(values(c.rank, N * c.size, "int16"))
    invoke(c, "Allgather", nb, MPI.IN_PLACE, inplace, algorithm=alg)
    face = new(np.zeros(N * c.size, np.int32))
    invoke(PG(c), "all_gather_into_tensor", nb, face,
           new(values(c.rank, N, "int32")), algorithm=alg)
    return out, inplace, face


@case("Gather", "gather")
def _gather(c, new, alg, nb):
    out = new(np.zeros(N * c.size))
    invoke(c, "Gather", nb, new(values(c.rank, N, "float64")), out, 0,
           algorithm=alg)
    face = new(np.zeros(N * c.size, np.int32))
    root = c.size - 1
    invoke(PG(c), "gather", nb, new(values(c.rank, N, "int32")),
           rows(face, c.size) if c.rank == root else None, root,
           algorithm=alg)
    return out, face


@case("Scatter", "scatter")
def _scatter(c, new, alg, nb):
    out = new(np.zeros(N))
    invoke(c, "Scatter", nb, new(values(c.rank, N * c.size, "float64")),
           out, 0, algorithm=alg)
    face = new(np.zeros(N, np.int32))
    root = c.size - 1
    parts = rows(new(values(c.rank, N * c.size, "int32")), c.size)
    invoke(PG(c), "scatter", nb, face, parts if c.rank == root else None,
           root, algorithm=alg)
    return out, face


@case("Allgatherv", "allgatherv")
def _allgatherv(c, new, alg, nb):
    counts = uneven(c.size)
    out = new(np.zeros(sum(counts)))
    invoke(c, "Allgatherv", nb, new(values(c.rank, counts[c.rank],
                                           "float64")), [out, counts],
           algorithm=alg)
    outs = [new(np.zeros(n, np.int32)) for n in counts]
    invoke(PG(c), "all_gather", nb, outs,
           new(values(c.rank, counts[c.rank], "int32")), algorithm=alg)
    return (out, *outs)


@case("Gatherv", "gatherv")
def _gatherv(c, new, alg, nb):
    counts = uneven(c.size)
    out = new(np.zeros(sum(counts)))
    invoke(c, "Gatherv", nb, new(values(c.rank, counts[c.rank], "float64")),
           [out, counts], 0, algorithm=alg)
    return (out,)


@case("Scatterv", "scatterv")
def _scatterv(c, new, alg, nb):
    counts = uneven(c.size)
    out = new(np.zeros(counts[c.rank]))
    invoke(c, "Scatterv", nb, [new(values(c.rank, sum(counts), "float64")),
                               counts], out, 0, algorithm=alg)
    return (out,)


@case("Alltoall", "alltoall")
def _alltoall(c, new, alg, nb):
    out = new(np.zeros(N * c.size))
    invoke(c, "Alltoall", nb, new(values(c.rank, N * c.size, "float64")),
           out, algorithm=alg)
    inplace = new(values(c.rank, N * c.size, "int64"))
    invoke(c, "Alltoall", nb, MPI.IN_PLACE, inplace, algorithm=alg)
    face = new(np.zeros(N * c.size, np.int32))
    invoke(PG(c), "all_to_all_single", nb, face,
           new(values(c.rank, N * c.size, "int32")), algorithm=alg)
    return out, inplace, face


@case("Alltoallv", "alltoallv")
def _alltoallv(c, new, alg, nb):
    p, r = c.size, c.rank
    scounts = [(r + q) % 3 + 1 for q in range(p)]
    rcounts = [(q + r) % 3 + 1 for q in range(p)]
    out = new(np.zeros(sum(rcounts)))
    invoke(c, "Alltoallv", nb, [new(values(r, sum(scounts), "float64")),
                                scounts], [out, rcounts], algorithm=alg)
    face = new(np.zeros(sum(rcounts)))
    invoke(PG(c), "all_to_all_single", nb, face,
           new(values(r, sum(scounts), "float64")), rcounts, scounts,
           algorithm=alg)
    return out, face


def _prefix(name, face, op, dtype):
    """Scan or Exscan (rank 0's Exscan output is undefined: not compared)."""
    def run(c, new, alg, nb):
        out = new(np.zeros(N, np.int64))
        invoke(c, name, nb, new(values(c.rank, N, "int64")), out, MPI.SUM,
               algorithm=alg)
        x = new(values(c.rank, N, dtype))
        invoke(PG(c), face, nb, x, op, algorithm=alg)
        return (out if c.rank or name == "Scan" else out[:0]), x
    return run


case("Scan", "scan")(_prefix("Scan", "scan", "max", "float64"))
case("Exscan", "exscan")(_prefix("Exscan", "exscan", "bxor", "int32"))


@case("Reduce_scatter_block", "reduce_scatter_block")
def _reduce_scatter_block(c, new, alg, nb):
    out = new(np.zeros(N))
    invoke(c, "Reduce_scatter_block", nb,
           new(values(c.rank, N * c.size, "float64")), out, MPI.SUM,
           algorithm=alg)
    inplace = new(values(c.rank, N * c.size, "int32"))
    invoke(c, "Reduce_scatter_block", nb, MPI.IN_PLACE, inplace, MPI.SUM,
           algorithm=alg)
    face = new(np.zeros(N, np.int32))
    invoke(PG(c), "reduce_scatter_tensor", nb, face,
           new(values(c.rank, N * c.size, "int32")), algorithm=alg)
    return out, inplace[:N], face


@case("Reduce_scatter", "reduce_scatter")
def _reduce_scatter(c, new, alg, nb):
    counts = uneven(c.size)
    out = new(np.zeros(counts[c.rank]))
    invoke(c, "Reduce_scatter", nb, new(values(c.rank, sum(counts),
                                                "float64")), out, counts,
           MPI.SUM, algorithm=alg)
    return (out,)


def _runs():
    for name, (collective, _) in CASES.items():
        for algorithm in mpicoll.algorithms(collective):
            yield name, algorithm


def _on_host(results):
    hostmodel.NULL_STREAM.synchronize()  # the caller's stream: rule 3
    return [np.array(x.view(np.ndarray)) for x in results]


@pytest.mark.parametrize("nonblocking", [False, True, "persistent"],
                         ids=["blocking", "nonblocking", "persistent"])
@pytest.mark.parametrize(("name", "algorithm"), list(_runs()))
def test_device_arrays_give_the_host_results(runtime, comm, mode, name,
                                             algorithm, nonblocking):
    _, run = CASES[name]
    try:
        want = run(comm, np.array, algorithm, False)
    except mpicoll.ConstraintError as exc:
        pytest.skip(str(exc))
    got = _on_host(run(comm, hostmodel.device_array, algorithm,
                       nonblocking))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("algorithm", ["native",
                                       *mpicoll.algorithms("allreduce")])
def test_persistent_restarts_on_device_arrays(runtime, comm, mode, algorithm):
    """A prepared device allreduce started again and again reads the new
    input every time (device work and events anew on each start)."""
    x = hostmodel.device_array(np.zeros(N))
    y = hostmodel.device_array(np.zeros(N))
    try:
        request = comm.Allreduce_init(x, y, MPI.SUM, algorithm=algorithm)
    except mpicoll.ConstraintError as exc:
        pytest.skip(str(exc))
    for k in range(3):
        hostmodel.NULL_STREAM.synchronize()
        x.view(np.ndarray)[...] = values(comm.rank, N, "float64") + k
        request.Start()
        request.Wait()
        (got,) = _on_host([y])
        want = sum(values(q, N, "float64") + k for q in range(comm.size))
        np.testing.assert_array_equal(got, want)
    request.Free()


@pytest.mark.parametrize(("name", "algorithm", "inplace"), [
    ("Allreduce", "ring", False), ("Allgather", "ring", False),
    ("Alltoall", "pairwise", False), ("Alltoall", "hierarchical", False),
    ("Alltoall", "pairwise", True)])
def test_repeated_calls_reuse_their_plan(runtime, comm, mode, monkeypatch,
                                         name, algorithm, inplace):
    """The same device arrays again: the plan compiled for them (and its
    pinned mirrors, when staged) serves every later call, which still
    reads the new input. (Alltoall once compiled a plan per call, keyed
    on a view made anew each time, and in place on a new copy of its
    input: on an H200, fresh pinned memory made a 16 MiB hierarchical
    all-to-all ~20x slower than the others.)"""
    compiled = []

    def counting(*args, **kwargs):
        compiled.append(name)
        return compile_device(*args, **kwargs)

    compile_device = mpicoll.engine.context.compile_device
    monkeypatch.setattr(mpicoll.engine.context, "compile_device", counting)
    p, n = comm.size, N * comm.size
    x = hostmodel.device_array(np.zeros(n))
    y = hostmodel.device_array(np.zeros(n if name != "Allgather" else n * p))
    for k in range(3):
        hostmodel.NULL_STREAM.synchronize()
        mine = values(comm.rank, n, "float64") + k
        x.view(np.ndarray)[...] = mine
        if name == "Allreduce":
            comm.Allreduce(x, y, MPI.SUM, algorithm=algorithm)
            want = sum(values(q, n, "float64") + k for q in range(p))
        elif inplace:
            y.view(np.ndarray)[...] = mine
            comm.Alltoall(MPI.IN_PLACE, y, algorithm=algorithm)
            rows_of = [values(q, n, "float64") + k for q in range(p)]
            want = np.concatenate([r.reshape(p, N)[comm.rank]
                                   for r in rows_of])
        else:
            getattr(comm, name)(x, y, algorithm=algorithm)
            rows_of = [values(q, n, "float64") + k for q in range(p)]
            want = np.concatenate(rows_of) if name == "Allgather" else \
                np.concatenate([r.reshape(p, N)[comm.rank] for r in rows_of])
        (got,) = _on_host([y])
        np.testing.assert_array_equal(got, want)
    assert len(compiled) == 1


@pytest.mark.parametrize("nonblocking", [False, True],
                         ids=["blocking", "nonblocking"])
@pytest.mark.parametrize(("name", "algorithm"), [
    ("Allreduce", "native"), ("Allreduce", "ring"), ("Bcast", "native"),
    ("Bcast", "binomial"), ("Alltoall", "native"),
    ("Alltoall", "pairwise")])
def test_calls_on_the_same_arrays_are_replayed(runtime, comm, mode,
                                               monkeypatch, name, algorithm,
                                               nonblocking):
    """A device call made again on the same objects is launched without
    parsing (in check mode, blocking ones only) and still reads the new
    input, written by a kernel on the caller's stream that runs late
    (so each run must wait on the caller's stream anew), and gives the
    result on the caller's stream. A change of CUDA-awareness between
    calls takes the full path again."""
    launched = []
    real = mpicoll.engine.device_calls.DeviceLaunch.__init__

    def counted(self, *args):
        launched.append(1)
        real(self, *args)

    monkeypatch.setattr(mpicoll.engine.device_calls.DeviceLaunch,
                        "__init__", counted)
    p, xp = comm.size, runtime.xp
    n = N * p if name == "Alltoall" else N
    x = hostmodel.device_array(np.zeros(n))
    y = hostmodel.device_array(np.zeros(n))
    step = hostmodel.device_array(np.ones(n))
    prefix = "I" + name.lower() if nonblocking else name
    call = getattr(comm, prefix[0] + prefix[1:])
    args = (x, 0) if name == "Bcast" else (x, y, MPI.SUM) \
        if name == "Allreduce" else (x, y)
    for k in range(4):
        if k == 3:  # the other mode: a kept launch declines
            monkeypatch.setenv("MPICOLL_CUDA_AWARE",
                               "1" if mode == "staged" else "0")
        hostmodel.NULL_STREAM.synchronize()
        x.view(np.ndarray)[...] = values(comm.rank, n, "float64")
        for _ in range(k):
            xp.add(x, step, out=x)  # on the caller's stream, late
        request = call(*args, algorithm=algorithm)
        if nonblocking:
            request.Wait()
        rows = [values(q, n, "float64") + k for q in range(p)]
        want = rows[0] if name == "Bcast" else sum(rows) \
            if name == "Allreduce" else np.concatenate(
                [r.reshape(p, N)[comm.rank] for r in rows])
        (got,) = _on_host([x if name == "Bcast" else y])
        np.testing.assert_array_equal(got, want)
    replays = not (nonblocking and comm._settings.guard.check)
    assert len(launched) == (2 if replays else 4)


@pytest.mark.parametrize("algorithm", ["ring", "recursive_doubling",
                                       "rabenseifner", "native"])
def test_messages_cut_into_pieces(runtime, comm, mode, monkeypatch,
                                  algorithm):
    """Pieces of 64 bytes: many per message, each staged on its own."""
    monkeypatch.setattr(mpicoll.device.steps, "PIECE_BYTES", 64)
    x = values(comm.rank, 1000, "float64")
    want = x.copy()
    PG(comm).all_reduce(want, algorithm=algorithm)
    got = hostmodel.device_array(x)
    PG(comm).all_reduce(got, algorithm=algorithm)
    np.testing.assert_array_equal(_on_host([got])[0], want)


@pytest.mark.parametrize("nonblocking", [False, True],
                         ids=["blocking", "nonblocking"])
@pytest.mark.parametrize("name", ["Allreduce", "Allreduce in place",
                                  "Bcast", "Reduce", "Scan"])
def test_native_calls_staged_in_pipelined_chunks(runtime, comm, mode,
                                                 monkeypatch, name,
                                                 nonblocking):
    """An element-wise native call longer than a piece (64 bytes here)
    goes staged as one call per piece, each posted once its own copy is
    done: the same result as on the host, made again (replayed, kept
    mirrors) and made anew."""
    monkeypatch.setattr(mpicoll.device.steps, "PIECE_BYTES", 64)
    n, op = 1001, MPI.SUM
    prefix = "I" + name.split()[0].lower() if nonblocking \
        else name.split()[0]

    def call(make, k):
        x = make(values(comm.rank, n, "float64") + k)
        y = make(np.zeros(n))
        args = {"Allreduce": (x, y, op), "Allreduce in place":
                (MPI.IN_PLACE, x, op), "Bcast": (x, 0),
                "Reduce": (x, y, op, 0), "Scan": (x, y, op)}[name]
        method = getattr(comm, prefix[0] + prefix[1:])
        return x, y, method, args

    for k in range(2):
        hx, hy, method, args = call(np.array, k)
        request = method(*args, algorithm="native")
        if nonblocking:
            request.Wait()
        want = hx if name in ("Bcast", "Allreduce in place") else hy
        dx, dy, method, args = call(hostmodel.device_array, k)
        for _ in range(2):  # the second time replayed
            if name in ("Bcast", "Allreduce in place"):  # overwritten
                hostmodel.NULL_STREAM.synchronize()
                dx.view(np.ndarray)[...] = values(comm.rank, n,
                                                  "float64") + k
            request = method(*args, algorithm="native")
            if nonblocking:
                request.Wait()
            got = dx if name in ("Bcast", "Allreduce in place") else dy
            if name == "Reduce" and comm.rank != 0:
                continue
            np.testing.assert_array_equal(_on_host([got])[0], want)


def test_a_kept_call_on_another_stream_waits_for_its_last_copy_back(
        runtime, comm, monkeypatch):
    """A staged nonblocking native call made again reuses its pinned
    mirrors; when the stream it had is lent to another call in flight,
    the stream it gets first waits for its last run's end (the copy back
    from those mirrors), and the result is still right."""
    if comm.size == 1 or comm._settings.guard.check:
        pytest.skip("needs a call in flight and replays (not check mode)")
    monkeypatch.setenv("MPICOLL_CUDA_AWARE", "0")
    waits = []
    real = hostmodel.ModelStream.wait_event

    def recorded(stream, event):
        waits.append((stream, event))
        real(stream, event)

    monkeypatch.setattr(hostmodel.ModelStream, "wait_event", recorded)
    x = hostmodel.device_array(values(comm.rank, N, "float64"))
    y = hostmodel.device_array(np.zeros(N))
    first = comm.Iallreduce(x, y, MPI.SUM, algorithm="native")
    first.Wait()
    stream, end = first._device
    hostmodel.NULL_STREAM.enqueue(lambda: None, 0.2)  # keeps `other` going
    other = comm.Iallreduce(MPI.IN_PLACE, hostmodel.device_array(np.ones(N)),
                            algorithm="ring")
    assert other._device[0].stream is stream.stream
    waits.clear()
    again = comm.Iallreduce(x, y, MPI.SUM, algorithm="native")
    assert again._device[0].stream is not stream.stream
    assert (again._device[0].stream, end) in waits
    again.Wait()
    other.Wait()
    want = sum(values(q, N, "float64") for q in range(comm.size))
    np.testing.assert_array_equal(_on_host([y])[0], want)


@pytest.mark.timeout(120)
def test_a_device_call_waited_on_after_the_thread_stopped(runtime, comm):
    """At exit the progress thread is stopped before the program's own
    ``atexit`` handlers run; a device call in flight that one of them
    waits on is then finished by the waiting thread, not left waiting
    for the stopped one."""
    if comm.size == 1:
        pytest.skip("one rank: a hand-built call is complete at its launch")
    x = hostmodel.device_array(np.full(N, comm.rank + 1.0))
    hostmodel.NULL_STREAM.enqueue(lambda: None, 0.2)  # keeps it in flight
    work = comm.Iallreduce(MPI.IN_PLACE, x, algorithm="ring")
    mpicoll.engine.progress._shutdown()
    assert not work._execution.finished
    work.Wait()
    np.testing.assert_array_equal(
        _on_host([x])[0], np.full(N, sum(range(1, comm.size + 1)), float))


def test_split_communicators_have_their_own_streams(runtime, mode):
    world = MPI.COMM_WORLD
    half = mpicoll.Comm(world.Split(world.rank % 2, world.rank))
    x = hostmodel.device_array(np.full(N, world.rank + 1.0))
    work = PG(half).all_reduce(x, algorithm="ring", async_op=True)
    work.synchronize()
    members = range(world.rank % 2, world.size, 2)
    np.testing.assert_array_equal(x.view(np.ndarray),
                                  sum(q + 1.0 for q in members))
    assert half._engine.ctx.streams(runtime, 0).main is not \
        mpicoll.Comm(world)._engine.ctx.streams(runtime, 0).main
    half.free()


@pytest.mark.parametrize("algorithm", ["native", "ring"])
def test_calls_in_flight_together_have_streams_of_their_own(
        runtime, comm, mode, algorithm):
    """Nonblocking device calls in flight together run on streams of
    their own (none on the blocking calls' stream), so a later launch's
    wait on the caller's stream cannot hold back an earlier call's
    rounds; a call made again (replayed) gets its stream back."""
    if comm.size == 1:
        pytest.skip("one rank: a hand-built call is complete at its launch")
    xs = [hostmodel.device_array(np.full(N, comm.rank + k, float))
          for k in range(3)]
    pool = comm._engine.ctx.streams(runtime, 0)
    # Work on the caller's stream keeps them all waiting, in flight.
    hostmodel.NULL_STREAM.enqueue(lambda: None, 0.2)
    works = [comm.Iallreduce(MPI.IN_PLACE, x, algorithm=algorithm)
             for x in xs]
    streams = [w._device[0].stream for w in works]
    assert len({id(s) for s in streams}) == 3
    assert all(s is not pool.main for s in streams)
    for w in works:
        w.Wait()
    again = comm.Iallreduce(MPI.IN_PLACE, xs[1], algorithm=algorithm)
    if not comm._settings.guard.check:  # replayed (check mode: not)
        assert again._device[0].stream is streams[1]
    again.Wait()
    got = _on_host(xs)
    for k, g in enumerate(got):
        want = sum(q + k for q in range(comm.size))
        want = want * comm.size if k == 1 else want
        np.testing.assert_array_equal(g, np.full(N, want, float))


def test_many_in_flight_while_the_caller_launches_kernels(runtime, comm,
                                                          mode):
    """Eight all-reduces in flight on one stream, the caller's stream busy
    with its own kernels in between; each result as on the host."""
    xs = [hostmodel.device_array(values(comm.rank, N + i, "float64"))
          for i in range(8)]
    wants = [np.array(x.view(np.ndarray)) for x in xs]
    for w in wants:
        PG(comm).all_reduce(w)
    works = []
    scratch = runtime.xp.empty(N)
    for i, x in enumerate(xs):
        works.append(PG(comm).all_reduce(x, algorithm="ring" if i % 2 else
                                     "recursive_doubling", async_op=True))
        runtime.xp.multiply(scratch, 2.0, out=scratch)
    mpicoll.waitall(works)
    for got, want in zip(_on_host(xs), wants):
        np.testing.assert_array_equal(got, want)


def test_results_are_ordered_on_the_callers_stream(runtime, comm, mode):
    """After wait(), a kernel on the caller's stream sees the result
    without any host synchronisation in between."""
    x = hostmodel.device_array(np.full(N, comm.rank + 1.0))
    doubled = runtime.xp.empty(N)
    PG(comm).all_reduce(x, algorithm="ring", async_op=True).wait()
    runtime.xp.multiply(x, 2.0, out=doubled)
    total = sum(range(1, comm.size + 1))
    np.testing.assert_array_equal(_on_host([doubled])[0], 2.0 * total)


def test_bucketer_on_device_arrays(runtime, comm, mode):
    grads = [hostmodel.device_array(np.full(shape, comm.rank + 1.0,
                                           dtype=dtype))
             for shape, dtype in [((3, 4), "float32"), ((5,), "float64"),
                                  ((), "float32"), ((7,), "float64")]]
    bucketer = mpicoll.GradientBucketer(comm, grads, bucket_bytes=40,
                                        average=True)
    for g in reversed(grads):
        bucketer.mark_ready(g)
    bucketer.wait()
    mean = sum(range(1, comm.size + 1)) / comm.size
    for got in _on_host(grads):
        np.testing.assert_allclose(got, mean, rtol=1e-6)


def test_mixed_host_and_device_buffers_are_refused(runtime, comm):
    with pytest.raises(mpicoll.BufferSpecError,
                       match=r"rank \d+.*allreduce.*same memory"):
        comm.Allreduce(hostmodel.device_array(np.zeros(3)), np.zeros(3))


def test_user_mpi_op_on_device_arrays_is_refused(runtime, comm):
    op = MPI.Op.Create(lambda a, b, t: None, commute=True)
    try:
        with pytest.raises(mpicoll.OpTypeError,
                           match=r"rank \d+.*allreduce.*host memory"):
            PG(comm).all_reduce(hostmodel.device_array(np.zeros(3)), op,
                                algorithm="ring")
        with pytest.raises(mpicoll.OpTypeError,
                           match=r"rank \d+.*allreduce.*host memory"):
            comm.Allreduce(MPI.IN_PLACE, hostmodel.device_array(np.zeros(3)),
                           op, algorithm="ring")
    finally:
        op.Free()


def test_point_to_point_on_device_arrays(runtime, comm, mode):
    """Every point-to-point call around a ring, device to device."""
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    mine = values(r, N, "float64")
    theirs = values(left, N, "float64")

    def fresh():
        return hostmodel.device_array(np.zeros(N))

    results = []
    if p > 1:  # a blocking send to oneself may wait for its receive
        got = fresh()
        if r % 2 == 0:
            comm.Send(hostmodel.device_array(mine), right, 1)
            comm.Recv([got, MPI.DOUBLE], left, 1)
        else:
            comm.Recv([got, MPI.DOUBLE], left, 1)
            comm.Send(hostmodel.device_array(mine), right, 1)
        results.append(got)
    got = fresh()
    works = [PG(comm).irecv(got, left, 2),
             PG(comm).isend(hostmodel.device_array(mine), right, 2)]
    mpicoll.waitall(works)
    results.append(got)
    got = fresh()  # the buffer face: a Work for device buffers
    works = [comm.Irecv([got, MPI.DOUBLE], left, 5),
             comm.Isend(hostmodel.device_array(mine), right, 5)]
    assert all(isinstance(w, mpicoll.Work) for w in works)
    mpicoll.waitall(works)
    results.append(got)
    got = fresh()
    comm.Sendrecv(hostmodel.device_array(mine), right, 3, got, left, 3)
    results.append(got)
    got = hostmodel.device_array(mine)
    comm.Sendrecv_replace(got, right, 4, left, 4)
    results.append(got)
    for g in _on_host(results):
        np.testing.assert_array_equal(g, theirs)
