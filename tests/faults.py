"""Fault scenarios for tests/jobs/test_faults.py, one per run:

    mpiexec -n 3 python [-m mpi4py] tests/faults.py SCENARIO TIMEOUT ACTION

Rank 1 misbehaves; every rank prints ``rank R pid P`` first, then one line
per outcome: ``rank R raised NAME after S s: TEXT`` or ``rank R done``.
A rank that raised exits with status 3. Scenarios:

- ``skip``: rank 1 skips one allreduce (and sleeps past the deadline);
- ``kill``: rank 1 SIGKILLs itself during large hand-built allreduces;
- ``stop``: rank 1 SIGSTOPs itself before an allreduce;
- ``op``: a user op raises on rank 1 inside a hand-built allreduce;
- ``first``: rank 1 skips the first collective on a new communicator
  (its wrapper's first call makes mpicoll's private duplicate);
- ``split``: the world split by ``rank % 2``; rank 1 skips a collective
  of its half (ranks 1, 3, ...), whose other ranks time out, while the
  even half makes 50 allreduces undisturbed (run it on 4 ranks);
- ``raise``: rank 1 leaves the program (an uncaught exception) before an
  allreduce the others make;
- ``agree``: rank 1 skips a ``split`` (mpicoll's, whose arguments every
  rank agrees on first);
- ``straggle``: nothing fails: rank 1 sleeps 30 ms before each of 20
  allreduces, then every rank writes its trace (``mpicoll.dump_trace``).

ACTION ``default`` wraps the communicators with no keyword, as a program
that only wraps them does: the deadline is then the environment's
(``MPICOLL_TIMEOUT``) or mpicoll's default, kept by the watch thread.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import numpy as np
from mpi4py import MPI

import mpicoll


def say(line: str) -> None:
    """One line in one write, flushed (ranks share the launcher's output)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(scenario: str, timeout: float, action: str) -> int:
    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    say(f"rank {rank} pid {os.getpid()}")
    def wrap(c):
        if action == "default":
            return mpicoll.Comm(c)
        return mpicoll.Comm(c, timeout=timeout, on_timeout=action)

    comm = wrap(world)
    x, y = np.ones(8), np.empty(8)
    comm.Allreduce(x, y, MPI.SUM)  # everyone up and connected
    start = time.monotonic()
    try:
        if scenario == "skip":
            if rank == 1:
                time.sleep(2 * timeout + 3)
            else:
                comm.Allreduce(x, y, MPI.SUM)
        elif scenario == "first":
            new = wrap(world.Dup())
            start = time.monotonic()
            if rank == 1:
                time.sleep(2 * timeout + 3)
            else:
                new.Allreduce(x, y, MPI.SUM)
        elif scenario == "kill":
            big = np.ones(1 << 21, np.float32)
            out = np.empty_like(big)
            if rank == 1:
                threading.Timer(0.3, os.kill,
                                (os.getpid(), signal.SIGKILL)).start()
            for _ in range(10_000):
                comm.Allreduce(big, out, MPI.SUM, algorithm="ring")
        elif scenario == "stop":
            if rank == 1:
                os.kill(os.getpid(), signal.SIGSTOP)
            comm.Allreduce(x, y, MPI.SUM, algorithm="recursive_doubling")
        elif scenario == "op":
            def add(inbuf, inoutbuf, datatype):
                if rank == 1:
                    raise RuntimeError("the user op failed on rank 1")
                a = np.frombuffer(inbuf, np.float64)
                b = np.frombuffer(inoutbuf, np.float64)
                b += a

            op = MPI.Op.Create(add, commute=True)
            comm.Allreduce(x, y, op, algorithm="ring")
        elif scenario == "split":
            half = comm.split(rank % 2, rank)
            if rank % 2 == 1:
                if rank != 1:
                    half.Allreduce(x, y, MPI.SUM)  # rank 1 skips it
                else:
                    time.sleep(2 * timeout + 3)
            else:
                for _ in range(50):
                    half.Allreduce(x, y, MPI.SUM, algorithm="ring")
                assert np.all(y == half.Get_size())
        elif scenario == "raise":
            if rank == 1:
                raise RuntimeError("rank 1 gives up before the allreduce")
            comm.Allreduce(x, y, MPI.SUM)
        elif scenario == "agree":
            if rank == 1:
                time.sleep(2 * timeout + 3)
            else:
                comm.split(0, rank)  # its arguments agreed first
        elif scenario == "straggle":
            for _ in range(20):
                if rank == 1:
                    time.sleep(0.03)
                comm.Allreduce(x, y, MPI.SUM)
            mpicoll.dump_trace()
        else:
            raise SystemExit(f"unknown scenario {scenario!r}")
    except Exception as exc:
        if scenario == "raise":
            raise  # uncaught, as in a program that does not expect it
        say(f"rank {rank} raised {type(exc).__name__} after "
            f"{time.monotonic() - start:.2f} s: {exc}")
        return 3
    say(f"rank {rank} done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], float(sys.argv[2]), sys.argv[3]))
