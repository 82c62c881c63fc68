"""Command line of ``python -m mpicoll.simulate``: predicted times, no MPI.

    python -m mpicoll.simulate -c allreduce -a ring,rabenseifner \\
        --ranks 1024,4096 -b 1K -e 64M -f 8
    python -m mpicoll.simulate -a ring,recursive_doubling --model simgrid \\
        --network dragonfly:4,4,4,4 --ranks 256 --emit-rules rules.json
    MPICOLL_RULES=rules.256.json ...     # auto then picks the predicted best

For every collective, rank count, algorithm and size it predicts one
call's time, either with the analytic α-β-γ model of :mod:`mpicoll.model.cost`
(``--model analytic``, the default: contention-free, the topology does not
matter) or with SimGrid on the ``--network`` platform
(``--model simgrid``: :func:`mpicoll.sim.simgrid.run_collective`, optional extra,
``scripts/simgrid.sh``), or, on ``ring:P``, ``torus:..``,
``hypercube:d`` and ``dragonfly:G,C,R,N``, with SimGrid's link model in
closed form (``--model closed-form``, no SimGrid:
:func:`mpicoll.sim.simgrid.torusflow.closed_form`; schedules symmetric under a
shift or xor of ranks or of nodes, and on the dragonfly all-pairs rounds,
whose rounds SimGrid cannot hold at 65,536 ranks, as the far partners on
a ring or the linear all-to-all's 4.3·10⁹ flows; equal to SimGrid's run
where both go (on the dragonfly within 2·10⁻⁵), but for tori with even
dimensions: docs/simulation.md). The
table (:mod:`mpicoll.cli.tables`), ``--json`` records and ``--emit-rules``
files are the benchmark's, each record marked ``"predicted": true`` with
the ``model`` and ``network``; a rules file carries ``"source":
"simulation, ..."``, which explain mode reports.

Costs: ``--alpha`` (s per message, default 1e-6: two 0.5 µs links of the
default platform), ``--beta`` (s per byte, default 8e-11: 12.5 GB/s) and
``--gamma`` (s per byte reduced, default 1e-10: 10 GB/s). For SimGrid the
links get latency α/2 and bandwidth 1/β, so a message between two nodes of
``flat`` costs α + β·bytes; other topologies add latency per hop.
Ranks on one node (``--ranks-per-node``) talk at the platform's intra-node
defaults, 0.2 µs and 50 GB/s, in both models. ``--calibration FILE``
(analytic model only) takes the costs measured by ``python -m
mpicoll.bench.calibrate`` instead, per message-size range, for every message
(:mod:`mpicoll.model.calibration`); with ``--calibration-intra FILE`` as well
(two ranks on one node) the messages inside a node take that file's.
``--send-overhead O`` (SimGrid only) charges every send O seconds of its
sender's time before it enters the network, one send after another (LogP's
o, SMPI's ``smpi/ois``): without it a rank's messages of a round all start
at once, so a linear algorithm pays the latency once for its p-1 messages;
``--recv-overhead O`` (SimGrid only) charges every received message O
seconds of its receiver's time once it has arrived, one after another
(LogP's o at the receiver).
``--quantum Q`` (SimGrid only) has the simulator's controller look for
ended messages every Q simulated seconds instead of at every instant one
ends (:func:`mpicoll.sim.simgrid.run_collective`): faster where many flows end at
many instants, and an approximation, within (rounds) × Q without
contention; the table titles, JSON header and rules source say it, as
they say ``--sample-peers N`` (SimGrid only: the linear algorithms' one
round of p-1 messages per rank simulated with N of them, each carrying
the bytes of the offsets it stands for: :mod:`mpicoll.sim.simgrid.peer_sample`)
and ``--phases`` (SimGrid only: an algorithm declared as collectives run
one after the other simulated phase by phase, the times added). The
SimGrid options are :mod:`mpicoll.sim.simgrid.options`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time

import numpy as np

import mpicoll
from mpicoll.sim.simgrid import options as simgrid_options
from mpicoll.cli import options
from mpicoll.cli import plot as plotting
from mpicoll.cli.sizes import message_bytes, swept_counts
from mpicoll.cli.tables import COLUMNS, print_rows, summary
from mpicoll.model.calibration import Calibration, CalibrationError, \
    load_calibration
from mpicoll.collectives import COLLECTIVES
from mpicoll.model.cost import Network, predict
from mpicoll.sim.simgrid.driver import simgrid_folder
from mpicoll.sim.simgrid import torusflow
from mpicoll.sim.simgrid.networks import Platform, PlatformError, parse
from mpicoll.select.policy import rules_from_records

ALPHA, BETA, GAMMA = 1e-6, 8e-11, 1e-10


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m mpicoll.simulate",
        description="Predict the time of mpicoll's hand-built collectives "
                    "at any rank count, without MPI.")
    a = p.add_argument
    options.add_collective_options(
        a, default="allreduce",
        help=f"comma list ({', '.join(options.COLLECTIVE_NAMES)}); default "
             "allreduce",
        algorithm_help="comma list or 'all' (every hand-built one); default "
                       "all")
    a("--network", default="flat",
      help="platform spec (flat[:N], ring:P, torus:AxBxC, hypercube:d, "
           "fattree:L;down;up;parallel, dragonfly:G,C,R,N); default flat, "
           "as many nodes as needed")
    a("--ranks", default="1024", help="comma list of rank counts; "
                                      "default 1024")
    a("--ranks-per-node", type=int, default=1, metavar="N",
      help="ranks per node, placed in blocks; default 1")
    options.add_size_options(a, maxbytes="1G")
    options.add_dtype_option(a)
    a("--model", choices=("analytic", "simgrid", "closed-form"),
      default="analytic",
      help="analytic (default), simgrid (--network on SimGrid), or "
           "closed-form (SimGrid's model without it: --network ring:P, "
           "torus:.., hypercube:d or dragonfly:G,C,R,N, symmetric "
           "schedules)")
    a("--alpha", type=float,
      help=f"seconds per message; default {ALPHA:g}")
    a("--beta", type=float,
      help=f"seconds per byte; default {BETA:g} (12.5 GB/s)")
    a("--gamma", type=float,
      help=f"seconds per byte reduced; default {GAMMA:g} (10 GB/s)")
    a("--calibration", metavar="FILE",
      help="analytic: the costs measured by python -m mpicoll.calibrate "
           "(instead of --alpha/--beta/--gamma), for every message")
    a("--calibration-intra", metavar="FILE",
      help="analytic, with --calibration (measured with one rank on each "
           "of two nodes) and --ranks-per-node above 1: a calibration of "
           "two ranks on one node, for the messages inside a node")
    simgrid_options.add_arguments(a)
    options.add_output_options(
        a, csv=False,
        plot_help="time by size per algorithm, a panel per collective and "
                  "rank count (needs matplotlib)",
        rules_help="rules file of the predicted best (one rank count: FILE; "
                   "several: FILE with .RANKS before the extension)")
    a("--quiet", action="store_true", help="no tables")
    return p


def parse_args(argv) -> argparse.Namespace:
    """Parse and check ``argv``; SystemExit 2 with a message if bad."""
    p = _parser()
    args = p.parse_args(argv)
    args.collectives = options.collective_names(p, args.collective,
                                                allow_all=False)
    try:
        args.rank_counts = [int(r) for r in args.ranks.split(",")]
    except ValueError:
        p.error(f"--ranks: not a list of integers: {args.ranks!r}")
    args.algorithms, missing = options.algorithm_names(
        args.algorithm, args.collectives, options.hand_built_algorithms)
    if missing:
        p.error(f"not a hand-built algorithm of {args.collective}: "
                f"{', '.join(missing)}")
    args.calibrated = _calibration(p, args)
    args.calibrated_intra = _calibration_intra(p, args)
    problems = [
        (any(r < 1 for r in args.rank_counts), "--ranks must be positive"),
        (args.ranks_per_node < 1, "--ranks-per-node must be positive"),
        *options.size_problems(args),
        (min(args.alpha, args.gamma) < 0 or args.beta <= 0,
         "--alpha and --gamma must be >= 0, --beta > 0"),
        options.plot_problem(args),
        *simgrid_options.problems(args)]
    for bad, message in problems:
        if bad:
            p.error(message)
    try:
        args.platform = platform(args)
    except PlatformError as e:
        p.error(str(e))
    if args.model == "closed-form" and \
            args.platform.kind not in torusflow.CLOSED_FORM_KINDS:
        p.error("--model closed-form is for --network ring:P, torus:.., "
                "hypercube:d or dragonfly:G,C,R,N")
    if args.model == "simgrid":
        try:  # the folder, now: a usage error, not the child's traceback
            args.simgrid = simgrid_folder(args.simgrid)
        except FileNotFoundError as e:
            p.error(f"--simgrid or MPICOLL_SIMGRID: {e}")
    return args


def _calibration(p, args) -> Calibration | None:
    """The ``--calibration`` file, loaded (--alpha/--beta/--gamma and
    --model simgrid are refused with it), or None; unset ones of
    --alpha/--beta/--gamma take their defaults (the platform's links)."""
    given = [k for k in ("alpha", "beta", "gamma")
             if getattr(args, k) is not None]
    for k, default in (("alpha", ALPHA), ("beta", BETA), ("gamma", GAMMA)):
        if getattr(args, k) is None:
            setattr(args, k, default)
    if args.calibration is None:
        return None
    if given or args.model != "analytic":
        p.error("--calibration takes the place of --alpha/--beta/--gamma, "
                "for the analytic model")
    try:
        return load_calibration(args.calibration)
    except (OSError, CalibrationError) as e:
        p.error(f"--calibration: {e}")


def _calibration_intra(p, args) -> Calibration | None:
    """The ``--calibration-intra`` file, loaded, or None; refused without
    ``--calibration``, without ranks sharing a node, or where the files'
    own ranks per node say they measured the other link."""
    path = args.calibration_intra
    if path is None:
        return None
    if args.calibrated is None:
        p.error("--calibration-intra refines --calibration (the link between "
                "nodes), which is missing")
    if args.ranks_per_node < 2:
        p.error("--calibration-intra needs --ranks-per-node above 1: with "
                "one rank per node no message stays inside a node")
    try:
        intra = load_calibration(path)
    except (OSError, CalibrationError) as e:
        p.error(f"--calibration-intra: {e}")
    for name, cal, want_many in (("--calibration", args.calibrated, False),
                                 ("--calibration-intra", intra, True)):
        per_node = cal.ranks_per_node
        if per_node is not None and (per_node > 1) != want_many:
            p.error(f"{name} was measured with {per_node} rank(s) per node: "
                    + ("a link inside a node, where the link between nodes "
                       "is wanted" if not want_many else
                       "a link between nodes, where the one inside a node "
                       "is wanted"))
    return intra


def platform(args) -> Platform:
    """The ``--network`` platform with ``--alpha``/``--beta`` as link
    latency α/2 and bandwidth 1/β; a bare ``flat`` gets enough nodes for
    the largest rank count."""
    spec = args.network
    if spec.strip() == "flat":
        spec = f"flat:{math.ceil(max(args.rank_counts) / args.ranks_per_node)}"
    # SimGrid needs a positive latency: --alpha 0 becomes 1e-12 s per link
    plat = parse(spec, ranks_per_node=args.ranks_per_node,
                 latency=args.alpha / 2 or 1e-12, bandwidth=1 / args.beta)
    plat.node_map(max(args.rank_counts))  # PlatformError if they do not fit
    return plat


def network(args) -> Network:
    """The analytic model's costs: the ``--calibration`` file's for every
    message; else ``--alpha/--beta/--gamma`` between nodes, the
    platform's intra-node link within one."""
    if args.calibrated is not None:
        return args.calibrated.network("sum", args.dtype,
                                       intra=args.calibrated_intra)
    plat = args.platform
    return Network(args.alpha, args.beta, args.gamma,
                   alpha_intra=plat.intra_latency,
                   beta_intra=1 / plat.intra_bandwidth)


def torus_dims(plat: Platform) -> tuple[int, ...] | None:
    """A ``torus``, ``ring`` or ``hypercube`` network's dimensions in MPI's
    Cartesian order, the ranks of a node last (SimGrid numbers a torus's
    hosts with its first dimension fastest, MPI the last); None for other
    networks. Cartesian algorithms (the ``torus`` allreduce) run on them,
    as on a ``Create_cart`` of that shape."""
    if plat.kind not in ("ring", "torus", "hypercube"):
        return None
    dims = tuple(reversed(plat.shape))
    return (*dims, plat.ranks_per_node) if plat.ranks_per_node > 1 else dims


def predicted_seconds(args, collective: str, algorithm: str, size: int,
                      count) -> float:
    """One call's predicted time under ``args.model``."""
    itemsize = np.dtype(args.dtype).itemsize
    nodes = args.platform.node_map(size) if args.ranks_per_node > 1 else None
    dims = torus_dims(args.platform)
    if args.model == "analytic":
        return predict(collective, algorithm, size, count, itemsize,
                       network(args), nodes=nodes, dims=dims)
    if args.model == "closed-form":
        return torusflow.closed_form(collective, algorithm, size, count,
                                     itemsize, args.platform, args.gamma,
                                     dims=dims).time
    from mpicoll.sim.simgrid import run_collective

    return run_collective(collective, algorithm, size, count, args.platform,
                    itemsize=itemsize, gamma=args.gamma, dims=dims,
                    **simgrid_options.simulate_kwargs(args)).time


def record(args, collective: str, algorithm: str, size: int, count,
           seconds: float) -> dict:
    """A benchmark record (:func:`mpicoll.bench.harness.record`'s fields)
    for a predicted time, marked ``predicted`` with model and network."""
    row = COLLECTIVES[collective]
    nbytes = message_bytes(collective, count, size,
                           np.dtype(args.dtype).itemsize)
    us = seconds * 1e6
    algbw = nbytes / (us * 1e3) if us > 0 else 0.0
    return {"collective": collective, "algorithm": algorithm,
            "chosen": None, "nranks": size, "dtype": args.dtype,
            "op": "sum" if row.reducing else None,
            "root": 0 if row.rooted else None, "count": count,
            "nbytes": nbytes, "inplace": False, "device": "cpu",
            "persistent": False,
            "time_us": dict.fromkeys(("avg", "min", "max", "p50", "p99"), us),
            "algbw_gbps": algbw, "busbw_gbps": algbw * row.bus_factor(size),
            "iters": 0, "wrong": 0, "predicted": True, "model": args.model,
            "network": args.platform.spec,
            "ranks_per_node": args.ranks_per_node}


def model_name(args) -> str:
    """The model as titles and rules sources name it: ``simgrid model``,
    with ``, quantum Q s`` and ``, N sampled peers`` when ``--quantum``
    and ``--sample-peers`` made it approximate, ``closed-form model, even
    sides as their busiest links`` on a torus where the fluid model
    approximates (:func:`mpicoll.sim.simgrid.torusflow.even_sided`)."""
    busiest = args.model == "closed-form" and \
        torusflow.even_sided(args.platform)
    return (f"{args.model} model" + simgrid_options.approximations(args)
            + ", even sides as their busiest links" * busiest)


def run(args) -> list[dict]:
    """Predict every case, printing the tables; the records."""
    records = []
    for collective in args.collectives:
        for size in args.rank_counts:
            mine = []
            if not args.quiet:
                print(f"\n# {collective}, {size} ranks, {model_name(args)}, "
                      f"{args.platform.spec}, {args.ranks_per_node} per node;"
                      f" predicted time per call, GB/s; * = fastest",
                      flush=True)
                print(COLUMNS, flush=True)
            for count in swept_counts(args, collective, size):
                rows = []
                for alg in args.algorithms[collective]:
                    try:
                        t = predicted_seconds(args, collective, alg, size,
                                              count)
                    except (ValueError, KeyError, TimeoutError) as e:
                        print(f"# {alg} skipped: {e}", file=sys.stderr)
                        continue
                    rows.append(record(args, collective, alg, size, count, t))
                if not args.quiet:
                    print_rows(rows)
                mine += rows
            records += mine
            if not args.quiet:
                print(f"# {collective} at {size} ranks: the predicted best")
                for s in summary(mine, collective):
                    print(f"#   {s.nbytes:>10} B  {s.best}")
    return records


def header(args, argv) -> dict:
    """What was predicted and how (the ``--json`` header)."""
    return {"mpicoll": mpicoll.__version__, "predicted": True,
            "model": args.model, "network": args.platform.spec,
            "ranks_per_node": args.ranks_per_node,
            "nranks": args.rank_counts,
            **{k: None if args.calibrated else getattr(args, k)
               for k in ("alpha", "beta", "gamma")},
            "calibration": args.calibrated and args.calibrated.description,
            "calibration_intra": (args.calibrated_intra
                                  and args.calibrated_intra.description),
            **simgrid_options.header_fields(args),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "command": " ".join([sys.executable, "-m", "mpicoll.simulate",
                                 *argv])}


def rules_path(path: str, size: int, several: bool) -> str:
    """``path`` itself, or with ``.size`` before its extension."""
    if not several:
        return path
    stem, ext = os.path.splitext(path)
    return f"{stem}.{size}{ext}"


def write_outputs(args, head: dict, records: list[dict]) -> None:
    """JSON, plot and rules files, if asked for."""
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"header": head, "records": records}, f, indent=1)
    if args.plot:
        plotting.plot_times(records, args.plot)
    if args.emit_rules:
        several = len(args.rank_counts) > 1
        for size in args.rank_counts:
            rules = rules_from_records(records, size)
            rules["source"] = (f"simulation, {model_name(args)}, "
                               f"{args.platform.spec}, "
                               f"{args.ranks_per_node} per node")
            with open(rules_path(args.emit_rules, size, several), "w") as f:
                json.dump(rules, f, indent=1)


def main(argv=None) -> int:
    """Run the command; 0 on success, 2 for bad arguments."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parse_args(argv)
    except SystemExit as e:
        return 0 if e.code in (0, None) else int(e.code)
    t0 = time.perf_counter()
    records = run(args)
    write_outputs(args, header(args, argv), records)
    if not args.quiet:
        print(f"# {len(records)} predictions in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
    return 0
