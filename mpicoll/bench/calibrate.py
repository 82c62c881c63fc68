"""``python -m mpicoll.calibrate``: measure α, β, γ and copy on this machine.

    mpiexec -n 2 python -m mpi4py -m mpicoll.calibrate --out cal.json
    mpiexec -n 2 python -m mpi4py -m mpicoll.calibrate --validate cal.json
    mpiexec -n 2 python -m mpi4py -m mpicoll.calibrate --check --out cal.json
    python -m mpicoll.simulate --calibration cal.json --ranks 64 ...

It measures the link its two ranks talk over: with both on one node, the
link inside a node; with one on each of two nodes, the network's (the file
records which, ``mpi.ranks_per_node``; ``slurm/calibrate.sbatch`` makes
both, for ``python -m mpicoll.simulate --calibration-intra``).

Calibration measures the costs as mpicoll's schedules meet them: every
point is a one-round :class:`~mpicoll.schedule.core.Schedule` bound and
compiled as the MPI layer does (:mod:`mpicoll.schedule.bind`) and run by
the blocking executor (:func:`mpicoll.engine.executor.run`), timed by
the benchmark's harness (:mod:`mpicoll.bench.harness`: warm-up, barrier,
batches of back-to-back calls; the median, or with ``--statistic p5``
the 5th percentile, or ``avg`` the mean, of all ranks' calls):

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
- *one way*: rank ``r`` even sends ``n`` fresh bytes to ``r + 1``, which
  receives them and does nothing else (a broadcast's or a gather's
  message), less the copy; fitted on the exchange's ranges. On a
  full-duplex link it costs what a direction of the exchange does; on
  shared memory the two directions of an exchange share the memory
  system, and one way can cost less;
- *reduce*: ``dst = tmp (op) dst`` on ``n`` bytes (the ufunc call of a
  bound ``Reduce``), per op and dtype, on every rank at once; and out of
  place, ``dst = tmp (op) src`` with three buffers, as most schedules'
  first reduction of a vector is (``recv = incoming op send``): one
  more buffer streams through the memory, written without being read,
  which on a memory-bound machine costs more per byte;
- *copy*: ``recv[:] = send`` on ``n`` bytes (a bound ``Copy``);
- *write*: ``fill`` on ``n`` bytes, what the benchmark's ``--rewrite``
  adds to each call (``points["write"]``, for the validation only);
- *call*: one message of :data:`CALL_BYTES` made by a collective call,
  ``mpicoll.Comm.Bcast(algorithm="linear")`` on the pair (``call``),
  and by the executor running that call's one round (``call_plan``):
  the difference is what mpicoll's call costs apart from its rounds
  (the arguments, the replayed plan, the tag), which the model adds
  once per call (:attr:`mpicoll.model.cost.Network.call`).

The sizes go by factors of 2 from 8 B to 64 MiB by default: beyond the
last-level cache, where large collectives run (their buffers on all
ranks of a node together are several times their size).

:mod:`mpicoll.model.calibration` fits the points and writes the file.

``--validate FILE`` benchmarks every hand-built algorithm of the validated
collectives and sets each time beside FILE's prediction
(:mod:`mpicoll.bench.validation`). ``--check`` does both in one run: it times
the validation's calls in the rounds that measure the points (8 B to 4x
``-e``), so that a change of the machine's speed during the run (a
virtual machine's neighbours) hits the calibration and the measurements
it predicts alike, then writes the file and prints the comparison;
``--also p50,avg`` fits and compares again at each of those statistics,
from the same calls, and prints a count of hits for each (which
statistic an additive model of the rounds fits best on a machine).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from functools import partial
from typing import NamedTuple

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.bench import validation
from mpicoll.model import calibration
from mpicoll.bench import cli as bench
from mpicoll.bench.harness import fit_iterations, summarize, timed_rounds, \
    warm_up
from mpicoll.bench.specs import OPS
from mpicoll.cli.options import COLLECTIVE_NAMES, DTYPES, RankZeroParser, \
    add_dtype_option, add_size_options, comma_list
from mpicoll.cli.sizes import sizes
from mpicoll.schedule.ops import builtin_op
from mpicoll.schedule.core import ScheduleBuilder, Span
from mpicoll.engine.executor import compile_plan, run
from mpicoll.schedule.bind import bind

TAG = 1
STATISTICS = ("p5", "p50", "avg")  # of the harness's summaries (avg: mean)
CALL_BYTES = 8  # the message of the per-call point: latency, next to no bytes


def _parser(rank: int):
    p = RankZeroParser(
        rank, prog="python -m mpicoll.calibrate",
        description="Measure the α-β-γ model's costs on this machine with "
                    "MPI, or validate a calibration against the benchmark.")
    a = p.add_argument
    a("--out", default="calibration.json", metavar="FILE",
      help="where the calibration goes; default calibration.json")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--validate", metavar="FILE",
        help="instead: benchmark every hand-built algorithm and compare with "
             "FILE's predictions")
    mode.add_argument(
        "--check", action="store_true", dest="calibrate_and_validate",
        help="calibrate (8 B to 4x -e by factors of 2, into --out) and "
             "validate (-b to -e by -f) in one run, the validation's calls "
             "timed in the calibration's interleaved rounds")
    add_size_options(a, None, None, None, helps=(
        "smallest size; default 8 (calibration), 64K (validation)",
        "largest size; default 64M (calibration), 16M (validation)",
        "size step; default 2 (calibration), 4 (validation)"))
    a("--ranges", type=int, default=calibration.RANGES,
      help="size ranges fitted, at most, for the messages and as many for "
           f"the local steps; default {calibration.RANGES}")
    a("--ops", default=",".join(OPS), help=f"default {','.join(OPS)}")
    a("--dtypes", default=",".join(DTYPES),
      help=f"default {','.join(DTYPES)}")
    a("-c", "--collective", default=",".join(validation.VALIDATED),
      help="validation: comma list; default "
           f"{','.join(validation.VALIDATED)}")
    add_dtype_option(a, help="validation: dtype; default float32")
    a("-n", "--iters", type=int, default=100,
      help="timed calls per point (at most); default 100")
    a("-w", "--warmup", type=int, default=3, help="default 3")
    a("--time-budget", type=float, metavar="SECONDS",
      help="about how long the timed calls take; default 60 "
           "(calibration), 150 (validation, --check)")
    a("--statistic", choices=STATISTICS, default="p50",
      help="of all ranks' per-call times, what a point is (and what the "
           "validation compares): the median, the 5th percentile (on "
           "a machine others load, closer to what it does alone) or the "
           "mean; default p50")
    a("--also", default="", metavar="STATISTICS",
      help="with --check: fit and compare again at each of these (comma "
           f"list of {', '.join(STATISTICS)}) from the same calls; a "
           "count of hits each, --statistic's first")
    a("--json", metavar="FILE", help="validation: rows and header as JSON")
    a("--quiet", action="store_true", help="no tables")
    return p


def parse_args(argv, rank: int = 0, size: int = 2):
    """Parse and check ``argv`` (SystemExit 2 if bad), mode defaults in."""
    p = _parser(rank)
    args = p.parse_args(argv)
    validating = args.validate is not None or args.calibrate_and_validate
    args.minbytes = args.minbytes if args.minbytes is not None else (
        64 << 10 if validating else 8)
    args.stepfactor = args.stepfactor or (4.0 if validating else 2.0)
    if args.maxbytes is None:
        args.maxbytes = 16 << 20 if validating else 64 << 20
    if args.time_budget is None:
        args.time_budget = 150.0 if validating else 60.0
    args.ops = comma_list(args.ops)
    args.dtypes = comma_list(args.dtypes)
    args.collectives = comma_list(args.collective)
    args.also = comma_list(args.also)
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
        (not set(args.collectives) <= set(COLLECTIVE_NAMES)
         or not args.collectives,
         f"-c: choose from {', '.join(COLLECTIVE_NAMES)}"),
        (args.iters < 1 or args.warmup < 0, "-n must be >= 1, -w >= 0"),
        (args.time_budget <= 0, "--time-budget must be > 0"),
        (not set(args.also) <= set(STATISTICS),
         f"--also: choose from {', '.join(STATISTICS)}"),
        (args.also and not args.calibrate_and_validate,
         "--also needs --check")]
    for bad, message in problems:
        if bad:
            p.error(message)
    args.point_sizes = sizes(*(
        (8, 4 * args.maxbytes, 2.0) if args.calibrate_and_validate
        else (args.minbytes, args.maxbytes, args.stepfactor)))
    return args


# --- measuring -------------------------------------------------------------


def one_round(build, arrays: dict, op=None):
    """One schedule (``build(builder)`` adds its steps: a round, perhaps
    after a local copy), bound to ``arrays`` and compiled as the MPI
    layer does (``sync`` and ``tmp`` empty unless given)."""
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

    return one_round(build, {"send": np.ones(n, np.uint8),
                             "recv": np.zeros(n, np.uint8),
                             "tmp": np.ones(n, np.uint8)})


def one_way(n: int, peer: int, sender: bool, fresh: bool = True):
    """The steps of one round in which the ``sender`` sends ``n`` bytes
    to ``peer`` (if ``fresh``, new ones: copied into its send buffer
    first, as in :func:`exchange`) and the other rank receives them,
    doing nothing else."""
    def build(b):
        if sender:
            if fresh:
                b.copy(Span("tmp", 0, n), Span("send", 0, n))
            b.exchange(sends=[(peer, Span("send", 0, n))])
        else:
            b.exchange(recvs=[(peer, Span("recv", 0, n))])

    return one_round(build, {"send": np.ones(n, np.uint8),
                             "recv": np.zeros(n, np.uint8),
                             "tmp": np.ones(n, np.uint8)})


def reduction(n: int, op: str, dtype: str, out_of_place: bool = False):
    """The steps of one ``recv = tmp (op) recv`` on ``n`` bytes, or with
    ``out_of_place`` of one ``recv = tmp (op) send``."""
    k = max(1, n // np.dtype(dtype).itemsize)
    arrays = {name: np.ones(k, dtype) for name in ("send", "recv", "tmp")}
    other = Span("send" if out_of_place else "recv", 0, k)
    return one_round(lambda b: b.reduce(Span("tmp", 0, k), other,
                                        Span("recv", 0, k)),
                     arrays, builtin_op(op))


def copying(n: int):
    """The steps of one ``recv[:] = send`` on ``n`` bytes."""
    return one_round(lambda b: b.copy(Span("send", 0, n), Span("recv", 0, n)),
                     {"send": np.ones(n, np.uint8),
                      "recv": np.zeros(n, np.uint8)})


def timed(world, calls: dict, args, budget: float) -> tuple[dict, int]:
    """The benchmark harness's per-call times of this rank, by name in
    ``calls``, all interleaved (so a change of the machine's speed hits
    them alike) within about ``budget`` seconds; and the calls per name."""
    probe = warm_up(world, calls, args.warmup)
    iters = fit_iterations(world, probe, args.iters, budget)
    return timed_rounds(world, calls, iters), iters


class Timings(NamedTuple):
    """This rank's per-call times (seconds) of the calibration's calls by
    key (``(kind, bytes)``, ``(reduction, bytes)``), of ``beside``'s calls
    by their names, the calls timed per key in the interleaved rounds, and
    the reductions timed (``(op, dtype, out of place)``)."""

    times: dict
    beside: dict
    iters: int
    reductions: tuple


class Measured(NamedTuple):
    """Raw ``(bytes, seconds)`` points, at one statistic of all ranks'
    calls."""

    exchange: list  # fresh: copy then exchange, less the copy
    one_way: list  # fresh: copy then send one way, less the copy
    copy: list
    reduce: dict  # {(op, dtype): points}, in place
    reduce_out_of_place: dict  # {(op, dtype): points}
    extra: dict  # for the record: exchange_clean, write
    call: tuple  # (through mpicoll's call, by the executor): CALL_BYTES


MESSAGES = ("both", "one_way", "exchange_clean", "copy", "write")  # timed


def measure(world, args, beside: dict | None = None) -> Timings:
    """Time the calibration's calls over its sizes: the fresh exchange
    and one way (copy then exchange or send), copy, reduce in place and
    out of place per op and dtype, and for the record the exchange of an
    unchanged buffer and filling a buffer as the benchmark's --rewrite
    does; and one message of :data:`CALL_BYTES` made by
    ``mpicoll.Comm.Bcast`` on the pair and by the executor alone. The
    messages, copy and write are timed interleaved in half the time
    budget; with ``beside`` (more calls, ``{name: call}``: ``--check``'s
    collectives) they are interleaved with those and with the reductions
    those use (sum on ``args.dtype``, both kinds), in three quarters of
    it. The other reductions share the rest. :func:`points` makes the
    points of the timings."""
    comm = world.Dup()
    sizes = args.point_sizes
    rank = world.Get_rank()
    peer = rank ^ 1

    def schedule(steps):
        return partial(run, steps, comm, TAG)

    makers = {"both": lambda n: schedule(exchange(n, peer, True)),
              "one_way": lambda n: schedule(one_way(n, peer, rank < peer)),
              "exchange_clean": lambda n: schedule(exchange(n, peer, False)),
              "copy": lambda n: schedule(copying(n)),
              "write": lambda n: partial(np.ndarray.fill,
                                         np.empty(n, np.uint8), 1)}
    together = [("sum", args.dtype, apart) for apart in (False, True)] \
        if beside else []
    calls = {(kind, n): makers[kind](n) for kind in MESSAGES for n in sizes}
    calls.update({(key, n): schedule(reduction(n, *key))
                  for key in together for n in sizes})
    pair_comm = mpicoll.Comm(world.Split(rank // 2, rank))  # r, r xor 1
    tiny = np.ones(CALL_BYTES, np.uint8)
    calls[("call", CALL_BYTES)] = partial(pair_comm.Bcast, tiny, root=0,
                                          algorithm="linear")
    calls[("call_plan", CALL_BYTES)] = schedule(
        one_way(CALL_BYTES, peer, rank < peer, fresh=False))
    calls.update(beside or {})
    times, iters = timed(world, calls, args,
                         args.time_budget * (3 / 4 if beside else 1 / 2))
    rest = [key for key in _reductions(args) if key not in together]
    for key in rest:
        alone, _ = timed(world, {n: schedule(reduction(n, *key))
                                 for n in sizes}, args,
                         args.time_budget * (1 / 4 if beside else 1 / 2)
                         / len(rest))
        times.update({(key, n): alone[n] for n in sizes})
    comm.Free()
    pair_comm.Free()
    return Timings(times, {key: times.pop(key) for key in beside or ()},
                   iters, (*together, *rest))


def _reductions(args) -> list:
    """The reductions of ``--ops`` and ``--dtypes``: ``(op, dtype, out of
    place)``."""
    return [(op, dtype, apart) for op in args.ops for dtype in args.dtypes
            for apart in (False, True)]


def points(world, got: Timings, args, statistic: str) -> Measured:
    """The raw points of ``got``: ``statistic`` of all ranks' calls per
    key (collective over ``world``), the fresh messages less their copy."""
    def seconds(key) -> float:
        return summarize(world, got.times[key])[statistic] * 1e-6

    def series(kind) -> list:
        return [(n, seconds((kind, n))) for n in args.point_sizes]

    made = {kind: series(kind) for kind in MESSAGES}
    fresh, sent = ([(n, max(t - c, 0.0)) for (n, t), (_, c)
                    in zip(made.pop(kind), made["copy"])]
                   for kind in ("both", "one_way"))
    reduced = {key: series(key) for key in got.reductions}
    in_place, apart = ({(op, dtype): pts for (op, dtype, out), pts
                        in reduced.items() if out == kind}
                       for kind in (False, True))
    call = tuple([(CALL_BYTES, seconds((kind, CALL_BYTES)))]
                 for kind in ("call", "call_plan"))
    return Measured(fresh, sent, made.pop("copy"), in_place, apart, made,
                    call)


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


def calibrate(world, args, argv, beside: dict | None = None
              ) -> tuple[dict, Timings]:
    """Measure (with ``beside``'s calls, :func:`measure`) and fit at
    ``args.statistic`` and each of ``args.also``, collective over
    ``world``: ``{statistic: calibration}``, the same on every rank, and
    this rank's timings."""
    info = {"machine": machine(), "mpi": mpi_info(world),
            "date": datetime.datetime.now(datetime.timezone.utc)
            .isoformat(timespec="seconds"),
            "command": " ".join(["mpiexec", "-n", str(world.Get_size()),
                                 sys.executable, "-m", "mpicoll.calibrate",
                                 *argv])}
    got = measure(world, args, beside)
    fitted = {}
    for statistic in dict.fromkeys([args.statistic, *args.also]):
        m = points(world, got, args, statistic)
        fitted[statistic] = calibration.fit(
            m.exchange, m.copy, m.reduce, args.ranges, m.extra,
            m.reduce_out_of_place, one_way=m.one_way, call=m.call, **info)
    return fitted, got


def main(argv=None, comm=None) -> int:
    """Calibrate, validate or both; 0 on success, 1 if a validated row was
    wrong, 2 for bad arguments (the same on every rank)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    world = MPI.Intracomm(MPI.COMM_WORLD if comm is None else comm)
    rank = world.Get_rank()
    try:
        args = parse_args(argv, rank, world.Get_size())
    except SystemExit as e:
        return 0 if e.code in (0, None) else int(e.code)
    if args.validate is None:
        beside, records = ({}, None) if not args.calibrate_and_validate \
            else validation.case_calls(mpicoll.Comm(world), args)
        fitted, got = calibrate(world, args, argv, beside)
        cal = fitted[args.statistic]
        if rank == 0:
            cal.save(args.out)
            if not args.quiet:
                print(calibration.describe(cal))
            print(f"# wrote {args.out}", flush=True)
        world.Barrier()
        if not args.calibrate_and_validate:
            return 0
        source, records = args.out, records(got.beside, got.iters)
    else:
        source = args.validate
        cal = calibration.load_calibration(source)
        records = validation.run_benchmark(world, args)
    rows = validation.compare(records, cal, source, args.statistic)
    head = bench.header(mpicoll.Comm(world), argv)
    crowded = validation.oversubscribed(head["ranks_per_node"])
    if rank == 0:
        timing = ("timed in the calibration's rounds"
                  if args.calibrate_and_validate else "timed after it")
        title = (f"{world.Get_size()} ranks"
                 + (f" ({crowded})" if crowded else "")
                 + f", {args.dtype}, input rewritten per call (the write "
                 f"predicted too), measured: {args.statistic} of all "
                 f"calls; predicted with {source} ({timing}), "
                 f"{cal.description}")
        if not args.quiet:
            print(validation.validation_table(rows, title))
            print(validation.ratio_matrix(rows), flush=True)
        counted = [args.statistic, *args.also] if args.also else []
        for statistic in dict.fromkeys(counted):
            again = validation.compare(records, fitted[statistic], source,
                                       statistic)
            print(f"# at {statistic}, calibrated and measured from the same "
                  f"calls: {sum(r['within'] for r in again)} of {len(again)}"
                  " within ±30%", flush=True)
        if args.json:
            head.update(calibration=source, description=cal.description,
                        statistic=args.statistic,
                        interleaved=args.calibrate_and_validate,
                        oversubscribed=crowded,
                        tolerance=validation.TOLERANCE)
            with open(args.json, "w") as f:
                json.dump({"header": head, "rows": rows}, f, indent=1)
    world.Barrier()
    return 1 if any(r["wrong"] for r in rows) else 0

