"""Cross-check: native MPI timed the OSU micro-benchmarks' way and ours.

    mpiexec -n 2 python -m mpi4py bench/osu_check.py            # allreduce
    mpiexec -n 2 python -m mpi4py bench/osu_check.py -c bcast -e 64K

OSU's ``osu_allreduce``/``osu_bcast``/``osu_allgather`` time each call on
its own and put a barrier after it (outside the timed span): ``skip``
untimed calls, then ``iterations`` timed ones (200/1000 up to 8 KiB,
10/100 above), each rank's mean latency, and across ranks the average
(``Avg Latency(us)``) with min and max. Sizes 4 B to 1 MiB by doubling;
OSU's allgather size is one rank's block (the benchmark's table reports
the gathered total, p times larger). The data is float32 here for all
three (OSU's bcast and allgather move ``MPI_CHAR``; bytes are bytes).

Our method (:mod:`mpicoll.bench.harness`): one barrier, then batches of
back-to-back calls, the same statistics over them. Both run here on the
same buffers through mpi4py's buffer methods (no mpicoll in the way),
alternating per size, so the ratio column says how much of a difference
between our tables and an OSU table is the method and not the library.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

LARGE = 8192  # bytes: OSU switches to its large-message iteration counts
COLLECTIVES = ("allreduce", "bcast", "allgather")


def arguments(argv=None) -> argparse.Namespace:
    from mpicoll.cli.sizes import parse_size

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-c", "--collective", choices=COLLECTIVES,
                   default="allreduce")
    p.add_argument("-b", "--minbytes", type=parse_size, default=4)
    p.add_argument("-e", "--maxbytes", type=parse_size, default=1 << 20)
    p.add_argument("--scale", type=float, default=1.0,
                   help="multiply OSU's iteration counts (tests use less)")
    return p.parse_args(argv)


def osu_iterations(nbytes: int, scale: float = 1.0) -> tuple[int, int]:
    """OSU's (skip, iterations) for a message of ``nbytes``."""
    skip, iters = (200, 1000) if nbytes <= LARGE else (10, 100)
    return max(1, int(skip * scale)), max(1, int(iters * scale))


def osu_latency(world, call, skip: int, iters: int) -> np.ndarray:
    """This rank's seconds for each timed call, OSU's way: every call
    followed by an untimed barrier."""
    times = np.empty(iters)
    clock = time.perf_counter
    for i in range(skip + iters):
        t0 = clock()
        call()
        t1 = clock()
        if i >= skip:
            times[i - skip] = t1 - t0
        world.Barrier()
    return times


def main(argv=None) -> int:
    args = arguments(argv)
    from mpi4py import MPI

    import mpicoll
    from mpicoll.bench import harness
    from mpicoll.cli.sizes import sizes
    from mpicoll.bench.specs import SPECS

    comm = mpicoll.Comm(MPI.COMM_WORLD)
    world, spec = MPI.Intracomm(comm), SPECS[args.collective]
    if comm.rank == 0:
        print(f"# {args.collective} float32 through mpi4py, {comm.size} "
              f"ranks: OSU's method against ours (avg/min/max over ranks of "
              f"each rank's mean µs)")
        print(f"{'OSU size':>10} {'osu avg':>9} {'osu min':>9} {'osu max':>9}"
              f" {'ours avg':>9} {'ours min':>9} {'ours max':>9}"
              f" {'osu/ours':>8} {'#wrong':>6}")
    wrong_total = 0
    for nbytes in sizes(args.minbytes, args.maxbytes, 2):
        count = max(1, nbytes // 4)
        case = harness.Case(spec, count, "float32", "sum", 0, False)
        bufs = harness.make_buffers(case, comm.rank, comm.size)
        fn, call_args = getattr(world, spec.method), harness.arguments(case,
                                                                       bufs)

        def call(fn=fn, call_args=call_args):
            fn(*call_args)
        skip, iters = osu_iterations(nbytes, args.scale)
        osu = harness.summarize(world, osu_latency(world, call, skip, iters))
        harness.time_batch(world, call, skip)
        ours = harness.summarize(world, harness.time_batch(world, call, iters))
        want = spec.expected(comm.rank, comm.size, count, 0, "float32", "sum")
        fresh = harness.make_buffers(case, comm.rank, comm.size)
        fn(*harness.arguments(case, fresh))
        wrong = world.allreduce(harness.mismatches(fresh.out, want))
        wrong_total += wrong
        if comm.rank == 0:
            print(f"{nbytes:>10} {osu['avg']:>9.2f} {osu['min']:>9.2f}"
                  f" {osu['max']:>9.2f} {ours['avg']:>9.2f}"
                  f" {ours['min']:>9.2f} {ours['max']:>9.2f}"
                  f" {osu['avg'] / ours['avg']:>8.2f} {wrong:>6}", flush=True)
    return 1 if wrong_total else 0


if __name__ == "__main__":
    sys.exit(main())
