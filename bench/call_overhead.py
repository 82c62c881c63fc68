"""Per-call cost of going through mpicoll, on one rank (no messages).

    python bench/call_overhead.py
    mpiexec -n 2 python bench/call_overhead.py --world

Times a repeated 8-byte allreduce on ``MPI.COMM_SELF`` made these ways:
mpi4py's own ``Allreduce``; ``mpicoll.Comm.Allreduce`` and
``mpicoll.ProcessGroup.all_reduce`` with ``algorithm="native"`` (the same
MPI call behind mpicoll's checks, which a repeated call replays); the
same two with a hand-built schedule
(``recursive_doubling``, which on one rank is a single local copy); and
the persistent forms (mpi4py's ``Allreduce_init`` and mpicoll's, native
and hand-built: one ``Start`` and one ``Wait`` per call); and
``Comm.Allreduce`` native in check mode (``check=True``: one fingerprint
exchange per call, timed alone on the next row: mpi4py's ``Iallgather``
of 24 bytes per rank and its ``Wait``) and under a polled deadline
(``timeout=60, on_timeout="raise"``: the nonblocking call polled by the
watchdog). Every ``mpicoll`` row runs with the default guards (the
deadline's watch thread and the flight recorder). The differences are
mpicoll's Python cost per
call; each number is the best of 5 runs of 20000 calls. Three rows time
the nonblocking call waited on at once (mpi4py's, and mpicoll's native
and hand-built, whose request is a generalized one). Three rows
make new views of the arrays for every call: mpi4py's call on them, and
mpicoll's native and hand-built calls, which find them alike to the
earlier call's (:mod:`mpicoll.engine.likeness`: no parse; the hand-built
plan bound again to the new views). Two rows alternate two pairs of
arrays, as double buffering does: the second pair, alike to the first,
is run by likeness once and then kept for replay when it comes again
among its kind's recent calls. Two more rows split a replayed call:
mpi4py's call as the replay makes it (with the datatype named) and the
replay's lookup alone. ``--world`` runs on
``MPI.COMM_WORLD`` instead (rank 0 prints), so the check exchange and the
calls themselves cost their messages too.

    python bench/call_overhead.py --guards [--world]

times instead what the default guards cost: the replayed blocking
``Allreduce`` and a persistent ``Start`` + ``Wait`` (native), with the
defaults and with both guards off (``timeout=0``,
``MPICOLL_TRACE_BUFFER=0``), in turn in each of :data:`ROUNDS` rounds of
20000 calls; it prints each form's median and the median of the rounds'
differences.
"""

from __future__ import annotations

import os
import statistics
import sys
import timeit
from itertools import cycle

import numpy as np
from mpi4py import MPI

import mpicoll

CALLS = 20000
ROUNDS = 9  # --guards: rounds of each form, with and without the guards


def best_us(fn) -> float:
    return min(timeit.repeat(fn, number=CALLS, repeat=5)) / CALLS * 1e6


