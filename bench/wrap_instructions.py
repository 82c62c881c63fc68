"""What wrapping a communicator adds to a repeated call, in instructions.

    python bench/wrap_instructions.py                 # needs valgrind
    python bench/wrap_instructions.py -c bcast,barrier
    MPICOLL_PURE=1 python bench/wrap_instructions.py  # the Python twins

Times cannot tell a fraction of a microsecond apart on a shared VM; an
instruction count can, and it does not change from run to run. Each call
runs alone at one rank (``MPI.COMM_WORLD`` of a singleton), first on the
raw communicator, then on ``mpicoll.Comm`` of it, in the form of mpi4py's
OSU demos (``[mmap, 8, MPI.BYTE]``, one list reused over the loop; the
reductions on 2-float32 NumPy arrays); ``-view`` and ``-new`` make new
objects for every call, as the same Python expression on both sides
(``memoryview(b)[:8]``; slices ``x[:2], y[:2]``). The loop runs in C
(``collections.deque(starmap(method, repeat(args, n)), maxlen=0)``) so
that only the calls are counted: valgrind's callgrind counts the
instructions executed inside ``deque``'s loop, for ``n`` = 1,000 and
3,000 calls, and the difference over 2,000 calls is one call's count
(start-up, warm-up and the first, parsed call cancel out).

Columns: instructions per call raw and wrapped, and what wrapping adds.
"""

from __future__ import annotations

import argparse
import mmap
import os
import subprocess
import sys
import tempfile
from collections import deque
from itertools import repeat, starmap

CALLS = ("bcast", "gather", "allreduce", "barrier", "bcast-view",
         "allreduce-new")
LOOPS = (1000, 3000)


def arguments(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-c", "--calls", default=",".join(CALLS),
                   help=f"comma list of {', '.join(CALLS)}")
    p.add_argument("--loop", nargs=3, metavar=("SIDE", "CALL", "N"),
                   help=argparse.SUPPRESS)  # the counted child process
    return p.parse_args(argv)


def loop(side: str, call: str, n: int) -> None:
    """Make ``n`` calls of ``call`` on the ``side`` communicator (raw or
    mpicoll), after a first call that keeps it for replay."""
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if side == "mpicoll":
        import mpicoll
        comm = mpicoll.Comm(comm)
    buf = mmap.mmap(-1, 8)
    msg = [buf, 8, MPI.BYTE]
    x, y = np.ones(2, np.float32), np.zeros(2, np.float32)
    b = bytearray(8)
    method, args = {
        "bcast": (comm.Bcast, (msg, 0)),
        "gather": (comm.Gather, (msg, [mmap.mmap(-1, 8 * comm.size), 8,
                                       MPI.BYTE], 0)),
        "allreduce": (comm.Allreduce, (x, y, MPI.SUM)),
        "barrier": (comm.Barrier, ()),
        "bcast-view": (comm.Bcast, lambda: (memoryview(b)[:8], 0)),
        "allreduce-new": (comm.Allreduce, lambda: (x[:2], y[:2], MPI.SUM)),
    }[call]
    if callable(args):  # new objects every call
        method(*args())
        calls = starmap(method, (args() for _ in range(n)))
    else:
        method(*args)
        calls = starmap(method, repeat(args, n))
    deque(calls, maxlen=0)


def counted(side: str, call: str, n: int) -> int:
    """Instructions executed inside the loop of ``n`` calls."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
             "--toggle-collect=consume_iterator", sys.executable, __file__,
             "--loop", side, call, str(n)],
            check=True, capture_output=True, timeout=600)
        with open(out) as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
    raise RuntimeError("callgrind wrote no total")


def main(argv=None) -> None:
    args = arguments(argv)
    if args.loop:
        side, call, n = args.loop
        loop(side, call, int(n))
        return
    from mpicoll.engine import gate
    twins = "Python" if gate.FastGate is gate.Gate else "C"
    print(f"# instructions per call, 1 rank, {LOOPS[1] - LOOPS[0]} calls "
          f"counted; mpicoll's {twins} twins")
    print(f"{'call':<10} {'raw':>8} {'mpicoll':>8} {'added':>8}")
    first, last = LOOPS
    for call in args.calls.split(","):
        per = {}
        for side in ("raw", "mpicoll"):
            per[side] = (counted(side, call, last) -
                         counted(side, call, first)) / (last - first)
        print(f"{call:<10} {per['raw']:8.0f} {per['mpicoll']:8.0f} "
              f"{per['mpicoll'] - per['raw']:+8.0f}", flush=True)


if __name__ == "__main__":
    main()
