"""Command line of ``python -m mpicoll.bench`` (nccl-tests / OSU style).

    mpiexec -n 4 python -m mpi4py -m mpicoll.bench                # everything
    mpiexec -n 2 python -m mpi4py -m mpicoll.bench -c allreduce -b 8 -e 64M \\
        -a native,ring,auto --json out.json --emit-rules rules.json
    MPICOLL_RULES=rules.json mpiexec -n 2 python app.py     # use them

Every rank parses the same arguments before any communication, so a bad
argument exits with code 2 on every rank (usage printed by rank 0 only;
under ``python -m mpi4py`` that non-zero exit shows as an ``MPI_Abort(2)``
line, still with code 2).
Exit code 1 when any row has wrong results, else 0. ``--persistent`` times
persistent calls (``X_init`` once per algorithm and size, then ``Start`` and
``Wait`` per call). ``--rewrite`` writes the input before every timed call
(:func:`~mpicoll.bench.harness.rewriting` says why that matters).
``--timeout`` times the
nonblocking form (``I*``) waited on with ``wait(timeout=)``; a call that
times out raises ``CollectiveTimeoutError`` on the rank that waited (run
under ``python -m mpi4py`` so that aborts the job instead of hanging).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import sys
import time

from mpi4py import MPI

import mpicoll
from mpicoll.guard import exchange
from mpicoll.guard.launch import node_name
from mpicoll.cli import options
from mpicoll.cli import plot as plotting
from mpicoll.cli.sizes import swept_counts
from mpicoll.cli.tables import COLUMNS, print_rows, summary
from mpicoll.bench.device import DEVICES, unavailable
from mpicoll.bench.harness import Case, measure
from mpicoll.bench.specs import OPS, SPECS
from mpicoll.select.policy import rules_from_records

DEFAULT_COLLECTIVES = ("allreduce", "reduce", "bcast", "allgather",
                       "reduce_scatter_block", "alltoall", "barrier")


def _parser(rank: int) -> options.RankZeroParser:
    p = options.RankZeroParser(
        rank, prog="python -m mpicoll.bench",
        description="Time mpicoll's collectives, every algorithm.")
    a = p.add_argument
    options.add_collective_options(
        a, default=",".join(DEFAULT_COLLECTIVES),
        help=f"comma list or 'all' ({', '.join(options.COLLECTIVE_NAMES)})",
        algorithm_help="comma list, 'auto', or 'all' (every registered one "
                       "plus auto)")
    options.add_size_options(a, maxbytes="16M")
    options.add_dtype_option(a)
    a("-o", "--op", choices=tuple(OPS), default="sum")
    a("-r", "--root", type=int, default=0)
    a("-n", "--iters", type=int, default=100,
      help="timed iterations per algorithm and size (at most; see "
           "--time-budget)")
    a("-w", "--warmup", type=int, default=5)
    a("--time-budget", type=float, default=100.0, metavar="SECONDS",
      help="cut iteration counts so the whole sweep takes about this long "
           "(0: no limit); default 100")
    a("--inplace", action="store_true", help="MPI.IN_PLACE calls")
    a("--device", choices=DEVICES, default="cpu",
      help="where buffers live: host NumPy, CuPy device arrays, or the "
      "host model of CUDA (a dry run; MPICOLL_MODEL_LATENCIES)")
    a("--check", action=argparse.BooleanOptionalAction, default=True,
      dest="validate", help="validate every row after timing (default on)")
    options.add_output_options(
        a, csv=True,
        plot_help="busbw by size per algorithm, a panel per collective "
                  "(needs matplotlib: pip install 'mpicoll[plot]')",
        rules_help="write the fastest right algorithm per size range as a "
                   "rules file for MPICOLL_RULES")
    a("--persistent", action="store_true",
      help="time persistent calls (X_init once, then Start and Wait)")
    a("--rewrite", action="store_true",
      help="write the input before every timed call, as an application "
           "writes new data each step (the write is timed too)")
    a("--timeout", type=float, metavar="SECONDS",
      help="per call: time the nonblocking form with wait(timeout=)")
    a("--progress", action="store_true",
      help="a status line per size on rank 0's stderr (default: only when "
           "stderr is a terminal)")
    a("--quiet", action="store_true", help="no tables, no status lines")
    return p


def parse_args(argv, rank: int = 0, size: int = 1) -> argparse.Namespace:
    """Parse and check ``argv``; ``parser.error`` (SystemExit 2) if bad."""
    p = _parser(rank)
    args = p.parse_args(argv)
    no_device = unavailable(args.device)
    args.collectives = options.collective_names(p, args.collective,
                                                allow_all=True)
    args.algorithms, unknown = options.algorithm_names(
        args.algorithm, args.collectives, _candidates)
    if unknown or not options.comma_list(args.algorithm):
        p.error(f"unknown algorithm(s): {', '.join(unknown) or '(none)'}")
    problems = [*options.size_problems(args),
                (not 0 <= args.root < size, f"root must be in 0..{size - 1}"),
                (args.iters < 1, "-n must be at least 1"),
                (args.warmup < 0, "-w must be >= 0"),
                (args.time_budget < 0, "--time-budget must be >= 0"),
                (args.timeout is not None and args.timeout <= 0,
                 "--timeout must be > 0"),
                options.plot_problem(args),
                (no_device is not None, no_device)]
    for bad, message in problems:
        if bad:
            p.error(message)
    args.progress = not args.quiet and (args.progress or sys.stderr.isatty())
    return args


def _candidates(collective: str) -> list[str]:
    """What ``-a`` may name for ``collective``: every registered
    algorithm, then ``auto``."""
    return [*mpicoll.algorithms(collective), "auto"]


def cases(args, size: int) -> list[Case]:
    """Every (collective, count) to run, duplicates (rounding) dropped."""
    out = []
    for name in args.collectives:
        spec = SPECS[name]
        out += [Case(spec, n, args.dtype, args.op, args.root,
                     args.inplace and spec.row.inplace is not None,
                     args.device, args.rewrite)
                for n in swept_counts(args, name, size)]
    return out


class _Budget:
    """Seconds for the next case: what is left of the whole budget is split
    evenly between the collectives still to run, and a collective's share
    between its sizes still to run (so an overrun at large sizes eats into
    its own share, not the next collective's)."""

    def __init__(self, seconds: float, todo: list[Case]):
        self.seconds, self.start = seconds, time.monotonic()
        self.names = [c.spec.name for c in todo]
        self.current, self.share, self.began = None, 0.0, self.start

    def next(self, i: int) -> float | None:
        if not self.seconds:
            return None
        now, name = time.monotonic(), self.names[i]
        if name != self.current:
            left = self.seconds - (now - self.start)
            self.current, self.began = name, now
            self.share = max(0.0, left) / len(dict.fromkeys(self.names[i:]))
        sizes_left = self.names[i:].count(name)
        return max(0.0, self.share - (now - self.began)) / sizes_left


def run(args, comm) -> list[dict]:
    """Time every case; rank 0 prints the tables. The records (the same on
    every rank)."""
    todo = cases(args, comm.size)
    budget = _Budget(args.time_budget, todo)
    records, current = [], None
    for i, case in enumerate(todo):
        if case.spec.name != current:
            _close_table(comm, args, records, current)
            current = case.spec.name
            _open_table(comm, args, case)
        rows = measure(comm, case, args.algorithms[case.spec.name],
                       iters=args.iters, warmup=args.warmup,
                       budget=budget.next(i),
                       validate=args.validate, timeout=args.timeout,
                       persistent=args.persistent)
        records += rows
        if comm.rank == 0:
            if not args.quiet:
                print_rows(rows)
            if args.progress:
                _progress(rows[0], i + 1, len(todo),
                          time.monotonic() - budget.start)
    _close_table(comm, args, records, current)
    return records


def _open_table(comm, args, case: Case) -> None:
    if comm.rank == 0 and not args.quiet:
        print(f"\n# {case.spec.name}, {comm.size} ranks, "
              f"{'in place' if case.inplace else 'out of place'}"
              f"{', persistent (Start + Wait)' if args.persistent else ''}"
              f"{', input rewritten per call' if args.rewrite else ''};"
              f" time per call across ranks, GB/s; * = fastest", flush=True)
        print(COLUMNS, flush=True)


def _progress(row: dict, done: int, total: int, elapsed: float) -> None:
    """Rank 0's status line on stderr: where the sweep is."""
    print(f"# [{elapsed:7.1f} s] {done}/{total} {row['collective']} "
          f"{row['nbytes']} B done", file=sys.stderr, flush=True)


def _close_table(comm, args, records, collective) -> None:
    """Rank 0: the closing summary of ``collective``'s table."""
    if collective is None or comm.rank != 0 or args.quiet:
        return
    print(f"# {collective} summary: per size, the best algorithm and what "
          f"auto chose, with speed-ups over native")
    for row in summary(records, collective):
        best = f"{row.best or '(none right)'} {_times(row.best_speedup)}"
        auto = f"auto({row.auto}) {_times(row.auto_speedup)}" \
            if row.auto else ""
        print(f"#   {row.nbytes:>10} B  {best:<34} {auto}")
    wrong = sum(r["wrong"] for r in records if r["collective"] == collective)
    verdict = f"{wrong} wrong elements" if wrong else "all results right"
    print(f"# {collective}: {verdict}", flush=True)


def _times(speedup: float | None) -> str:
    return f"{speedup:.2f}x" if speedup else "-"


def header(comm, argv) -> dict:
    """Where and how the run was made (collective: gathers the node names,
    Slurm's where it gives them, as :mod:`mpicoll.guard.launch` counts nodes)."""
    import mpi4py

    hosts = list(exchange.allgather(MPI.Intracomm(comm), node_name()))
    levels = {MPI.THREAD_SINGLE: "single", MPI.THREAD_FUNNELED: "funneled",
              MPI.THREAD_SERIALIZED: "serialized",
              MPI.THREAD_MULTIPLE: "multiple"}
    vendor, version = MPI.get_vendor()
    return {"mpicoll": mpicoll.__version__, "mpi4py": mpi4py.__version__,
            "mpi_library": MPI.Get_library_version().splitlines()[0].strip(),
            "mpi_vendor": f"{vendor} {'.'.join(map(str, version))}",
            "thread_level": levels.get(MPI.Query_thread(), "unknown"),
            "mpi_settings": mpi_settings(),
            "hostnames": sorted(set(hosts)), "nranks": comm.size,
            "ranks_per_node": max(hosts.count(h) for h in set(hosts)),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "command": " ".join([sys.executable, "-m", "mpicoll.bench",
                                 *argv])}


def mpi_settings() -> dict:
    """MPICH's settings in this process's environment (``MPIR_CVAR_*``
    and their ``MPICH_*`` aliases), which change what a run measures: e.g.
    ``MPIR_CVAR_CH4_CMA_ENABLE=1``, single-copy transfers between ranks on
    one node (docs/performance.md); and NumPy's
    ``NUMPY_MADVISE_HUGEPAGE`` (huge pages for large buffers, or not:
    docs/validation.md)."""
    return {k: v for k, v in sorted(os.environ.items())
            if k.startswith(("MPIR_CVAR_", "MPICH_"))
            or k == "NUMPY_MADVISE_HUGEPAGE"}


def flat(rec: dict) -> dict:
    """A record with ``time_us`` spread into ``time_us_avg`` etc. (CSV)."""
    out = {k: v for k, v in rec.items() if k != "time_us"}
    out.update({f"time_us_{k}": v for k, v in rec["time_us"].items()})
    return out


def write_outputs(args, head: dict, records: list[dict]) -> None:
    """JSON, CSV, plot and rules files, if asked for (call on rank 0)."""
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"header": head, "records": records}, f, indent=1)
    if args.csv and records:
        rows = [flat(r) for r in records]
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    if args.plot:
        plotting.plot_busbw(records, args.plot)
    if args.emit_rules:
        with open(args.emit_rules, "w") as f:
            json.dump(rules_from_records(records, head["nranks"]), f,
                      indent=1)


def main(argv=None, comm=None) -> int:
    """Run the benchmark; 0 if every result was right, 1 if any was wrong,
    2 for bad arguments (the same on every rank)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    world = MPI.COMM_WORLD if comm is None else getattr(comm, "mpi", comm)
    try:
        args = parse_args(argv, world.Get_rank(), world.Get_size())
    except SystemExit as e:
        return 0 if e.code in (0, None) else int(e.code)
    comm = mpicoll.Comm(world)
    head = header(comm, argv)
    records = run(args, comm)
    if comm.rank == 0:
        write_outputs(args, head, records)
    MPI.Intracomm(comm).Barrier()
    return 1 if any(r["wrong"] for r in records) else 0
