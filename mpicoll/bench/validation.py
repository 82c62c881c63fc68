"""A calibration against the benchmark: measured and predicted times.

``python -m mpicoll.calibrate --validate FILE`` (:mod:`mpicoll.bench.calibrate`)
times every hand-built algorithm of the :data:`VALIDATED` collectives with
the benchmark, the input written before every call (``--rewrite``: new
data each call, as in an application, so every message is fresh as in the
calibration), and sets each time beside the model's prediction with
FILE's costs (:func:`mpicoll.model.cost.predict`) plus that write;
``--check`` times the same calls in the rounds that measure the
calibration's points (:func:`case_calls`), so that a change of the
machine's speed during the run hits both alike. This module holds what
the two share: the calls, the comparison (:func:`compare`) and the
tables.
"""

from __future__ import annotations

import os
from typing import Callable

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.model import calibration
from mpicoll.bench import cli as bench
from mpicoll.bench.harness import caller, count_wrong, make_buffers, \
    record, rewriting, summarize
from mpicoll.cli.options import hand_built_algorithms
from mpicoll.collectives import COLLECTIVES
from mpicoll.model.cost import predict
from mpicoll.schedule.layout import buffer_lengths

VALIDATED = ("allreduce", "bcast", "allgather", "reduce_scatter_block",
             "alltoall")
TOLERANCE = 0.30  # |predicted / measured - 1| within this: a hit


def bench_args(args, world):
    """The benchmark's arguments for the validation's runs (``args``:
    :func:`mpicoll.bench.calibrate.parse_args`'s)."""
    names = sorted({a for c in args.collectives
                    for a in hand_built_algorithms(c)})
    return bench.parse_args(
        ["-c", ",".join(args.collectives), "-a", ",".join(names),
         "-b", str(args.minbytes), "-e", str(args.maxbytes),
         "-f", str(args.stepfactor), "-d", args.dtype, "-n", str(args.iters),
         "-w", str(args.warmup), "--time-budget", str(args.time_budget),
         "--rewrite", "--quiet"], world.Get_rank(), world.Get_size())


def case_calls(comm, args) -> tuple[dict, Callable]:
    """The validation's calls for ``--check``: ``{(case index, algorithm):
    call}`` (each writing its input first, as the benchmark's
    ``--rewrite``), and ``records(times, iters)``, which turns their
    per-call times (this rank's, by key) and the calls timed per key into
    the benchmark's records, each algorithm's result checked once (a
    collective call: every rank makes it)."""
    world = MPI.Intracomm(comm)
    todo = bench.cases(bench_args(args, world), comm.size)
    calls = {}
    for i, case in enumerate(todo):
        algorithms = hand_built_algorithms(case.spec.name)
        bufs = make_buffers(case, comm.rank, comm.size)
        made = {a: caller(comm, case, bufs, a) for a in algorithms}
        calls.update({(i, a): call for a, call in
                      rewriting(case, bufs, made, comm.rank).items()})

    def records(times: dict, iters: int) -> list[dict]:
        return [record(comm, todo[i], a, summarize(world, times[(i, a)]),
                       iters, count_wrong(comm, todo[i], a))
                for i, a in calls]

    return calls, records


def run_benchmark(world, args) -> list[dict]:
    """The benchmark's own run of the validation's cases: its records."""
    return bench.run(bench_args(args, world), mpicoll.Comm(world))


def rewritten(record: dict) -> int:
    """Elements the benchmark's ``--rewrite`` writes before each call of
    ``record``'s case on rank 0 (its input buffer), or for a broadcast on
    its root (as many: the buffer has one length everywhere)."""
    name = record["collective"]
    send, recv = buffer_lengths(name, 0, record["nranks"], record["count"],
                                record["root"] or 0)
    return recv if COLLECTIVES[name].single_buffer else send