def main() -> None:
    world = MPI.COMM_WORLD if "--world" in sys.argv else MPI.COMM_SELF
    comm = mpicoll.Comm(world)
    group = mpicoll.ProcessGroup(comm)
    x = np.ones(2, np.float32)
    y = np.empty_like(x)
    z = np.zeros_like(x)  # all_reduce's in-place input: a sum keeps it 0
    rows = [("mpi4py Allreduce", lambda: world.Allreduce(x, y, MPI.SUM))]
    for alg in ("native", "recursive_doubling"):
        rows.append((f"mpicoll Allreduce  {alg}",
                     lambda a=alg: comm.Allreduce(x, y, MPI.SUM, algorithm=a)))
        rows.append((f"mpicoll ProcessGroup.all_reduce {alg}",
                     lambda a=alg: group.all_reduce(z, algorithm=a)))
    raw_init = world.Allreduce_init(x, y, MPI.SUM)
    rows.append(("mpi4py Allreduce_init Start+Wait",
                 lambda: (raw_init.Start(), raw_init.Wait())))
    requests = [raw_init]
    for alg in ("native", "recursive_doubling"):
        prepared = comm.Allreduce_init(x, y, MPI.SUM, algorithm=alg)
        requests.append(prepared)
        rows.append((f"mpicoll Allreduce_init {alg} Start+Wait",
                     lambda r=prepared: (r.Start(), r.Wait())))
    checked = mpicoll.Comm(world, check=True)
    rows.append(("mpicoll Allreduce  native, check mode",
                 lambda: checked.Allreduce(x, y, MPI.SUM, algorithm="native")))
    row = np.zeros(3, np.int64)  # check mode's exchange: 24 bytes a rank
    rows_all = np.empty((world.Get_size(), 3), np.int64)
    rows.append(("  of which: mpi4py Iallgather 24 B + Wait",
                 lambda: world.Iallgather(row, rows_all).Wait()))
    bounded = mpicoll.Comm(world, check=False, timeout=60,
                           on_timeout="raise")
    rows.append(("mpicoll Allreduce  native, polled timeout=60",
                 lambda: bounded.Allreduce(x, y, MPI.SUM, algorithm="native")))
    # Nonblocking, waited on at once: a repeated call is relaunched.
    rows.append(("mpi4py Iallreduce + Wait",
                 lambda: world.Iallreduce(x, y, MPI.SUM).Wait()))
    rows.append(("mpicoll Iallreduce native + wait",
                 lambda: comm.Iallreduce(x, y, MPI.SUM,
                                         algorithm="native").wait()))
    rows.append(("mpicoll Iallreduce recursive_doubling + Wait",
                 lambda: comm.Iallreduce(x, y, MPI.SUM,
                                         algorithm="recursive_doubling").Wait()))
    # A call on new objects (fresh views) is parsed and checked in full.
    rows.append(("mpi4py Allreduce, new views per call",
                 lambda: world.Allreduce(x[:], y[:], MPI.SUM)))
    for alg in ("native", "recursive_doubling"):
        rows.append((f"mpicoll Allreduce {alg}, new views per call",
                     lambda a=alg: comm.Allreduce(x[:], y[:], MPI.SUM,
                                                  algorithm=a)))
    # Two pairs of arrays used in turn (double buffering): the second
    # pair, alike to the first, is kept for replay when it comes again.
    for alg in ("native", "recursive_doubling"):
        pairs = cycle([(x, y), (np.ones_like(x), np.empty_like(y))])
        rows.append((f"mpicoll Allreduce {alg}, two pairs in turn",
                     lambda a=alg, p=pairs: comm.Allreduce(
                         *next(p), MPI.SUM, algorithm=a)))
    # Where a replayed call's time goes: the MPI call as the replay makes
    # it (datatype named), and the replay's lookup alone (a miss: the
    # same comparisons, nothing run).
    rows.append(("  of which: mpi4py Allreduce([x, FLOAT])",
                 lambda: world.Allreduce([x, MPI.FLOAT], [y, MPI.FLOAT],
                                         MPI.SUM)))
    engine = comm._engine
    rows.append(("  of which: the replay lookup",
                 lambda: engine.replayed("Allreduce", "none", y, x, MPI.SUM)))
    times = {name: best_us(fn) for name, fn in rows}
    for request in requests:
        request.Free()
    if world.Get_rank() != 0:
        return
    base = times[rows[0][0]]
    print(f"# 8-byte allreduce on {world.Get_name()} ({world.Get_size()} "
          f"ranks), best of 5 x {CALLS} calls")
    width = max(map(len, times))
    for name, t in times.items():
        print(f"{name:{width}s} {t:6.2f} us  (+{t - base:5.2f})")


def guards(world) -> None:
    """The default guards' cost per call (see the module docstring)."""
    x, y = np.ones(2, np.float32), np.empty(2, np.float32)
    on = mpicoll.Comm(world.Dup())
    os.environ["MPICOLL_TRACE_BUFFER"] = "0"  # read when first used
    off = mpicoll.Comm(world.Dup(), timeout=0)
    off.Barrier()
    del os.environ["MPICOLL_TRACE_BUFFER"]
    forms = {}
    for name, comm in (("defaults", on), ("off", off)):
        prepared = comm.Allreduce_init(x, y, MPI.SUM, algorithm="native")
        forms[name] = (
            lambda c=comm: c.Allreduce(x, y, MPI.SUM, algorithm="native"),
            lambda r=prepared: (r.Start(), r.Wait()))
    times: dict[tuple, list] = {}
    for _ in range(ROUNDS):
        for form in (0, 1):
            for name in ("defaults", "off"):
                world.Barrier()
                t = timeit.timeit(forms[name][form], number=CALLS)
                times.setdefault((form, name), []).append(t / CALLS * 1e6)
    if world.Get_rank() != 0:
        return
    print(f"# default guards (deadline watch thread + flight recorder) on "
          f"{world.Get_name()} ({world.Get_size()} ranks): median of "
          f"{ROUNDS} rounds of {CALLS} calls, in turn")
    for form, label in enumerate(("Allreduce native, replayed",
                                  "Allreduce_init native Start+Wait")):
        with_, without = times[(form, "defaults")], times[(form, "off")]
        diff = statistics.median(a - b for a, b in zip(with_, without))
        print(f"{label:34s} defaults {statistics.median(with_):6.2f} us  "
              f"off {statistics.median(without):6.2f} us  "
              f"difference {diff:+5.2f} us")


if __name__ == "__main__":
    if "--guards" in sys.argv:
        guards(MPI.COMM_WORLD if "--world" in sys.argv else MPI.COMM_SELF)
    else:
        main()
