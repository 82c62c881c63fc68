"""What wrapping a communicator costs: mpi4py's own benchmark loops and
every buffer form, raw communicator against ``mpicoll.Comm``.

    mpiexec -n 2 python -m mpi4py bench/wrap_cost.py demos   # OSU-style loops
    mpiexec -n 2 python -m mpi4py bench/wrap_cost.py forms   # one row a form
    mpiexec -n 2 python -m mpi4py bench/wrap_cost.py forms -c Gatherv,Alltoallv

``demos`` times the loops of mpi4py's ``demo/osu_*.py`` programs: for each
message size one message list (``[buf, size, MPI.BYTE]`` on an ``mmap``
buffer, or ``--numpy`` a NumPy one) is made and reused over the loop,
``skip`` untimed calls and ``loop`` timed ones after a barrier (1000 and
10000 up to 8 KiB, 10 and 100 above, as the demos; ``--scale`` multiplies
them). Bcast, Allgather (in place, as the demo), Alltoall, Gather,
Scatter, Barrier, and Reduce and Allreduce the same way. The raw
communicator and ``mpicoll.Comm(MPI.COMM_WORLD)`` take turns on the same
objects, ``--runs`` times per size; each row is the median over the runs
of rank 0's latency and of the ratio mpicoll / raw.

``forms`` times each buffer form mpi4py takes, for each kind of buffer,
at 8 B, 4 KiB and 256 KiB: the same objects every call, and new ones
every call (a new list, a new view: made alike for both communicators).
Each cell is the best of ``--runs`` rounds of ``--calls`` calls after a
barrier, raw and wrapped in turn; ``+us`` is mpicoll's time less raw's,
and ``auto`` says whether ``auto`` ran the MPI library (``native``) for
that call or a hand-built algorithm.
"""

from __future__ import annotations

import argparse
import array
import mmap
import statistics
import time

import numpy as np
from mpi4py import MPI

import mpicoll

DEMOS = ("bcast", "allgather", "alltoall", "gather", "scatter", "barrier",
         "reduce", "allreduce")
FORM_SIZES = (8, 4096, 256 * 1024)


def arguments(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("part", choices=("demos", "forms"))
    p.add_argument("-c", "--collective", default=None,
                   help="comma list: demos' collectives (default all), or "
                        "forms' calls (e.g. Gatherv,Alltoallv; default all)")
    p.add_argument("-e", "--maxbytes", type=int, default=1 << 20)
    p.add_argument("--numpy", action="store_true",
                   help="demos: NumPy buffers instead of mmap")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--scale", type=float, default=1.0,
                   help="demos: multiply the loop counts")
    p.add_argument("--calls", type=int, default=2000,
                   help="forms: calls per round")
    return p.parse_args(argv)


# ------------------------------------------------------------------ demos

def allocate(n: int, numpy: bool):
    return np.zeros(n, np.uint8) if numpy else mmap.mmap(-1, max(n, 1))


