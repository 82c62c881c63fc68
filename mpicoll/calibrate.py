"""``python -m mpicoll.calibrate``: measure α, β, γ and copy on this machine.

    mpiexec -n 2 python -m mpi4py -m mpicoll.calibrate --out cal.json
    mpiexec -n 2 python -m mpi4py -m mpicoll.calibrate --validate cal.json
    python -m mpicoll.simulate --calibration cal.json --ranks 64 ...

It measures the link its two ranks talk over: with both on one node, the
link inside a node; with one on each of two nodes, the network's (the file
records which, ``mpi.ranks_per_node``; ``slurm/calibrate.sbatch`` makes
both, for ``python -m mpicoll.simulate --calibration-intra``).

Calibration measures the costs as mpicoll's schedules meet them: every
point is a one-round :class:`~mpicoll.schedule.core.Schedule` bound and
compiled as the MPI layer does (:mod:`mpicoll.schedule.plan`) and run by
the blocking executor (:func:`mpicoll.schedule.executor.run`), timed by
the benchmark's harness (:mod:`mpicoll.bench.harness`: warm-up, barrier,
batches of back-to-back calls; the median, or with ``--statistic p5``
the 5th percentile, of all ranks' calls):

- *exchange*: ranks ``r`` and ``r xor 1`` swap ``n`` bytes (one
  ``Sendrecv``, as a round of one send and one receive runs), so α
  includes the executor's per-round Python cost and β the full-duplex
  transfer; fitted per message-size range. The bytes sent are *fresh*:
  a round copies them into the send buffer first and the copy's own time
  is taken off, because schedules send what a reduction, a copy, a
  receive or the caller has just written, and on shared memory that
  costs several times what resending an unchanged buffer does (both are
  kept in the file: ``points["exchange"]`` and
  ``points["exchange_clean"]``);
- *reduce*: ``dst = tmp (op) dst`` on ``n`` bytes (the ufunc call of a
  bound ``Reduce``), per op and dtype, on every rank at once;
- *copy*: ``recv[:] = send`` on ``n`` bytes (a bound ``Copy``);
- *write*: ``fill`` on ``n`` bytes, what the benchmark's ``--rewrite``
  adds to each call (``points["write"]``, for the validation only).

Not included: the per-call cost of the engine (parsing, replay, tag, about
a microsecond: ``bench/call_overhead.py``), which the model has no term
for. :mod:`mpicoll.calibration` fits the points and writes the file.

``--validate FILE`` runs the benchmark (:func:`mpicoll.bench.cli.run`) for
every hand-built algorithm of the validated collectives, with the input
written before every call (``--rewrite``: new data each call, as in an
application, so every message is fresh as in the calibration), and prints
each measured time beside the model's prediction with FILE's costs
(:func:`mpicoll.model.predict`) plus that write, and whether it is within
±30%.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from functools import partial

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll import calibration
from mpicoll.bench import cli as bench
from mpicoll.bench.harness import fit_iterations, summarize, timed_rounds, \
    warm_up
from mpicoll.bench.specs import DTYPES, OPS, SPECS
from mpicoll.collectives import COLLECTIVES
from mpicoll.model import predict
from mpicoll.ops import builtin_op
from mpicoll.schedule.core import ScheduleBuilder, Span
from mpicoll.schedule.executor import compile_plan, run
from mpicoll.schedule.layout import buffer_lengths
from mpicoll.schedule.plan import bind

VALIDATED = ("allreduce", "bcast", "allgather", "reduce_scatter_block",
             "alltoall")
TOLERANCE = 0.30  # |predicted / measured - 1| within this: a hit
TAG = 1


def _parser(rank: int):
    p = bench._Parser(rank, prog="python -m mpicoll.calibrate",
                      description="Measure the α-β-γ model's costs on this "
                                  "machine with MPI, or validate a "
                                  "calibration against the benchmark.")
    a = p.add_argument
    a("--out", default="calibration.json", metavar="FILE",
      help="where the calibration goes; default calibration.json")
    a("--validate", metavar="FILE",
      help="instead: benchmark every hand-built algorithm and compare with "
           "FILE's predictions")
    a("-b", "--minbytes", type=bench.parse_size,
      help="smallest size; default 8 (calibration), 64K (validation)")
    a("-e", "--maxbytes", type=bench.parse_size, default=16 << 20,
      help="largest size; default 16M")
    a("-f", "--stepfactor", type=float,
      help="size step; default 2 (calibration), 4 (validation)")
    a("--ranges", type=int, default=4,
      help="size ranges fitted, at most, for the messages and as many for "
           "the local steps; default 4")
    a("--ops", default=",".join(OPS), help=f"default {','.join(OPS)}")
    a("--dtypes", default=",".join(DTYPES),
      help=f"default {','.join(DTYPES)}")
    a("-c", "--collective", default=",".join(VALIDATED),
      help=f"validation: comma list; default {','.join(VALIDATED)}")
    a("-d", "--dtype", choices=DTYPES, default="float32",
      help="validation: dtype; default float32")
    a("-n", "--iters", type=int, default=100,
      help="timed calls per point (at most); default 100")
    a("-w", "--warmup", type=int, default=3, help="default 3")
    a("--time-budget", type=float, metavar="SECONDS",
      help="about how long the timed calls take; default 60 "
           "(calibration), 150 (validation)")
    a("--statistic", choices=("p50", "p5"), default="p50",
      help="of all ranks' per-call times, what a point is (and what the "
           "validation compares): the median, or the 5th percentile (on "
           "a machine others load, closer to what it does alone); "
           "default p50")
    a("--json", metavar="FILE", help="validation: rows and header as JSON")
    a("--quiet", action="store_true", help="no tables")
    return p


def parse_args(argv, rank: int = 0, size: int = 2):
    """Parse and check ``argv`` (SystemExit 2 if bad), mode defaults in."""
    p = _parser(rank)
    args = p.parse_args(argv)
    check = args.validate is not None
    args.minbytes = args.minbytes if args.minbytes is not None else (
        64 << 10 if check else 8)
    args.stepfactor = args.stepfactor or (4.0 if check else 2.0)
    if args.time_budget is None:
        args.time_budget = 150.0 if check else 60.0
    args.ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    args.dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    args.collectives = [c.strip() for c in args.collective.split(",")
                        if c.strip()]
    problems = [
        (size % 2, f"ranks pair up (r, r xor 1): {size} is odd"),
        (args.minbytes < 1 or args.minbytes > args.maxbytes,
         "need 1 <= -b <= -e"),
        (args.stepfactor <= 1, "-f must be > 1"),
        (args.ranges < 1, "--ranges must be >= 1"),
        (not set(args.ops) <= set(OPS) or not args.ops,
         f"--ops: choose from {', '.join(OPS)}"),
        (not set(args.dtypes) <= set(DTYPES) or not args.dtypes,
         f"--dtypes: choose from {', '.join(DTYPES)}"),
        (not set(args.collectives) <= set(SPECS) or not args.collectives,
         f"-c: choose from {', '.join(SPECS)}"),
        (args.iters < 1 or args.warmup < 0, "-n must be >= 1, -w >= 0"),
        (args.time_budget <= 0, "--time-budget must be > 0")]
    for bad, message in problems:
        if bad:
            p.error(message)
    return args


# --- measuring -------------------------------------------------------------


def _steps(build, arrays: dict, op=None):
    """One schedule (``build(builder)`` adds its round), bound to
    ``arrays`` and compiled as the MPI layer does."""
    builder = ScheduleBuilder()
    build(builder)
    arrays = {"sync": arrays["send"][:0], "tmp": arrays["send"][:0], **arrays}
    return compile_plan(bind(builder.build(), arrays, op))


def exchange(n: int, peer: int, fresh: bool):
    """The steps of one round swapping ``n`` bytes with ``peer``; if
    ``fresh``, a round copying ``n`` new bytes into the send buffer first
    (as schedules send what a step or the caller has just written)."""
    def build(b):
        if fresh:
            b.copy(Span("tmp", 0, n), Span("send", 0, n))
        b.exchange([(peer, Span("send", 0, n))], [(peer, Span("recv", 0, n))])

    return _steps(build, {"send": np.ones(n, np.uint8),
                          "recv": np.zeros(n, np.uint8),
                          "tmp": np.ones(n, np.uint8)})


def reduction(n: int, op: str, dtype: str):
    """The steps of one ``recv = tmp (op) recv`` on ``n`` bytes."""
    k = max(1, n // np.dtype(dtype).itemsize)
    arrays = {name: np.ones(k, dtype) for name in ("send", "recv", "tmp")}
    return _steps(lambda b: b.reduce(Span("tmp", 0, k), Span("recv", 0, k),
                                     Span("recv", 0, k)),
                  arrays, builtin_op(op))


def copying(n: int):
    """The steps of one ``recv[:] = send`` on ``n`` bytes."""
    return _steps(lambda b: b.copy(Span("send", 0, n), Span("recv", 0, n)),
                  {"send": np.ones(n, np.uint8), "recv": np.zeros(n, np.uint8)})


def timed(world, calls: dict, args, budget: float) -> list:
    """``(bytes, seconds)`` for each entry ``bytes: call``: the statistic
    (median, or 5th percentile) of all ranks' timed calls, the sizes
    interleaved by the benchmark's harness (so a change of the machine's
    speed hits them alike) within about ``budget`` seconds."""
    probe = warm_up(world, calls, args.warmup)
    iters = fit_iterations(world, probe, args.iters, budget)
    times = timed_rounds(world, calls, iters)
    return [(n, summarize(world, times[n])[args.statistic] * 1e-6)
            for n in calls]


def measure(world, args) -> tuple[list, list, dict, dict]:
    """The raw points over ``args``' sizes: the fresh exchange (copy then
    exchange, less the copy), copy, reduce ``{(op, dtype): points}``, and
    for the record ``{"exchange_clean": the exchange of an unchanged
    buffer, "write": filling a buffer as the benchmark's --rewrite
    does}``. The first five series are timed interleaved (the fresh
    exchange is a difference, and the two exchanges are compared) in half
    the time budget; the reductions share the other half."""
    comm = world.Dup()
    sizes = bench.sizes(args.minbytes, args.maxbytes, args.stepfactor)
    peer = world.Get_rank() ^ 1

    def schedule(steps):
        return partial(run, steps, comm, TAG)

    makers = {"both": lambda n: schedule(exchange(n, peer, True)),
              "exchange_clean": lambda n: schedule(exchange(n, peer, False)),
              "copy": lambda n: schedule(copying(n)),
              "write": lambda n: partial(np.ndarray.fill,
                                         np.empty(n, np.uint8), 1)}
    first = dict(timed(world, {(kind, n): make(n) for kind, make in
                               makers.items() for n in sizes},
                       args, args.time_budget / 2))
    series = {kind: [(n, first[(kind, n)]) for n in sizes] for kind in makers}
    pairs = [(op, dtype) for op in args.ops for dtype in args.dtypes]
    reduced = {(op, dtype): timed(world, {n: schedule(reduction(n, op, dtype))
                                          for n in sizes},
                                  args, args.time_budget / 2 / len(pairs))
               for op, dtype in pairs}
    comm.Free()
    fresh = [(n, max(t - c, 0.0)) for (n, t), (_, c)
             in zip(series.pop("both"), series["copy"])]
    return fresh, series.pop("copy"), reduced, series


def machine() -> dict:
    """Hostname, CPU model and cores of this rank's machine."""
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {"hostname": platform.node(), "cpu": cpu,
            "cores": os.cpu_count()}


