"""Where a staged device call's microseconds go, on the host model of CUDA.

    mpiexec -n 2 python -m mpi4py bench/device_model.py [--latencies SPEC]
        [--aware] [--bytes 8] [--calls 500] [--rounds 5]

Runs small collectives on device arrays of :mod:`mpicoll.device.hostmodel`
(host memory that mpicoll takes through its whole device path) whose copies,
kernels, launches and event queries cost what ``--latencies`` says
(default ``assumed``: :data:`~mpicoll.device.hostmodel.ASSUMED`; the syntax
is :meth:`~mpicoll.device.hostmodel.Latencies.parse`'s), staged through
pinned mirrors unless ``--aware``. Each call is followed by a synchronize of
the caller's stream, as ``python -m mpicoll.bench --device cuda`` times
them, so a call's time covers the device work it started.

Per case, rank 0 prints the median over ``--rounds`` rounds of ``--calls``
calls (each round after a barrier) of the time per call, and splits it
(all in us per call):

``device``
    the host's waits on the model device (synchronizes: the copies and
    kernels it had to wait for);
``cuda``
    the CPU time of CUDA calls (launches, records, stream waits, event
    queries), as the latencies charge it;
``model``
    the model's own Python (its bookkeeping, which a GPU's runtime does
    not cost: subtracted from ``total`` for ``excess``);
``MPI``
    the same collective on NumPy arrays of the same size through mpi4py,
    timed in the same round (what the messages cost);
``mpicoll``
    the rest: mpicoll's Python, hand-overs between threads, and any time
    a waiter slept past the event it waited for (``lag``, per call: how
    late after their completion events were first seen complete);
``excess``
    ``total - model - floor``, where the floor is the device time of the
    call's copies and kernels, one after another, plus ``MPI``: what the
    device path adds to its parts. The target for a small staged call is
    an excess of at most 10 us.

and the copies, kernels and event queries per call (in brackets: queries
that found the event not yet complete).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.device import hostmodel

CASES = {  # name: (collective, algorithm, nonblocking)
    "Allreduce native": ("Allreduce", "native", False),
    "Allreduce recursive_doubling": ("Allreduce", "recursive_doubling",
                                     False),
    "Bcast native": ("Bcast", "native", False),
    "Bcast binomial": ("Bcast", "binomial", False),
    "Alltoall native": ("Alltoall", "native", False),
    "Iallreduce native + Wait": ("Allreduce", "native", True),
    "Iallreduce recursive_doubling + Wait": ("Allreduce",
                                             "recursive_doubling", True),
}


def caller(comm, collective, algorithm, nonblocking, n, device):
    """A no-argument function making one call (and synchronizing the
    caller's stream on device arrays)."""
    p = comm.Get_size()
    make = hostmodel.device_array if device else np.array
    block = n * p if collective == "Alltoall" else n
    x = make(np.ones(block, np.uint8))
    y = make(np.zeros(block, np.uint8))
    kw = {} if algorithm is None else {"algorithm": algorithm}
    sync = hostmodel.NULL_STREAM.synchronize if device else (lambda: None)
    if collective == "Bcast":
        def call():
            comm.Bcast(x, 0, **kw)
            sync()
    elif collective == "Alltoall":
        def call():
            comm.Alltoall(x, y, **kw)
            sync()
    elif nonblocking:
        def call():
            comm.Iallreduce(x, y, MPI.SUM, **kw).Wait()
            sync()
    else:
        def call():
            comm.Allreduce(x, y, MPI.SUM, **kw)
            sync()
    return call


def timed(world, call, calls: int) -> float:
    """Seconds per call of ``calls`` calls after a barrier."""
    world.Barrier()
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - start) / calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latencies", default="assumed")
    ap.add_argument("--aware", action="store_true",
                    help="CUDA-aware: MPI on the device arrays, no staging")
    ap.add_argument("--bytes", type=int, default=8)
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-c", "--cases", default=",".join(CASES),
                    help="comma-separated case names")
    args = ap.parse_args()
    os.environ["MPICOLL_CUDA_AWARE"] = "1" if args.aware else "0"
    lat = hostmodel.Latencies.parse(args.latencies)
    hostmodel.install(lat)
    world = MPI.COMM_WORLD
    comm = mpicoll.Comm(world)
    ledger = hostmodel.LEDGER
    names = [c.strip() for c in args.cases.split(",")]
    if world.rank == 0:
        print(f"# device model: {lat}; "
              f"{'CUDA-aware' if args.aware else 'staged'}; "
              f"{args.bytes} B per rank; {world.size} rank(s); median of "
              f"{args.rounds} rounds of {args.calls} calls; us per call")
        print(f"{'case':38} {'total':>6} {'device':>6} {'cuda':>5} "
              f"{'model':>6} {'MPI':>5} {'mpicoll':>7} {'lag':>5} "
              f"{'excess':>6}  copies kernels queries")
    for name in names:
        collective, algorithm, nonblocking = CASES[name]
        on_device = caller(comm, collective, algorithm, nonblocking,
                           args.bytes, True)
        on_host = caller(world, collective, None, nonblocking, args.bytes,
                         False)
        for _ in range(20):
            on_device()
        rows = []
        for _ in range(args.rounds):
            ledger.reset()
            total = timed(world, on_device, args.calls)
            spent = {k: v / args.calls for k, v in
                     ledger.snapshot().items()}
            spent["MPI"] = timed(world, on_host, args.calls)
            spent["total"] = total
            rows.append(spent)
        rows.sort(key=lambda r: r["total"])
        if world.rank == 0:
            print(row(name, rows[len(rows) // 2], lat))


def row(name: str, spent: dict, lat) -> str:
    """One case's line, from the median round's ``spent`` (seconds per
    call, counts per call)."""
    us = {k: v * 1e6 for k, v in spent.items()}
    model = us["inside"] - us["charged"] - us["waited"]
    floor = spent["copies"] * lat.copy * 1e6 + spent["copy_bytes"] \
        / lat.bandwidth * 1e6 + spent["kernels"] * lat.kernel * 1e6 \
        + us["MPI"]
    rest = us["total"] - us["inside"] - us["MPI"]
    return (f"{name:38} {us['total']:6.1f} {us['waited']:6.1f} "
            f"{us['charged']:5.1f} {model:6.1f} {us['MPI']:5.1f} "
            f"{rest:7.1f} {us['lag']:5.1f} {us['total'] - model - floor:6.1f}"
            f"  {spent['copies']:6.1f} {spent['kernels']:7.1f} "
            f"{spent['queries']:5.1f} ({spent['early']:.1f})")


if __name__ == "__main__":
    main()