def demo_call(comm, collective: str, size: int, bufs) -> callable:
    """The demo's call on ``comm`` for messages of ``size`` bytes, its
    message lists made once (as the demos make them before the loop)."""
    p = comm.Get_size()
    s, r = bufs
    if collective == "bcast":
        msg = [s, size, MPI.BYTE]
        return lambda: comm.Bcast(msg, 0)
    if collective == "allgather":
        msg = [r, size, MPI.BYTE]
        return lambda: comm.Allgather(MPI.IN_PLACE, msg)
    if collective == "alltoall":
        smsg, rmsg = [s, size, MPI.BYTE], [r, size, MPI.BYTE]
        return lambda: comm.Alltoall(smsg, rmsg)
    if collective == "gather":
        smsg, rmsg = [s, size, MPI.BYTE], [r, size, MPI.BYTE]
        return lambda: comm.Gather(smsg, rmsg, 0)
    if collective == "scatter":
        smsg, rmsg = [r, size, MPI.BYTE], [s, size, MPI.BYTE]
        return lambda: comm.Scatter(smsg, rmsg, 0)
    if collective == "barrier":
        return comm.Barrier
    count = max(size // 4, 1)  # reductions: float32, as OSU's
    smsg, rmsg = [s, count, MPI.FLOAT], [r, count, MPI.FLOAT]
    if collective == "reduce":
        return lambda: comm.Reduce(smsg, rmsg, MPI.SUM, 0)
    assert p and collective == "allreduce"
    return lambda: comm.Allreduce(smsg, rmsg, MPI.SUM)


def demo_latency(comm, call, skip: int, loop: int) -> float:
    """The demo's latency in µs: ``skip`` calls, then ``loop`` timed."""
    comm.Barrier()
    for _ in range(skip):
        call()
    start = MPI.Wtime()
    for _ in range(loop):
        call()
    end = MPI.Wtime()
    comm.Barrier()
    return (end - start) * 1e6 / loop


def demos(args, world) -> None:
    wrapped = mpicoll.Comm(world)
    p = world.Get_size()
    top = args.maxbytes
    bufs = (allocate(top * p, args.numpy), allocate(top * p, args.numpy))
    kind = "NumPy" if args.numpy else "mmap"
    for collective in (args.collective or ",".join(DEMOS)).split(","):
        sizes = [0, 1] if collective != "barrier" else [0]
        while collective != "barrier" and sizes[-1] * 2 <= top:
            sizes.append(sizes[-1] * 2)
        if world.rank == 0:
            print(f"# {collective}, {p} ranks, {kind} buffers, one message "
                  f"list per size (mpi4py's demo loop); median of "
                  f"{args.runs} interleaved runs")
            print(f"# {'bytes':>8} {'raw us':>10} {'mpicoll us':>11} "
                  f"{'ratio':>6}")
        for size in sizes:
            skip, loop = (1000, 10000) if size <= 8192 else (10, 100)
            skip, loop = max(1, int(skip * args.scale)), \
                max(1, int(loop * args.scale))
            raw = demo_call(world, collective, size, bufs)
            ours = demo_call(wrapped, collective, size, bufs)
            times = {"raw": [], "ours": []}
            for _ in range(args.runs):
                times["raw"].append(demo_latency(world, raw, skip, loop))
                times["ours"].append(demo_latency(wrapped, ours, skip, loop))
            ratio = statistics.median(o / r for o, r in
                                      zip(times["ours"], times["raw"]))
            if world.rank == 0:
                print(f"  {size:>8} {statistics.median(times['raw']):>10.2f} "
                      f"{statistics.median(times['ours']):>11.2f} "
                      f"{ratio:>6.2f}", flush=True)


# ------------------------------------------------------------------ forms

class DLPackOnly:
    """A buffer reachable only through DLPack (no buffer protocol)."""

    def __init__(self, array: np.ndarray) -> None:
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def byte_buffers(n: int) -> dict:
    """Each kind of buffer of ``n`` bytes, and how to view a new object of
    its kind over the same memory (for the new-objects rows)."""
    a = np.zeros(n, np.uint8)
    ba = bytearray(n)
    mm = mmap.mmap(-1, max(n, 1))
    arr = array.array("B", bytes(n))
    return {
        "NumPy": (a, lambda: a[:n]),
        "bytearray": (ba, lambda: memoryview(ba)),
        "memoryview": (memoryview(ba), lambda: memoryview(ba)[:n]),
        "mmap": (mm, lambda: memoryview(mm)[:n]),
        "array.array": (arr, lambda: memoryview(arr)),
        "DLPack": (DLPackOnly(a), lambda: DLPackOnly(a)),
    }


def bcast_forms(n: int) -> list:
    """(form, buffer kind, the same objects' spec, a new spec per call)."""
    rows = []
    for kind, (buf, fresh) in byte_buffers(n).items():
        rows.append(("buf", kind, buf, fresh))
        rows.append(("[buf, count, TYPE]", kind, [buf, n, MPI.BYTE],
                     lambda f=fresh: [f(), n, MPI.BYTE]))
    a = np.zeros(n, np.uint8)
    for form, spec, make in (
            ("[buf, TYPE]", [a, MPI.BYTE], lambda: [a, MPI.BYTE]),
            ("[buf, count]", [a, n], lambda: [a, n]),
            ("[buf, (count, displ), TYPE]", [a, (n, 0), MPI.BYTE],
             lambda: [a, (n, 0), MPI.BYTE]),
            ("[buf, 'B']", [a, "B"], lambda: [a, "B"])):
        rows.append((form, "NumPy", spec, make))
    return rows


def forms_cases(world) -> list:
    """(call, form, buffer kind, bytes, the call on the same objects, the
    call on new objects, (collective, count) for its auto choice) for
    every row."""
    p = world.Get_size()
    cases = []
    for n in FORM_SIZES:
        cases += bcast_cases(n) + allreduce_cases(n) + gather_cases(p, n)
    return cases


def bcast_cases(n: int) -> list:
    return [("Bcast", form, kind, n, lambda c, s=spec: c.Bcast(s, 0),
             lambda c, m=make: c.Bcast(m(), 0), ("bcast", n))
            for form, kind, spec, make in bcast_forms(n)]


def allreduce_cases(n: int) -> list:
    k = n // 8
    x, y = np.ones(k), np.zeros(k)
    forms = {  # form: (send, recv) of the same objects, then new ones
        "buf": ((x, y), lambda: (x[:k], y[:k])),
        "[buf, TYPE]": (([x, MPI.DOUBLE], [y, MPI.DOUBLE]),
                        lambda: ([x, MPI.DOUBLE], [y, MPI.DOUBLE])),
        "[buf, count, TYPE]": (([x, k, MPI.DOUBLE], [y, k, MPI.DOUBLE]),
                               lambda: ([x, k, MPI.DOUBLE],
                                        [y, k, MPI.DOUBLE])),
        "IN_PLACE": ((MPI.IN_PLACE, y), lambda: (MPI.IN_PLACE, y[:k])),
    }
    return [("Allreduce", form, "NumPy", n,
             lambda c, s=same: c.Allreduce(*s, MPI.SUM),
             lambda c, m=make: c.Allreduce(*m(), MPI.SUM),
             ("allreduce", k))
            for form, (same, make) in forms.items()]


def gather_cases(p: int, n: int) -> list:
    g, t = np.zeros(n * p, np.uint8), np.zeros(n * p, np.uint8)
    own = np.zeros(n, np.uint8)
    counts, displs = [n] * p, [n * i for i in range(p)]
    osu, vg = [g, n, MPI.BYTE], [g, (counts, displs), MPI.BYTE]
    vt = [t, (counts, displs), MPI.BYTE]
    return [
        ("Allgather", "IN_PLACE, [buf, count, TYPE]", "NumPy", n,
         lambda c: c.Allgather(MPI.IN_PLACE, osu),
         lambda c: c.Allgather(MPI.IN_PLACE, [g, n, MPI.BYTE]),
         ("allgather", n)),
        ("Allgather", "buf, buf", "NumPy", n,
         lambda c: c.Allgather(own, g),
         lambda c: c.Allgather(own[:n], g[:n * p]), ("allgather", n)),
        ("Allgatherv", "[buf, (counts, displs), TYPE]", "NumPy", n,
         lambda c: c.Allgatherv(own, vg),
         lambda c: c.Allgatherv(own[:n], [g, (counts, displs), MPI.BYTE]),
         ("allgatherv", n)),
        ("Alltoallv", "[buf, (counts, displs), TYPE]", "NumPy", n,
         lambda c: c.Alltoallv(vt, vg),
         lambda c: c.Alltoallv([t, (counts, displs), MPI.BYTE],
                               [g, (counts, displs), MPI.BYTE]),
         ("alltoallv", n)),
        ("Gatherv", "[buf, (counts, displs), TYPE]", "NumPy", n,
         lambda c: c.Gatherv(own, vg, 0),
         lambda c: c.Gatherv(own[:n], [g, (counts, displs), MPI.BYTE], 0),
         ("gatherv", n)),
        ("Scatterv", "[buf, (counts, displs), TYPE]", "NumPy", n,
         lambda c: c.Scatterv(vt, own, 0),
         lambda c: c.Scatterv([t, (counts, displs), MPI.BYTE], own[:n], 0),
         ("scatterv", n)),
    ]


def best_us(comm, call, calls: int) -> float:
    comm.Barrier()
    start = time.perf_counter()
    for _ in range(calls):
        call(comm)
    elapsed = time.perf_counter() - start
    comm.Barrier()
    return elapsed / calls * 1e6


def forms(args, world) -> None:
    wrapped = mpicoll.Comm(world)
    p = world.Get_size()
    if world.rank == 0:
        print(f"# every buffer form, {p} ranks; best of {args.runs} rounds "
              f"of {args.calls} calls, raw and mpicoll in turn; +us = "
              f"mpicoll - raw")
        print(f"# {'call':<11}{'form':<31}{'buffer':<12}{'bytes':>7} "
              f"{'auto':<7}{'same raw':>9}{'+us':>7}{'new raw':>9}"
              f"{'+us':>7}")
    only = args.collective and args.collective.split(",")
    for name, form, kind, n, same, new, (collective, count) in \
            forms_cases(world):
        if only and name not in only:
            continue
        dtype = "float64" if collective == "allreduce" else "uint8"
        choice = wrapped.explain(collective, count=count, dtype=dtype)
        auto = "native" if choice.algorithm.native else "built"
        cells = []
        for call in (same, new):
            raw, ours = [], []
            for _ in range(args.runs):
                raw.append(best_us(world, call, args.calls))
                ours.append(best_us(wrapped, call, args.calls))
            cells.append((min(raw), min(ours) - min(raw)))
        if world.rank == 0:
            print(f"  {name:<11}{form:<31}{kind:<12}{n:>7} {auto:<7}"
                  f"{cells[0][0]:>9.2f}{cells[0][1]:>+7.2f}"
                  f"{cells[1][0]:>9.2f}{cells[1][1]:>+7.2f}", flush=True)


def main(argv=None) -> int:
    args = arguments(argv)
    world = MPI.COMM_WORLD
    if world.rank == 0:
        print(f"# {MPI.Get_library_version().splitlines()[0]}, mpi4py "
              f"{__import__('mpi4py').__version__}, thread level "
              f"{MPI.Query_thread()} (3 = multiple)")
    (demos if args.part == "demos" else forms)(args, world)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
