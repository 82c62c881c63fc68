"""Timing and validation of one collective at one size, every algorithm.

The method is nccl-tests': for each size, warm-up calls probe every
algorithm; then rounds of timing visit the algorithms in turn (so a change
of the machine's speed state hits them all alike). A visit is one barrier
and then a batch of back-to-back calls, each call's end stamped on every
rank, so the barrier's own exit skew is paid once per batch, not once per
call (OSU's per-call barrier adds it to every small-message time:
``bench/osu_check.py`` measures the difference).

Statistics, all over the same samples (one per rank and call, µs): ``avg``
the mean over ranks of each rank's mean, ``min``/``max`` the least and
greatest of those per-rank means (as OSU and nccl-tests report them),
``p5``/``p50``/``p99`` percentiles of all ranks' per-call times pooled. After
timing, each algorithm runs once more on fresh buffers and its output is
compared exactly with the spec's expected output; ``wrong`` counts the
mismatching elements over all ranks. Every rank returns the same records.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

from mpicoll.bench.device import synchronizer, to_device, to_host
from mpicoll.bench.specs import Spec, values
from mpicoll.schedule.layout import buffer_lengths, inplace_recv, inplace_send

MPI_OPS = {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}
ROUNDS = 4  # interleaved visits per algorithm and size (at most)


@dataclass(frozen=True)
class Case:
    """One collective at one size: everything a call needs but buffers."""

    spec: Spec
    count: int
    dtype: str
    op: str
    root: int
    inplace: bool
    device: str = "cpu"
    rewrite: bool = False  # write the input before every timed call


@dataclass
class Buffers:
    """The arguments of one call and the array its output lands in."""

    send: object
    recv: object
    out: np.ndarray | None


def make_buffers(case: Case, rank: int, size: int) -> Buffers:
    """Fresh buffers for ``rank``, inputs filled in (in place if asked)."""
    c, row = case, case.spec.row
    slen, rlen = buffer_lengths(row.name, rank, size, c.count, c.root)
    send = values(rank, 0, slen, c.dtype, c.op)
    recv = np.zeros(rlen, dtype=c.dtype)
    if row.single_buffer and rank == c.root:
        recv[:] = values(c.root, 0, rlen, c.dtype, c.op)
    send, recv = to_device(send, c.device), to_device(recv, c.device)
    if not c.inplace:
        return Buffers(send, recv, recv)
    return _in_place(row, send, recv, rank, size, c)


def _in_place(row, send, recv, rank, size, c: Case) -> Buffers:
    """In-place arguments, as the row's ``inplace`` says (root only where
    MPI says so): input moved into ``recv`` (aliased) or ``recv`` replaced
    by a copy of the input (staged); scatter's root keeps its block in
    ``send`` (root_keeps)."""
    if row.inplace_root_only and rank != c.root:
        return Buffers(send, recv, recv)
    if row.inplace == "root_keeps":
        return Buffers(send, MPI.IN_PLACE,
                       inplace_recv(row.name, send, rank, c.count))
    if row.inplace == "staged":
        staged = send.copy()
        return Buffers(MPI.IN_PLACE, staged, staged[:recv.size])
    inplace_send(row.name, recv, rank, size, c.count)[:] = send
    return Buffers(MPI.IN_PLACE, recv, recv)


def caller(comm, case: Case, bufs: Buffers, algorithm: str, timeout=None,
           persistent: bool = False, nonblocking: bool = False):
    """A no-argument function making one call (and, on a GPU, waiting for
    it); ``nonblocking``, or a ``timeout``: the nonblocking form waited on
    at once (with that timeout); ``persistent``: the call prepared once
    (``X_init``), each call a ``Start`` and a ``Wait``, and
    ``call.free()`` frees it."""
    row = case.spec.row
    args = arguments(case, bufs)
    sync = synchronizer(case.device)
    if persistent:
        request = getattr(comm, row.method + "_init")(*args,
                                                      algorithm=algorithm)

        def call():
            request.Start()
            request.wait(timeout=timeout)
            sync()

        call.free = request.Free
        return call
    nonblocking = nonblocking or timeout is not None
    fn = getattr(comm, row.nonblocking_method if nonblocking else row.method)

    if not nonblocking:
        def call():
            fn(*args, algorithm=algorithm)
            sync()
    else:
        def call():
            fn(*args, algorithm=algorithm).wait(timeout=timeout)
            sync()
    return call


def rewriting(case: Case, bufs: Buffers, calls: dict, rank: int) -> dict:
    """``calls``, each writing every element of the input it reads first
    when ``case.rewrite`` (as an application writes new data each step);
    otherwise as they are. Unwritten, a peer may find the unchanged input
    in its own cache at every call after the first (MPICH's shared-memory
    transfers read the sender's buffer), which flatters algorithms whose
    peers read the caller's input directly. A broadcast's one buffer is
    input at the root only (the row's ``single_buffer``): on ``rank``
    elsewhere nothing is written, since writing a buffer just before
    receiving into it flatters the receive too (the receiver's cache
    then holds the buffer)."""
    row = case.spec.row
    target = bufs.recv if bufs.send is MPI.IN_PLACE or row.single_buffer \
        else bufs.send
    if not case.rewrite or target is MPI.IN_PLACE or target is None or \
            not target.size or (row.single_buffer and rank != case.root):
        return calls
    one = target.dtype.type(1)

    def written(call):
        def call_after_writing():
            target.fill(one)
            call()
        return call_after_writing

    return {name: written(call) for name, call in calls.items()}


def arguments(case: Case, bufs: Buffers) -> tuple:
    """Positional arguments of the mpi4py-face call, shaped by the row:
    buffers (none, the one buffer, or send and receive), then the op
    where it reduces, then the root where it has one."""
    row = case.spec.row
    if row.counts == "none":
        return ()
    args = [bufs.recv] if row.single_buffer else [bufs.send, bufs.recv]
    if row.reducing:
        args.append(MPI_OPS[case.op])
    if row.rooted:
        args.append(case.root)
    return tuple(args)


def time_batch(world, call, n: int) -> np.ndarray:
    """One visit: a barrier, then ``n`` back-to-back calls; this rank's
    seconds for each call (from the previous call's end)."""
    stamps = np.empty(n + 1)
    clock = time.perf_counter
    world.Barrier()
    stamps[0] = clock()
    for i in range(1, n + 1):
        call()
        stamps[i] = clock()
    return np.diff(stamps)


def warm_up(world, calls: dict, warmup: int) -> float:
    """Run each call ``warmup`` times (at least once); seconds for one call
    of each, added up (the slowest rank's): what one iteration of every
    algorithm costs. A call's cost is the median of its warm-up calls, so
    a first call's one-off work (a plan compiled, a GPU kernel built)
    does not count as the cost of every call."""
    total = np.array([sum(float(np.median(time_batch(
        world, call, max(1, warmup)))) for call in calls.values())])
    world.Allreduce(MPI.IN_PLACE, total, MPI.MAX)
    return float(total[0])


def timed_rounds(world, calls: dict, iters: int,
                 rounds: int = ROUNDS) -> dict[str, np.ndarray]:
    """``iters`` timed calls per name in ``calls``, in (at most)
    ``rounds`` interleaved visits each."""
    rounds = max(1, min(rounds, iters))
    per_round = [iters // rounds + (i < iters % rounds) for i in range(rounds)]
    times = {name: [] for name in calls}
    for n in per_round:
        for name, call in calls.items():
            times[name].append(time_batch(world, call, n))
    return {name: np.concatenate(t) for name, t in times.items()}


def summarize(world, times: np.ndarray) -> dict[str, float]:
    """The five statistics of this rank's per-call ``times`` (seconds) and
    everyone else's, in µs, the same on every rank (module docstring)."""
    means = np.empty(world.Get_size())
    world.Allgather(np.array([times.mean()], float), means)
    pooled = np.empty(times.size * world.Get_size())
    world.Allgather(np.ascontiguousarray(times, dtype=float), pooled)
    p5, p50, p99 = np.percentile(pooled, [5, 50, 99])
    return {"avg": float(means.mean()) * 1e6, "min": float(means.min()) * 1e6,
            "max": float(means.max()) * 1e6, "p5": float(p5) * 1e6,
            "p50": float(p50) * 1e6,
            "p99": float(p99) * 1e6}


def count_wrong(comm, case: Case, algorithm: str, timeout=None,
                persistent: bool = False) -> int:
    """Mismatching output elements over all ranks, from one call on fresh
    buffers."""
    bufs = make_buffers(case, comm.rank, comm.size)
    call = caller(comm, case, bufs, algorithm, timeout, persistent)
    call()
    if persistent:
        call.free()
    want = case.spec.expected(comm.rank, comm.size, case.count, case.root,
                              case.dtype, case.op)
    wrong = np.array([mismatches(bufs.out, want)], np.int64)
    MPI.Intracomm(comm).Allreduce(MPI.IN_PLACE, wrong, MPI.SUM)
    return int(wrong[0])


def mismatches(out, want: np.ndarray | None) -> int:
    """Elements of ``out`` (host or device) that differ from ``want``,
    counting missing ones; 0 where no output is expected."""
    if want is None:
        return 0
    got = to_host(out)[:want.size]
    return int(np.count_nonzero(got != want)) + want.size - got.size


def fit_iterations(world, probe: float, iters: int,
                   budget: float | None) -> int:
    """At most ``iters``, fewer if iterations of ``probe`` seconds (one
    call of every algorithm) would overrun ``budget`` seconds; at least
    1; the same on every rank."""
    if budget is None:
        return iters
    fit = int(budget / max(probe, 1e-9))
    agreed = np.array([max(1, min(iters, fit))], np.int64)
    world.Bcast(agreed, 0)
    return int(agreed[0])


def measure(comm, case: Case, algorithms: list[str], *, iters: int,
            warmup: int, budget: float | None, validate: bool,
            timeout=None, persistent: bool = False) -> list[dict]:
    """Records for ``case``, one per algorithm (``"auto"`` included).

    ``budget`` (seconds, None for no limit) caps the iteration count so
    the timed calls of all algorithms together take about that long;
    ``validate``: count each algorithm's wrong elements after timing
    (else ``wrong`` is 0).
    """
    world = MPI.Intracomm(comm)  # mpi4py's own calls, same handle
    bufs = make_buffers(case, comm.rank, comm.size)
    made = {a: caller(comm, case, bufs, a, timeout, persistent)
            for a in algorithms}
    calls = rewriting(case, bufs, made, comm.rank)
    probe = warm_up(world, calls, warmup)
    iters = fit_iterations(world, probe, iters, budget)
    times = timed_rounds(world, calls, iters)
    if persistent:
        for call in made.values():
            call.free()
    return [record(comm, case, a, summarize(world, times[a]), iters,
                   count_wrong(comm, case, a, timeout, persistent)
                   if validate else 0, persistent, timeout is not None)
            for a in algorithms]


def record(comm, case: Case, algorithm: str, time_us: dict, iters: int,
           wrong: int, persistent: bool = False,
           nonblocking: bool = False) -> dict:
    """One row: what ran, how long, how fast (GB/s, nccl-tests style)."""
    size, itemsize = comm.size, np.dtype(case.dtype).itemsize
    nbytes = case.spec.nbytes(case.count, size, itemsize)
    algbw = nbytes / (time_us["avg"] * 1e3) if time_us["avg"] > 0 else 0.0
    chosen = None
    if algorithm == "auto":
        form = "persistent" if persistent else (
            "nonblocking" if nonblocking else "blocking")
        chosen = comm.explain(case.spec.name, count=case.count,
                              dtype=case.dtype, op=case.op,
                              inplace=case.inplace, form=form).algorithm.name
    row = case.spec.row
    return {"collective": case.spec.name, "algorithm": algorithm,
            "chosen": chosen, "nranks": size, "dtype": case.dtype,
            "op": case.op if row.reducing else None,
            "root": case.root if row.rooted else None,
            "count": case.count, "nbytes": nbytes,
            "inplace": case.inplace, "device": case.device,
            "persistent": persistent, "rewritten": case.rewrite,
            "time_us": time_us,
            "algbw_gbps": algbw,
            "busbw_gbps": algbw * row.bus_factor(size),
            "iters": iters, "wrong": wrong}
