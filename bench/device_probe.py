"""Where the staged device path spends its time: a profile per call.

    mpiexec -n 2 python bench/device_probe.py [--device cuda|model]

Times, on rank 0, mpicoll calls on device arrays (allreduce of 8 B and 16
MiB, native and ring; all-to-all of 16 MiB, hierarchical, pairwise and
native), each after 3 warm-up calls and each call followed by a
synchronisation of the current stream, and prints the 10 functions with
the most time of their own (``cProfile``). Then, on host memory, MPI's own
Allreduce and mpicoll's ring on 16 MiB of pageable and of pinned memory:
whether the MPI library treats pinned memory differently. Last, what
allocating 16 and 96 MiB of pinned memory costs, first and again (CuPy's
pinned pool). ``--device cuda`` (the default) needs CuPy and a GPU;
``model`` runs the same on the host model of CUDA (a dry run).

A diagnostic, not a benchmark: a profiled call is slower than a plain
one, and the host numbers are single runs.
"""

import argparse
import cProfile
import pstats
import sys
import time
import traceback

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.bench.device import synchronizer, to_device, unavailable
from mpicoll.device import cuda, hostmodel

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--device", choices=("cuda", "model"), default="cuda")
device = ap.parse_args().device
if unavailable(device) is not None:
    raise SystemExit(unavailable(device))
runtime = hostmodel.from_environment() if device == "model" \
    else cuda.cupy_runtime()
world = MPI.COMM_WORLD
comm = mpicoll.Comm(world)
rank, size = world.rank, world.size
sync = synchronizer(device)


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


def arrays(nbytes):
    n = nbytes // 4
    return (to_device(np.ones(n, np.float32), device),
            to_device(np.ones(n, np.float32), device))


for nbytes, reps in ((8, 200), (16 << 20, 10)):
    x, y = arrays(nbytes)
    for alg in ("native", "ring"):
        timed(f"{device} allreduce {nbytes} B {alg}",
              lambda x=x, y=y, alg=alg: comm.Allreduce(x, y, MPI.SUM,
                                                       algorithm=alg), reps)

for alg in ("hierarchical", "pairwise", "native"):
    n = (16 << 20) // 4
    a, b = (to_device(np.ones(n, np.float32), device),
            to_device(np.empty(n, np.float32), device))
    timed(f"{device} alltoall 16 MiB {alg}",
          lambda a=a, b=b, alg=alg: comm.Alltoall(a, b, algorithm=alg), 5)

n = (16 << 20) // 4
for kind, make in (("pageable", lambda: np.ones(n, np.float32)),
                   ("pinned", lambda: runtime.pinned_empty(n, np.float32))):
    h, g = make(), make()
    h[...] = 1
    timed(f"host MPI Allreduce 16 MiB {kind}",
          lambda h=h, g=g: world.Allreduce(h, g, MPI.SUM), 10, profile=False)
    timed(f"host mpicoll ring 16 MiB {kind}",
          lambda h=h, g=g: comm.Allreduce(h, g, MPI.SUM, algorithm="ring"),
          10, profile=False)

for mb in (16, 96):
    t = time.perf_counter()
    p = runtime.pinned_empty(mb << 20, np.uint8)
    t1 = time.perf_counter()
    del p
    q = runtime.pinned_empty(mb << 20, np.uint8)
    t2 = time.perf_counter()
    say(f"pinned {mb} MiB: first {1e3 * (t1 - t):.2f} ms, "
        f"again {1e3 * (t2 - t1):.2f} ms")
    del q
