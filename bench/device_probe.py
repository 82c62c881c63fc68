"""Where the staged device path spends its time: a profile per call.

    mpiexec -n 2 python bench/device_probe.py

Needs CuPy and a GPU. Times, on rank 0, mpicoll calls on CuPy arrays
(allreduce of 8 B and 16 MiB, native and ring; all-to-all of 16 MiB,
hierarchical, pairwise and native), each after 3 warm-up calls and each
call followed by a synchronisation of the current stream, and prints the
10 functions with the most time of their own (``cProfile``). Then, on
host memory, MPI's own Allreduce and mpicoll's ring on 16 MiB of pageable
and of pinned (``cupyx.empty_pinned``) memory: whether the MPI library
treats pinned memory differently. Last, what allocating 16 and 96 MiB of
pinned memory costs, first and again (CuPy's pinned pool).

A diagnostic, not a benchmark: a profiled call is slower than a plain
one, and the host numbers are single runs.
"""

import cProfile
import pstats
import sys
import time
import traceback

import cupy
import cupyx
import numpy as np
from mpi4py import MPI

import mpicoll

world = MPI.COMM_WORLD
comm = mpicoll.Comm(world)
rank, size = world.rank, world.size
sync = cupy.cuda.get_current_stream().synchronize


def say(*a):
    if rank == 0:
        print(*a, flush=True)


def timed(name, fn, reps, profile=True):
    try:
        for _ in range(3):
            fn()
        sync()
        world.Barrier()
        pr = cProfile.Profile()
        t = time.perf_counter()
        if profile:
            pr.enable()
        for _ in range(reps):
            fn()
            sync()
        if profile:
            pr.disable()
        dt = (time.perf_counter() - t) / reps
        world.Barrier()
        say(f"== {name}: {dt * 1e6:.1f} us per call (rank 0, {reps} calls)")
        if profile and rank == 0:
            stats = pstats.Stats(pr, stream=sys.stdout)
            stats.sort_stats("tottime").print_stats(10)
    except Exception:
        traceback.print_exc()
        sys.stdout.flush()


def arrays(nbytes, xp):
    n = nbytes // 4
    return xp.ones(n * size, np.float32)[:n].copy(), xp.ones(n, np.float32)


for nbytes, reps in ((8, 200), (16 << 20, 10)):
    x, y = arrays(nbytes, cupy)
    for alg in ("native", "ring"):
        timed(f"cuda allreduce {nbytes} B {alg}",
              lambda x=x, y=y, alg=alg: comm.Allreduce(x, y, MPI.SUM,
                                                       algorithm=alg), reps)

for alg in ("hierarchical", "pairwise", "native"):
    n = (16 << 20) // 4
    a, b = cupy.ones(n, np.float32), cupy.empty(n, np.float32)
    timed(f"cuda alltoall 16 MiB {alg}",
          lambda a=a, b=b, alg=alg: comm.Alltoall(a, b, algorithm=alg), 5)

n = (16 << 20) // 4
for kind, make in (("pageable", lambda: np.ones(n, np.float32)),
                   ("pinned", lambda: cupyx.empty_pinned((n,), np.float32))):
    h, g = make(), make()
    h[...] = 1
    timed(f"host MPI Allreduce 16 MiB {kind}",
          lambda h=h, g=g: world.Allreduce(h, g, MPI.SUM), 10, profile=False)
    timed(f"host mpicoll ring 16 MiB {kind}",
          lambda h=h, g=g: comm.Allreduce(h, g, MPI.SUM, algorithm="ring"),
          10, profile=False)

for mb in (16, 96):
    t = time.perf_counter()
    p = cupyx.empty_pinned((mb << 20,), np.uint8)
    t1 = time.perf_counter()
    del p
    q = cupyx.empty_pinned((mb << 20,), np.uint8)
    t2 = time.perf_counter()
    say(f"pinned {mb} MiB: first {1e3 * (t1 - t):.2f} ms, "
        f"again {1e3 * (t2 - t1):.2f} ms")
    del q