def mpi_info(world) -> dict:
    """The MPI library, mpi4py, ranks (and per node) and thread level."""
    import mpi4py

    head = bench.header(mpicoll.Comm(world), [])
    return {"library": head["mpi_library"], "mpi4py": mpi4py.__version__,
            "ranks": head["nranks"], "ranks_per_node": head["ranks_per_node"],
            "thread_level": head["thread_level"]}


def calibrate(world, args, argv) -> calibration.Calibration:
    """Measure and fit (collective over ``world``); the same on every
    rank."""
    info = {"machine": machine(), "mpi": mpi_info(world),
            "date": datetime.datetime.now(datetime.timezone.utc)
            .isoformat(timespec="seconds"),
            "command": " ".join(["mpiexec", "-n", str(world.Get_size()),
                                 sys.executable, "-m", "mpicoll.calibrate",
                                 *argv])}
    fresh, copied, reduced, extra = measure(world, args)
    return calibration.fit(fresh, copied, reduced, args.ranges, extra, **info)


def describe(cal: calibration.Calibration) -> str:
    """The fitted costs as a table (µs, GB/s)."""
    def gbps(per_byte: float) -> str:
        return f"{1e-9 / per_byte:8.2f}" if per_byte > 0 else f"{'inf':>8}"

    lines = [f"# {cal.description}",
             f"# {'range (bytes)':>22} {'alpha(us)':>9} {'1/beta':>8}"
             f" {'1/copy':>8}  (GB/s)"]
    lo = 0
    for upto, alpha, beta, copy in cal.ranges:
        span = f"{lo + 1}..{upto if upto is not None else 'inf'}"
        lines.append(f"  {span:>22} {alpha * 1e6:9.2f} {gbps(beta)}"
                     f" {gbps(copy)}")
        lo = upto
    lines.append(f"# 1/gamma (GB/s) per range: {'op':>5} {'dtype':>8}")
    for (op, dtype), values in cal.gamma.items():
        lines.append(f"  {op:>32} {dtype:>8} "
                     + " ".join(gbps(g) for g in values))
    return "\n".join(lines)