def writing(cal: calibration.Calibration, source: str):
    """Seconds to write ``n`` bytes, interpolated from the calibration's
    ``write`` points (per byte beyond the largest)."""
    points = sorted(cal.points.get("write") or [])
    if not points:
        raise calibration.CalibrationError(
            f"{source}: no \"write\" points, which the validation needs "
            "(measure them with python -m mpicoll.calibrate)")
    sizes, times = np.array(points, dtype=float).T

    def seconds(n: int) -> float:
        if n > sizes[-1]:
            return float(times[-1] * n / sizes[-1])
        return float(np.interp(n, sizes, times))

    return seconds


def compare(records: list[dict], cal: calibration.Calibration, source: str,
            statistic: str) -> list[dict]:
    """Each benchmark record's measured time (``statistic`` of its calls)
    beside the prediction with ``cal`` (the model plus the input's write):
    the validation's rows."""
    write = writing(cal, source)
    rows = []
    for r in records:
        net = cal.network(r["op"] or "sum", r["dtype"])
        itemsize = np.dtype(r["dtype"]).itemsize
        predicted = predict(r["collective"], r["algorithm"], r["nranks"],
                            r["count"], itemsize, net, root=r["root"] or 0) \
            + write(rewritten(r) * itemsize)
        measured = r["time_us"][statistic]
        error = predicted * 1e6 / measured - 1
        rows.append({"collective": r["collective"],
                     "algorithm": r["algorithm"], "nranks": r["nranks"],
                     "nbytes": r["nbytes"], "count": r["count"],
                     "dtype": r["dtype"], "measured_us": measured,
                     "measured_avg_us": r["time_us"]["avg"],
                     "predicted_us": predicted * 1e6, "error": error,
                     "within": abs(error) <= TOLERANCE,
                     "wrong": r["wrong"]})
    return rows


def validation_table(rows: list[dict], title: str) -> str:
    """The rows as a text table with a closing count of hits."""
    lines = [f"# {title}",
             f"{'collective':>20} {'algorithm':>26} {'size':>10}"
             f" {'measured(us)':>12} {'predicted(us)':>13} {'ratio':>6}"
             f"  ±30%"]
    for r in rows:
        lines.append(f"{r['collective']:>20} {r['algorithm']:>26}"
                     f" {r['nbytes']:>10} {r['measured_us']:>12.1f}"
                     f" {r['predicted_us']:>13.1f} {1 + r['error']:>6.2f}"
                     f"  {'yes' if r['within'] else 'NO'}")
    hits = sum(r["within"] for r in rows)
    lines.append(f"# {hits} of {len(rows)} within ±30% "
                 f"(ratio = predicted / measured)")
    return "\n".join(lines)


def size_label(nbytes: int) -> str:
    """``64K``, ``16M``, or bytes."""
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return str(nbytes)


def ratio_matrix(rows: list[dict]) -> str:
    """The ratios (predicted / measured) as one line per
    collective and algorithm, one column per size, ``*`` outside ±30%."""
    sizes = sorted({r["nbytes"] for r in rows})
    cells = {(r["collective"], r["algorithm"], r["nbytes"]):
             f"{1 + r['error']:.2f}{' ' if r['within'] else '*'}"
             for r in rows}
    lines = ["# ratio predicted / measured by size; * outside ±30%",
             f"{'collective':>20} {'algorithm':>26} "
             + " ".join(f"{size_label(n):>6}" for n in sizes)]
    for c, a in dict.fromkeys((r["collective"], r["algorithm"])
                              for r in rows):
        lines.append(f"{c:>20} {a:>26} " + " ".join(
            f"{cells.get((c, a, n), '-'):>6}" for n in sizes))
    return "\n".join(lines)


def oversubscribed(per_node: int) -> str:
    """``"oversubscribed: N ranks on C cores"`` when one node runs
    ``per_node`` ranks, more than it has cores, else ``""``."""
    cores = os.cpu_count() or 1
    return f"oversubscribed: {per_node} ranks on {cores} cores" \
        if per_node > cores else ""
