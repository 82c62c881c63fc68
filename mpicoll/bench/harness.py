"""Timing and validation of one collective at one size, every algorithm.

For each size, warm-up calls probe every algorithm; then rounds of timing
visit the algorithms in turn (so a change of the machine's speed state
hits them all alike). Each timed iteration is barrier-aligned and timed
on every rank. Across ranks: avg/min/max of each rank's mean time per
call, and p50/p99 of the per-iteration times of the slowest rank. After
timing, each algorithm runs once more on fresh buffers and its output is
compared exactly with the spec's expected output; ``wrong`` counts the
mismatching elements over all ranks. Every rank returns the same records.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

from mpicoll.bench.specs import Spec, values
from mpicoll.schedule.layout import buffer_lengths, inplace_send

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


@dataclass
class Buffers:
    """The arguments of one call and the array its output lands in."""

    send: object
    recv: object
    out: np.ndarray | None


def make_buffers(case: Case, rank: int, size: int) -> Buffers:
    """Fresh buffers for ``rank``, inputs filled in (in place if asked)."""
    c, spec = case, case.spec
    slen, rlen = buffer_lengths(spec.name, rank, size, c.count, c.root)
    send = values(rank, 0, slen, c.dtype, c.op)
    recv = np.zeros(rlen, dtype=c.dtype)
    if spec.name == "bcast" and rank == c.root:
        recv[:] = values(c.root, 0, rlen, c.dtype, c.op)
    if not c.inplace:
        return Buffers(send, recv, recv)
    return _in_place(spec.name, send, recv, rank, size, c)


def _in_place(name, send, recv, rank, size, c: Case) -> Buffers:
    """In-place arguments: input moved into ``recv`` (root only where MPI
    says so); scatter's root keeps its block in ``send``."""
    if name in ("reduce", "gather", "scatter") and rank != c.root:
        return Buffers(send, recv, recv)
    if name == "scatter":
        start = rank * c.count
        return Buffers(send, MPI.IN_PLACE, send[start:start + c.count])
    if name in ("reduce_scatter_block", "alltoall"):
        recv = send.copy()
        return Buffers(MPI.IN_PLACE, recv, recv[:c.count] if
                       name == "reduce_scatter_block" else recv)
    inplace_send(name, recv, rank, size, c.count)[:] = send
    return Buffers(MPI.IN_PLACE, recv, recv)


def caller(comm, case: Case, bufs: Buffers, algorithm: str, timeout=None):
    """A no-argument function making one call; with ``timeout``, the
    nonblocking form waited on with that timeout."""
    method = case.spec.method
    if timeout is not None:
        method = "I" + method.lower()
    fn = getattr(comm, method)
    args = _arguments(case, bufs)

    if timeout is None:
        return lambda: fn(*args, algorithm=algorithm)
    return lambda: fn(*args, algorithm=algorithm).wait(timeout=timeout)


def _arguments(case: Case, bufs: Buffers) -> tuple:
    """Positional arguments of the mpi4py-face call for ``case.spec.form``."""
    s, r, op, root = bufs.send, bufs.recv, MPI_OPS[case.op], case.root
    return {"op": (s, r, op), "op_root": (s, r, op, root), "bcast": (r, root),
            "plain": (s, r), "root": (s, r, root), "none": ()}[case.spec.form]


def time_iterations(world, call, iters: int) -> np.ndarray:
    """This rank's seconds for each of ``iters`` barrier-aligned calls."""
    times = np.empty(iters)
    for i in range(iters):
        world.Barrier()
        t0 = time.perf_counter()
        call()
        times[i] = time.perf_counter() - t0
    return times


def warm_up(world, calls: dict, warmup: int) -> float:
    """Run each call ``warmup`` times (at least once); the slowest rank's
    seconds per call of the slowest algorithm."""
    worst = 0.0
    for call in calls.values():
        n = max(1, warmup)
        worst = max(worst, float(time_iterations(world, call, n).mean()))
    return world.allreduce(worst, op=MPI.MAX)


