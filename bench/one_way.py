"""One way against both ways at 2 ranks: does a message that goes one way
(a broadcast's) cost less than the calibration's exchange?

    mpiexec -n 2 python -m mpi4py bench/one_way.py [--budget 60]

The calibration (:mod:`mpicoll.bench.calibrate`) prices every message from
*exchanges*: ranks 0 and 1 swap ``n`` fresh bytes in one round, both
directions at once. A broadcast's messages go one way. On shared memory
the two directions of an exchange might share the memory bandwidth, so
that one way costs less. This times, interleaved in one run
(:mod:`mpicoll.bench.harness`, the 5th percentile of both ranks' calls),
per size of the validation (64 KiB to 16 MiB by 4):

- *exchange*: the calibration's point, a copy of ``n`` new bytes into
  the send buffer then the swap, less the copy (timed beside);
- *one way*: the same copy, then rank 0 sends the ``n`` bytes and rank 1
  receives them, less the copy;
- *target written*: the same, but rank 1's copy writes the buffer it then
  receives into, as *bcast* does;
- *bcast*: ``mpicoll``'s binomial broadcast of ``n`` bytes from rank 0
  (at 2 ranks one message), each rank writing its buffer first (as the
  benchmark's ``--rewrite`` did before it wrote a broadcast's buffer at
  the root only), less that write (timed beside);

and the ratios of the last two to the first. On the 2-vCPU development
VM one way cost 0.78 to 1.05 of the exchange at every size, and 0.56 to
0.73 of it at 16 MiB into a buffer just written, as the broadcast did
(``docs/simulation/one-way-n2.txt``): the receiver's write, not one way
against both ways, made that broadcast fast. Here the one-way rank 1
copies too; the calibration's own one-way point (since 2026-11-29),
whose receiver only receives, as a broadcast's does, cost 0.70 to 0.92
of the exchange from 512 KiB, and 1.08 at 16 MiB, in the run of
``docs/simulation/`` (docs/simulation.md, "Calibrated here").
"""

from __future__ import annotations

import argparse
import sys
from functools import partial

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.bench.harness import fit_iterations, summarize, timed_rounds, \
    warm_up
from mpicoll.bench.calibrate import TAG, copying, exchange, one_round
from mpicoll.schedule.core import Span
from mpicoll.engine.executor import run

SIZES = [64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20]


def one_way(rank: int, n: int, target_written: bool = False):
    """The copy of ``n`` new bytes into the send buffer (on both ranks, so
    that their calls are alike; with ``target_written``, rank 1 copies
    them into the buffer it then receives into instead), then one round:
    rank 0 sends them, rank 1 receives them."""
    def build(b):
        written = "recv" if target_written and rank == 1 else "send"
        b.copy(Span("tmp", 0, n), Span(written, 0, n))
        if rank == 0:
            b.exchange(sends=[(1, Span("send", 0, n))])
        else:
            b.exchange(recvs=[(0, Span("recv", 0, n))])

    return one_round(build, {name: np.ones(n, np.uint8)
                             for name in ("send", "recv", "tmp")})


def broadcast(comm: mpicoll.Comm, n: int):
    """A call writing ``n`` bytes on every rank, then broadcasting them
    from rank 0 with the binomial tree."""
    buf = np.ones(n // 4, np.float32)

    def call():
        buf.fill(1.0)
        comm.Bcast(buf, root=0, algorithm="binomial")

    return call


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="bench/one_way.py",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--budget", type=float, default=60.0,
                   help="seconds of timed calls, about; default 60")
    p.add_argument("--sizes", default=",".join(map(str, SIZES)),
                   help="comma list of bytes (multiples of 4); default "
                        "64 KiB to 16 MiB by 4")
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if any(n < 4 or n % 4 for n in sizes):
        p.error("--sizes: each a multiple of 4 bytes (the broadcast's "
                "float32)")
    world = MPI.COMM_WORLD
    if world.Get_size() != 2:
        if world.Get_rank() == 0:
            print("bench/one_way.py runs at 2 ranks", file=sys.stderr)
        return 2
    raw, rank = world.Dup(), world.Get_rank()
    coll = mpicoll.Comm(world.Dup())
    calls = {}
    for n in sizes:
        calls[("exchange", n)] = partial(run, exchange(n, rank ^ 1, True),
                                         raw, TAG)
        calls[("one way", n)] = partial(run, one_way(rank, n), raw, TAG)
        calls[("target written", n)] = partial(
            run, one_way(rank, n, target_written=True), raw, TAG)
        calls[("copy", n)] = partial(run, copying(n), raw, TAG)
        calls[("bcast", n)] = broadcast(coll, n)
        calls[("write", n)] = partial(np.ndarray.fill,
                                      np.empty(n // 4, np.float32), 1.0)
    probe = warm_up(world, calls, 3)
    iters = fit_iterations(world, probe, 100, args.budget)
    times = timed_rounds(world, calls, iters)
    us = {key: summarize(world, t)["p5"] for key, t in times.items()}
    if rank == 0:
        print(f"# 2 ranks, p5 of both ranks' {iters} calls (us): the "
              "calibration's fresh exchange and one way, less their copy; "
              "the binomial bcast, less its write")
        print(f"{'bytes':>9} {'exchange':>9} {'one way':>9}"
              f" {'target written':>15} {'bcast':>9} {'one way/exchange':>17}"
              f" {'bcast/exchange':>15}")
        for n in sizes:
            both, one, written = (us[(kind, n)] - us[("copy", n)] for kind
                                  in ("exchange", "one way", "target written"))
            bcast = us[("bcast", n)] - us[("write", n)]
            print(f"{n:9d} {both:9.1f} {one:9.1f} {written:15.1f}"
                  f" {bcast:9.1f} {one / both:17.2f} {bcast / both:15.2f}")
    raw.Free()
    coll.Free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
