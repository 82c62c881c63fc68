"""Trains of messages at 2 ranks: what a message that follows another of
its round costs, against the α-β model's ``α + β·n`` for each.

    mpiexec -n 2 python -m mpi4py bench/trains.py [--segment 128K] [--budget 60]

The pipelined broadcast (:func:`mpicoll.coll.bcast.pipelined`) posts all
its segments to the next rank in one round; the model, as Hockney's and
the published forms, charges each of them a whole message, ``α + β·n``.
This times, interleaved in one run (:mod:`mpicoll.bench.harness`, the 5th
percentile of both ranks' calls), one-round schedules of rank 0 sending
``k`` segments of ``--segment`` bytes to rank 1 (a *train*, one way, as
the broadcast's) for ``k`` = 1, 2, 4, ..., 128, each preceded by a copy of
its bytes into the send buffer (fresh data, as the calibration's exchange
points are; the copy's own time, measured beside, is taken off), and
prints per ``k``: the train's time, and the cost of each segment after the
first, ``(train(k) - train(1)) / (k - 1)``. A LogGP gap ``g`` in the model
would charge that ``g + β·n``: it fits where that cost is the same for
every ``k``. On the 2-vCPU development VM it moved with ``k``, from 14.8
to 26.2 µs (docs/simulation/trains-n2.txt; we read the long trains'
lower cost as the pipeline between MPICH's two copies, the sender's in
and the receiver's out, filling), which is why docs/simulation.md leaves
the gap untried.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial

import numpy as np
from mpi4py import MPI

from mpicoll.bench.cli import parse_size
from mpicoll.bench.harness import fit_iterations, summarize, timed_rounds, \
    warm_up
from mpicoll.bench.calibrate import TAG, copying, one_round
from mpicoll.schedule.core import Span
from mpicoll.engine.executor import run

LENGTHS = [1 << i for i in range(8)]  # segments per train: 1 .. 128


def train(rank: int, segment: int, k: int):
    """Rank 0's copy of ``k`` segments into its send buffer, then one round
    sending them to rank 1, which receives them in one round (and copies
    as rank 0 does, so that both ranks' calls are alike)."""
    total = k * segment
    spans = [(s, min(s + segment, total)) for s in range(0, total, segment)]

    def build(b):
        b.copy(Span("tmp", 0, total), Span("send", 0, total))
        if rank == 0:
            b.exchange(sends=[(1, Span("send", lo, hi)) for lo, hi in spans])
        else:
            b.exchange(recvs=[(0, Span("recv", lo, hi)) for lo, hi in spans])

    return one_round(build, {name: np.ones(total, np.uint8)
                             for name in ("send", "recv", "tmp")})


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="bench/trains.py",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--segment", type=parse_size, default=128 << 10,
                   help="bytes per message; default 128K (the pipelined "
                        "broadcast's segment of float32)")
    p.add_argument("--budget", type=float, default=60.0,
                   help="seconds of timed calls, about; default 60")
    args = p.parse_args(argv)
    world = MPI.COMM_WORLD
    if world.Get_size() != 2:
        if world.Get_rank() == 0:
            print("bench/trains.py runs at 2 ranks", file=sys.stderr)
        return 2
    comm, rank = world.Dup(), world.Get_rank()
    calls = {}
    for k in LENGTHS:
        calls[("train", k)] = partial(run, train(rank, args.segment, k), comm,
                                      TAG)
        calls[("copy", k)] = partial(run, copying(k * args.segment), comm, TAG)
    probe = warm_up(world, calls, 3)
    iters = fit_iterations(world, probe, 100, args.budget)
    times = timed_rounds(world, calls, iters)
    us = {key: summarize(world, t)["p5"] for key, t in times.items()}
    if rank == 0:
        print(f"# trains of {args.segment}-byte messages, rank 0 -> 1, one "
              f"round; p5 of both ranks' {iters} calls, less the copy of "
              f"the fresh bytes (us)")
        print(f"{'k':>4} {'train(us)':>10} {'each after the first(us)':>25}")
        one = us[("train", 1)] - us[("copy", 1)]
        for k in LENGTHS:
            t = us[("train", k)] - us[("copy", k)]
            after = f"{(t - one) / (k - 1):25.1f}" if k > 1 else f"{'-':>25}"
            print(f"{k:4d} {t:10.1f} {after}")
    comm.Free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