# --- validating ------------------------------------------------------------


def hand_built(collective: str) -> list[str]:
    """Every registered algorithm of ``collective`` but ``native``."""
    return [a for a in mpicoll.algorithms(collective) if a != "native"]


def rewritten(record: dict) -> int:
    """Elements the benchmark's ``--rewrite`` writes before each call of
    ``record``'s case on rank 0 (its input buffer)."""
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
            f"{source}: no \"write\" points (made by an older "
            "mpicoll.calibrate?): the validation needs them")
    sizes, times = np.array(points, dtype=float).T

    def seconds(n: int) -> float:
        if n > sizes[-1]:
            return float(times[-1] * n / sizes[-1])
        return float(np.interp(n, sizes, times))

    return seconds


def validate(world, args, cal: calibration.Calibration) -> list[dict]:
    """Benchmark every hand-built algorithm of ``args.collectives`` (the
    benchmark's own run, input rewritten) and set each record's time
    beside the prediction (the model plus the write); the rows, the same
    on every rank."""
    write = writing(cal, args.validate)
    names = sorted({a for c in args.collectives for a in hand_built(c)})
    bench_args = bench.parse_args(
        ["-c", ",".join(args.collectives), "-a", ",".join(names),
         "-b", str(args.minbytes), "-e", str(args.maxbytes),
         "-f", str(args.stepfactor), "-d", args.dtype, "-n", str(args.iters),
         "-w", str(args.warmup), "--time-budget", str(args.time_budget),
         "--rewrite", "--quiet"], world.Get_rank(), world.Get_size())
    records = bench.run(bench_args, mpicoll.Comm(world))
    rows = []
    for r in records:
        net = cal.network(r["op"] or "sum", r["dtype"])
        itemsize = np.dtype(r["dtype"]).itemsize
        predicted = predict(r["collective"], r["algorithm"], r["nranks"],
                            r["count"], itemsize, net, root=r["root"] or 0) \
            + write(rewritten(r) * itemsize)
        measured = r["time_us"][args.statistic]
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