def timed_rounds(world, calls: dict, iters: int) -> dict[str, np.ndarray]:
    """``iters`` timed calls per algorithm, in interleaved rounds."""
    rounds = max(1, min(ROUNDS, iters))
    per_round = [iters // rounds + (i < iters % rounds) for i in range(rounds)]
    times = {name: [] for name in calls}
    for n in per_round:
        for name, call in calls.items():
            times[name].append(time_iterations(world, call, n))
    return {name: np.concatenate(t) for name, t in times.items()}


def summarize(world, times: np.ndarray) -> dict[str, float]:
    """avg/min/max over ranks of the mean, p50/p99 of the slowest rank per
    iteration; microseconds, the same on every rank."""
    mean = float(times.mean())
    slowest = np.empty_like(times)
    world.Allreduce(times, slowest, op=MPI.MAX)
    return {"avg": world.allreduce(mean, op=MPI.SUM) / world.Get_size() * 1e6,
            "min": world.allreduce(mean, op=MPI.MIN) * 1e6,
            "max": world.allreduce(mean, op=MPI.MAX) * 1e6,
            "p50": float(np.percentile(slowest, 50)) * 1e6,
            "p99": float(np.percentile(slowest, 99)) * 1e6}


def count_wrong(comm, case: Case, algorithm: str, timeout=None) -> int:
    """Mismatching output elements over all ranks, from one call on fresh
    buffers."""
    bufs = make_buffers(case, comm.rank, comm.size)
    caller(comm, case, bufs, algorithm, timeout)()
    want = case.spec.expected(comm.rank, comm.size, case.count, case.root,
                              case.dtype, case.op)
    wrong = 0
    if want is not None:
        got = bufs.out[:want.size]
        wrong = int(np.count_nonzero(got != want)) + want.size - got.size
    return comm.mpi.allreduce(wrong, op=MPI.SUM)


def measure(comm, case: Case, algorithms: list[str], *, iters: int,
            warmup: int, budget: float | None, check: bool,
            timeout=None) -> list[dict]:
    """Records for ``case``, one per algorithm (``"auto"`` included).

    ``budget`` (seconds, None for no limit) caps the iteration count so
    the timed calls of all algorithms together take about that long.
    """
    world = comm.mpi
    bufs = make_buffers(case, comm.rank, comm.size)
    calls = {a: caller(comm, case, bufs, a, timeout) for a in algorithms}
    probe = warm_up(world, calls, warmup)
    if budget is not None:
        fit = int(budget / max(probe * len(calls), 1e-9))
        iters = world.bcast(max(1, min(iters, fit)))
    times = timed_rounds(world, calls, iters)
    return [record(comm, case, a, summarize(world, times[a]), iters,
                   count_wrong(comm, case, a, timeout) if check else 0)
            for a in algorithms]


def record(comm, case: Case, algorithm: str, time_us: dict, iters: int,
           wrong: int) -> dict:
    """One row: what ran, how long, how fast (GB/s, nccl-tests style)."""
    size, itemsize = comm.size, np.dtype(case.dtype).itemsize
    nbytes = case.spec.nbytes(case.count, size, itemsize)
    algbw = nbytes / (time_us["avg"] * 1e3) if time_us["avg"] > 0 else 0.0
    chosen = None
    if algorithm == "auto":
        chosen = comm.explain(case.spec.name, count=case.count,
                              dtype=case.dtype, op=case.op).algorithm.name
    reducing = case.spec.form in ("op", "op_root")
    return {"collective": case.spec.name, "algorithm": algorithm,
            "chosen": chosen, "nranks": size, "dtype": case.dtype,
            "op": case.op if reducing else None,
            "root": case.root if case.spec.form in ("op_root", "root", "bcast")
            else None,
            "count": case.count, "nbytes": nbytes,
            "inplace": case.inplace, "time_us": time_us,
            "algbw_gbps": algbw,
            "busbw_gbps": algbw * case.spec.factor(size),
            "iters": iters, "wrong": wrong}
