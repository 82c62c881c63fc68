"""Allreduce on new arrays every call, as an application makes them.

    mpiexec -n 2 python bench/new_arrays.py [--calls N] [--rounds R]

A training loop or a solver often reduces a freshly made array each step
(a loss, a norm, ``np.array([value])``) rather than the same buffer again.
mpicoll keeps a blocking call by its *likeness* (:mod:`mpicoll.engine.likeness`):
a later call on new arrays of the same dtype and shape skips the parse,
native or hand-built (its plan bound again to the new arrays,
:mod:`mpicoll.engine.rebind`). Per size (8 B to 1 MiB of
float32, by factors of 4) this times, interleaved in every round, calls
that each make new input and output arrays: mpi4py's ``Allreduce``,
mpicoll's with ``algorithm="native"`` and with ``auto``, and mpicoll's
``auto`` on the same two arrays every call for comparison (first at
each size, so that its first call is parsed and its later ones replayed;
arrays that first come after their kind was kept run by likeness until
they come again among the kind's recent calls, :mod:`mpicoll.engine.likeness`).
Prints the median over rounds of each rank's mean µs per call (the slowest rank's),
and the ratio to mpi4py's; every result is checked.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from mpi4py import MPI

import mpicoll


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=400,
                   help="calls per visit (fewer at large sizes)")
    p.add_argument("--rounds", type=int, default=9)
    args = p.parse_args()
    world = MPI.COMM_WORLD
    comm = mpicoll.Comm(world)
    rank, size = world.Get_rank(), world.Get_size()
    want_of = size * (size + 1) / 2
    same_x = {}
    contenders = {  # the same arrays first: their first call is parsed
        "mpi4py": lambda n: world.Allreduce(
            np.full(n, rank + 1, np.float32), out := np.empty(n, np.float32))
        or out,
        "auto, same arrays": lambda n: comm.Allreduce(*same_x[n]) or
        same_x[n][1],
        "mpicoll native": lambda n: comm.Allreduce(
            np.full(n, rank + 1, np.float32), out := np.empty(n, np.float32),
            algorithm="native") or out,
        "mpicoll auto": lambda n: comm.Allreduce(
            np.full(n, rank + 1, np.float32), out := np.empty(n, np.float32))
        or out,
    }
    if rank == 0:
        print(f"# allreduce float32 sum, {size} ranks, new input and output "
              f"arrays every call; median over {args.rounds} rounds of the "
              "slowest rank's mean µs per call (time / mpi4py)")
        print(f"{'bytes':>9} " + " ".join(f"{c:>20}" for c in contenders))
    for nbytes in (8, 32, 128, 512, 2048, 8192, 32768, 131072, 524288,
                   1 << 20):
        n = nbytes // 4
        same_x[n] = (np.full(n, rank + 1, np.float32),
                     np.empty(n, np.float32))
        calls = max(20, min(args.calls, args.calls * 8192 // nbytes))
        times = {c: [] for c in contenders}
        for name, fn in contenders.items():  # warm-up, and validation
            out = fn(n)
            if not np.all(out == want_of):
                raise SystemExit(f"{name} at {nbytes} B: wrong result")
        for _ in range(args.rounds):
            for name, fn in contenders.items():
                world.Barrier()
                t = time.perf_counter()
                for _ in range(calls):
                    fn(n)
                mine = (time.perf_counter() - t) / calls * 1e6
                times[name].append(world.allreduce(mine, op=MPI.MAX))
        if rank == 0:
            base = float(np.median(times["mpi4py"]))
            cells = [f"{(m := float(np.median(times[c]))):>12.1f} "
                     f"({m / base:5.2f})" for c in contenders]
            chose = comm.explain("allreduce", count=n,
                                 dtype="float32").algorithm.name
            print(f"{nbytes:>9} " + " ".join(f"{c:>20}" for c in cells)
                  + f"  auto: {chose}", flush=True)


if __name__ == "__main__":
    main()