def _size(nbytes: int) -> str:
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
             + " ".join(f"{_size(n):>6}" for n in sizes)]
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


def main(argv=None, comm=None) -> int:
    """Calibrate or validate; 0 on success, 1 if a validated row was
    wrong, 2 for bad arguments (the same on every rank)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    world = MPI.Intracomm(MPI.COMM_WORLD if comm is None else comm)
    rank = world.Get_rank()
    try:
        args = parse_args(argv, rank, world.Get_size())
    except SystemExit as e:
        return 0 if e.code in (0, None) else int(e.code)
    if args.validate is None:
        cal = calibrate(world, args, argv)
        if rank == 0:
            cal.save(args.out)
            if not args.quiet:
                print(describe(cal))
            print(f"# wrote {args.out}", flush=True)
        world.Barrier()
        return 0
    cal = calibration.load_calibration(args.validate)
    head = bench.header(mpicoll.Comm(world), argv)
    crowded = oversubscribed(head["ranks_per_node"])
    rows = validate(world, args, cal)
    if rank == 0:
        title = (f"{world.Get_size()} ranks"
                 + (f" ({crowded})" if crowded else "")
                 + f", {args.dtype}, input rewritten per call (the write "
                 f"predicted too), measured: {args.statistic} of all "
                 f"calls; predicted with {args.validate}, "
                 f"{cal.description}")
        if not args.quiet:
            print(validation_table(rows, title))
            print(ratio_matrix(rows), flush=True)
        if args.json:
            head.update(calibration=args.validate,
                        description=cal.description,
                        statistic=args.statistic,
                        oversubscribed=crowded, tolerance=TOLERANCE)
            with open(args.json, "w") as f:
                json.dump({"header": head, "rows": rows}, f, indent=1)
    world.Barrier()
    return 1 if any(r["wrong"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
