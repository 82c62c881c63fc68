"""How much does a collective's time depend on where its buffers landed?

    mpiexec -n 2 python bench/placements.py [-c allreduce] [-a ring]
        [--sizes 64K,1M,16M] [--sets 16] [--pool 4] [--iters N]

Times one hand-built algorithm at each size on ``--sets`` sets of buffers
of its own (allocated one after another, each with the plan and scratch
the engine makes for it), every set visited in turn in the same
interleaved rounds, the input written before every call as the
calibration's validation does (``--rewrite``). Prints per size the 5th
percentile and the median of both ranks' calls on each set and how far
apart the sets are (largest over smallest); then the same with the sets
taken ``--pool`` at a time (every ``sets / pool``-th set), a pool's visits
going to its sets in turn, so that a pool has as many calls as a set (as
a try of ``python -m mpicoll.calibrate --placements``, not kept, took
them: ``docs/simulation/placements-tries.txt``). Identical
calls, interleaved, differ by set only through where their pages are.
docs/simulation.md ("Where the buffers land") quotes it.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.bench.cli import parse_size
from mpicoll.bench.harness import Case, caller, make_buffers, rewriting, \
    summarize, time_batch, warm_up
from mpicoll.bench.specs import SPECS

VISITS = 8  # interleaved visits of every set


def parse(argv=None):
    """The arguments (module docstring); usage errors exit 2."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-c", "--collective", default="allreduce",
                   choices=sorted(SPECS))
    p.add_argument("-a", "--algorithm", default="ring")
    p.add_argument("--sizes", default="64K,1M,16M",
                   type=lambda s: [parse_size(x) for x in s.split(",")])
    p.add_argument("--sets", type=int, default=16,
                   help="buffer sets per size; default 16")
    p.add_argument("--pool", type=int, default=4,
                   help="sets pooled in the second table; default 4")
    p.add_argument("--iters", type=int, default=0,
                   help=f"calls per set, at least {VISITS} (0: 400 up to "
                        "1 MiB, 40 above)")
    args = p.parse_args(argv)
    if args.sets < 1 or args.pool < 1 or args.sets % args.pool:
        p.error("--sets must be a positive multiple of --pool")
    if args.iters and args.iters < VISITS:
        p.error(f"--iters must be 0 or at least {VISITS} (a call per visit)")
    return args


def spread(values: list[float]) -> str:
    """The values (µs) and how far apart they are: largest over smallest."""
    return (" ".join(f"{v:7.1f}" for v in values)
            + f"   max/min {max(values) / min(values):.2f}")


def main(argv=None) -> int:
    args = parse(argv)
    world = MPI.COMM_WORLD
    comm = mpicoll.Comm(world)
    spec = SPECS[args.collective]
    rank = world.Get_rank()
    if rank == 0:
        print(f"# {args.collective} {args.algorithm}, {world.Get_size()} "
              f"ranks, float32, input written before every call; "
              f"{args.sets} buffer sets interleaved; us")
    for nbytes in args.sizes:
        count = spec.count_for(nbytes, world.Get_size(), 4)
        case = Case(spec, count, "float32", "sum", 0, False, rewrite=True)
        calls = {}
        for k in range(args.sets):
            bufs = make_buffers(case, rank, world.Get_size())
            made = {args.algorithm: caller(comm, case, bufs, args.algorithm)}
            calls[k] = rewriting(case, bufs, made, rank)[args.algorithm]
        warm_up(world, calls, 3)
        iters = args.iters or (400 if nbytes <= 1 << 20 else 40)
        times = {k: [] for k in calls}
        for _ in range(VISITS):
            for k, call in calls.items():
                times[k].append(time_batch(world, call, iters // VISITS))
        single = [summarize(world, np.concatenate(times[k]))
                  for k in calls]
        # a pool's visit v is its (v % pool)-th set's: as many calls as
        # one set has
        step = args.sets // args.pool
        pooled = [summarize(world, np.concatenate(
            [times[g + (v % args.pool) * step][v] for v in range(VISITS)]))
            for g in range(step)]
        if rank == 0:
            for name, stats in ((f"each set ({iters} calls)", single),
                                (f"{args.pool} sets pooled", pooled)):
                for statistic in ("p5", "p50"):
                    print(f"{nbytes:>9} {name:>22} {statistic:>3}: "
                          + spread([s[statistic] for s in stats]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
