"""Does a round cost what its calibration points add up to?

    mpiexec -n 2 python bench/composition.py [--sizes 64K,256K,1M] [--iters N]

The cost model (``mpicoll.model.cost``) prices a round of a schedule as the sum
of what ``python -m mpicoll.calibrate`` times alone: a fresh exchange (a
copy of new bytes into the send buffer, then the exchange, less the copy)
and, after it, a reduction (``recv = tmp + send``, float32 sum, out of
place). This times, through the executor and interleaved in one run as
``--check`` does, those two points and the round that does both, as the
recursive-doubling allreduce does on 2 ranks (exchange into ``tmp``, then
reduce it), and once more with the reduction reading another buffer than
the one just received (no data dependence). Prints per size the points,
their sum, the round, and how much more the round takes (µs and %), at the
5th percentile of both ranks' calls (the calibration's statistic).
docs/simulation.md ("A round costs more than its points") quotes it.
"""

from __future__ import annotations

import argparse
from functools import partial

import numpy as np
from mpi4py import MPI

from mpicoll.bench.cli import parse_size
from mpicoll.bench.harness import summarize, timed_rounds, warm_up
from mpicoll.bench.calibrate import TAG, one_round
from mpicoll.schedule.ops import builtin_op
from mpicoll.schedule.core import Span
from mpicoll.engine.executor import run

SUM = builtin_op("sum")


def plan(n: int, peer: int, *, fresh: bool, exchange: bool,
         reduce_from: str | None):
    """One round on ``n`` bytes of float32: a copy of new bytes into
    ``send`` if ``fresh``, the exchange of ``send`` into ``tmp`` if
    ``exchange``, then ``recv = reduce_from + send`` unless None."""
    k = n // 4

    def build(b):
        if fresh:
            b.copy(Span("new", 0, k), Span("send", 0, k))
        if exchange:
            b.exchange([(peer, Span("send", 0, k))],
                       [(peer, Span("tmp", 0, k))])
        if reduce_from:
            b.reduce(Span(reduce_from, 0, k), Span("send", 0, k),
                     Span("recv", 0, k))

    arrays = {name: np.ones(k, np.float32)
              for name in ("send", "recv", "tmp", "new", "other")}
    return one_round(build, arrays, SUM)


KINDS = {  # name: plan's keywords
    "copy": dict(fresh=True, exchange=False, reduce_from=None),
    "exchange": dict(fresh=True, exchange=True, reduce_from=None),
    "reduce": dict(fresh=False, exchange=False, reduce_from="tmp"),
    "round": dict(fresh=True, exchange=True, reduce_from="tmp"),
    "reduce other": dict(fresh=False, exchange=False, reduce_from="other"),
    "round, other": dict(fresh=True, exchange=True, reduce_from="other"),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="64K,256K,1M",
                   help="bytes per message, comma-separated (64K, 1M, ...)")
    p.add_argument("--iters", type=int, default=800,
                   help="timed calls per kind and size")
    args = p.parse_args()
    world = MPI.COMM_WORLD
    if world.Get_size() != 2:
        raise SystemExit("run on 2 ranks: mpiexec -n 2 python "
                         "bench/composition.py")
    comm = world.Dup()
    peer = world.Get_rank() ^ 1
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    calls = {(kind, n): partial(run, plan(n, peer, **how), comm, TAG)
             for n in sizes for kind, how in KINDS.items()}
    warm_up(world, calls, 10)
    times = timed_rounds(world, calls, args.iters, rounds=16)
    p5 = {key: summarize(world, t)["p5"] for key, t in times.items()}
    comm.Free()
    if world.Get_rank() != 0:
        return
    print("# µs, 5th percentile of both ranks' calls; the exchange and the "
          "rounds less the copy")
    print(f"{'bytes':>9} {'exchange':>9} {'reduce':>8} {'sum':>8} "
          f"{'round':>8} {'more':>14} | {'other':>8} {'more':>14}")
    for n in sizes:
        copy = p5[("copy", n)]
        exchange = p5[("exchange", n)] - copy
        cells = [f"{n:>9} {exchange:9.1f} {p5[('reduce', n)]:8.1f} "
                 f"{exchange + p5[('reduce', n)]:8.1f}"]
        for whole, part in (("round", "reduce"),
                            ("round, other", "reduce other")):
            both = p5[(whole, n)] - copy
            more = both - exchange - p5[(part, n)]
            cells.append(f"{both:8.1f} {more:+7.1f} ({more / both:+4.0%})")
        print(" ".join(cells[:2]), "|", cells[2])


if __name__ == "__main__":
    main()
