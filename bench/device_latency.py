"""What one staged step costs on this GPU, without mpicoll.

    mpiexec -n 1 python bench/device_latency.py; mpiexec -n 2 ...

Per call, on every rank (2,000 calls after 50): synchronising an idle
stream; an 8-byte copy from device to pinned memory on a stream, an event
recorded behind it and waited for (one staged step of a small message);
a fill kernel and a stream synchronisation; an MPI Barrier. With two or
more ranks on one GPU (no MPS) the first three show what sharing costs.
"""

import time

import cupy
import cupyx
import numpy as np
from mpi4py import MPI

world = MPI.COMM_WORLD
stream = cupy.cuda.Stream(non_blocking=True)
d = cupy.ones(2, np.float32)
h = cupyx.empty_pinned((2,), np.float32)


def per_call(fn, reps=2000):
    for _ in range(50):
        fn()
    world.Barrier()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps * 1e6


def d2h_event():
    cupy.cuda.runtime.memcpyAsync(h.ctypes.data, d.data.ptr, 8, 4, stream.ptr)
    e = cupy.cuda.Event(disable_timing=True)
    e.record(stream)
    e.synchronize()


def kernel_sync():
    with stream:
        d.fill(1)
    stream.synchronize()


cases = {"empty stream synchronize": stream.synchronize,
         "8 B device->pinned copy, event, synchronize": d2h_event,
         "fill kernel, stream synchronize": kernel_sync,
         "MPI Barrier": world.Barrier}
for name, fn in cases.items():
    us = world.gather(per_call(fn), 0)
    if world.rank == 0:
        print(f"{world.size} rank(s): {name}: "
              + ", ".join(f"{u:.1f}" for u in us) + " us per call")
