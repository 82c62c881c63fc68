"""Allreduce speed: every algorithm against native MPI, interleaved.

    mpiexec -n 2 python bench/allreduce_speed.py            # 8 B .. 64 MiB
    mpiexec -n 2 python bench/allreduce_speed.py --inplace --thread-level single

For each message size, rounds of timing visit every algorithm in turn (so a
change of the VM's speed state hits them all alike); each visit times a batch
of calls between barriers, takes the slowest rank's time per call, and the
table reports the median visit. Column ``mpi4py`` is the MPI library's call
made directly through mpi4py (no mpicoll in the way); ``native`` is the same
call through ``mpicoll.Comm`` (so their difference is mpicoll's per-call
overhead); ``auto`` is whatever mpicoll's selection picks. ``ratio`` is
time / mpi4py time: below 1 is faster than calling MPI directly. float32
SUM on integer-valued data, checked exactly after timing. Rank 0 prints
the table with the MPI library, thread level and rank count.
"""

from __future__ import annotations

import argparse
import statistics
import time


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def arguments():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--min", type=parse_size, default=8, help="bytes")
    p.add_argument("--max", type=parse_size, default=64 << 20, help="bytes")
    p.add_argument("--inplace", action="store_true",
                   help="MPI.IN_PLACE calls (default: separate buffers)")
    p.add_argument("--thread-level", choices=["single", "multiple"],
                   default="multiple", help="mpi4py.rc.thread_level")
    p.add_argument("--rounds", type=int, default=7,
                   help="interleaved visits per algorithm and size")
    p.add_argument("--batch-seconds", type=float, default=0.01,
                   help="target length of one timed batch")
    return p.parse_args()


def main() -> None:
    args = arguments()
    import mpi4py

    mpi4py.rc.thread_level = args.thread_level
    from mpi4py import MPI

    import mpicoll

    comm = mpicoll.Comm(MPI.COMM_WORLD)
    names = ["mpi4py", "native", *[a for a in mpicoll.algorithms("allreduce")
                         if a != "native"], "auto"]
    if comm.rank == 0:
        level = {MPI.THREAD_SINGLE: "single", MPI.THREAD_FUNNELED: "funneled",
                 MPI.THREAD_SERIALIZED: "serialized",
                 MPI.THREAD_MULTIPLE: "multiple"}[MPI.Query_thread()]
        print(f"# allreduce float32 sum, {comm.size} ranks, "
              f"{'in place' if args.inplace else 'out of place'}, "
              f"thread level {level}")
        print(f"# {MPI.Get_library_version().splitlines()[0].strip()}")
        print("# time: median over rounds of the slowest rank's µs per call;"
              " ratio = time / mpi4py")
        header = f"{'bytes':>10}" + "".join(f"{n:>22}" for n in names)
        print(header)

    size = args.min
    while size <= args.max:
        times = measure(comm, names, size // 4 or 1, args)
        if comm.rank == 0:
            native = statistics.median(times["mpi4py"])
            cells = [f"{statistics.median(t) * 1e6:11.1f} "
                     f"({statistics.median(t) / native:5.2f})"
                     for t in times.values()]
            print(f"{max(size, 4):>10}" + "".join(f"{c:>22}" for c in cells),
                  flush=True)
        size *= 2
    if comm.rank == 0:
        picks = ", ".join(f"{s} B: {auto_pick(comm, s)}"
                          for s in (8, 16 << 10, 1 << 20))
        print(f"# auto picks: {picks}")


def auto_pick(comm, nbytes: int) -> str:
    choice = comm.explain("allreduce", count=nbytes // 4, dtype="float32")
    return choice.algorithm.name


def measure(comm, names, count: int, args) -> dict[str, list[float]]:
    """Interleaved timings of every algorithm for one message size."""
    import numpy as np
    from mpi4py import MPI

    world = comm.mpi
    send = np.arange(count, dtype=np.float32) % 1024 + comm.rank
    recv = np.empty_like(send)
    expected = (np.arange(count, dtype=np.float32) % 1024) * comm.size \
        + sum(range(comm.size))

    def call(name):
        if name == "mpi4py":
            world.Allreduce(MPI.IN_PLACE if args.inplace else send, recv,
                            MPI.SUM)
        elif args.inplace:
            comm.Allreduce(MPI.IN_PLACE, recv, MPI.SUM, algorithm=name)
        else:
            comm.Allreduce(send, recv, MPI.SUM, algorithm=name)

    def batch(name, iters):
        world.Barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            call(name)
        per_call = (time.perf_counter() - t0) / iters
        return world.allreduce(per_call, op=MPI.MAX)

    for name in names:  # warm up, and check the answer once each
        recv[...] = send
        call(name)
        ok = world.allreduce(bool(np.array_equal(recv, expected)),
                             op=MPI.LAND)
        if not ok and comm.rank == 0:
            print(f"# WRONG result: {name} at {count * 4} B")
    probe = batch("mpi4py", 3)
    iters = max(1, min(10000, int(args.batch_seconds / max(probe, 1e-7))))
    iters = world.bcast(iters)
    times = {n: [] for n in names}
    for _ in range(args.rounds):
        for name in names:
            times[name].append(batch(name, iters))
    return times


if __name__ == "__main__":
    main()
