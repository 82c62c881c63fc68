"""What each CUDA operation of a staged call costs on this GPU, without
mpicoll.

    mpiexec -n 1 python bench/device_latency.py [--device cuda|model]
    mpiexec -n 2 python bench/device_latency.py

Per operation, on every rank (2,000 times after 50, rank 0 prints every
rank's mean): creating an event; recording one on a stream; querying a
completed event; a stream's wait on an event; launching an 8-byte copy
from device to pinned memory (no wait); that copy with an event behind it,
waited for (one staged step of a small message); the same from pinned
memory to the device; a small kernel and a stream synchronisation;
synchronising an idle stream; an MPI Barrier. The operations go through
mpicoll's runtime interface (:mod:`mpicoll.device.cuda`), as mpicoll makes
them: on ``cuda`` CuPy's, on ``model`` the host model's
(:mod:`mpicoll.device.hostmodel`, latencies from
``MPICOLL_MODEL_LATENCIES``), a dry run. With two or more ranks on one GPU
(no MPS) the times show what sharing it costs. The first rows are the
model's ``launch`` and ``query``, the copy rows its ``copy`` (less a
launch): what to give ``bench/device_model.py --latencies``.
"""

import argparse
import time

import numpy as np
from mpi4py import MPI

from mpicoll.bench.device import unavailable
from mpicoll.device import cuda, hostmodel

world = MPI.COMM_WORLD


def per_call(fn, reps=2000):
    for _ in range(50):
        fn()
    world.Barrier()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps * 1e6


def cases(runtime):
    """``{name: function}``: one operation each."""
    xp = runtime.xp
    stream = runtime.new_stream(0)
    d = runtime.empty(2, np.float32, 0)
    d2 = runtime.empty(2, np.float32, 0)
    h = runtime.pinned_empty(2, np.float32)
    done = runtime.new_event(0)
    done.record(stream)
    done.synchronize()
    event = runtime.new_event(0)

    def copy_waited(dst, src):
        def fn():
            runtime.copy_async(dst, src, stream)
            event.record(stream)
            event.synchronize()
        return fn

    def kernel_sync():
        with runtime.use(0, stream):
            xp.copyto(d, d2)
        stream.synchronize()

    return {
        "new event": lambda: runtime.new_event(0),
        "event record": lambda: done.record(stream),
        "event query, complete": lambda: done.done,
        "stream waits on an event": lambda: stream.wait_event(done),
        "8 B device->pinned copy, launched": lambda: runtime.copy_async(
            h, d, stream),
        "8 B device->pinned copy, event, synchronize": copy_waited(h, d),
        "8 B pinned->device copy, event, synchronize": copy_waited(d, h),
        "small kernel, stream synchronize": kernel_sync,
        "idle stream synchronize": stream.synchronize,
        "MPI Barrier": world.Barrier,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("cuda", "model"), default="cuda")
    args = ap.parse_args()
    missing = unavailable(args.device)
    if missing is not None:
        raise SystemExit(missing)
    runtime = hostmodel.from_environment() if args.device == "model" \
        else cuda.cupy_runtime()
    if world.rank == 0:
        what = f"host model: {hostmodel.latencies()}" \
            if args.device == "model" else "CuPy"
        print(f"# {world.size} rank(s), {what}; us per operation, "
              f"each rank's mean of 2000")
    for name, fn in cases(runtime).items():
        us = world.gather(per_call(fn), 0)
        if world.rank == 0:
            print(f"{name:45} " + " ".join(f"{u:8.1f}" for u in us))


if __name__ == "__main__":
    main()
