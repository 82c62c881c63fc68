"""The ``--model simgrid`` options of ``python -m mpicoll.simulate``.

Their arguments (:func:`add_arguments`), their checks (:func:`problems`),
the keyword arguments they give :func:`mpicoll.sim.simgrid.run_collective`
(:func:`simulate_kwargs`), and how the approximations they ask for are
named in titles and rules sources (:func:`approximations`) and in the
``--json`` header (:func:`header_fields`). The approximations themselves
are :mod:`mpicoll.sim.simgrid`'s: repeated rounds (``--keep``), sampled rounds
(``--sample-rounds``), sampled peers (``--sample-peers``), symmetry
(``--symmetric``), phases simulated one after the other (``--phases``)
and the time quantum (``--quantum``).
"""

from __future__ import annotations

import argparse
import math


def add_arguments(a) -> None:
    """Add the options with ``a`` (a parser's ``add_argument``)."""
    a("--keep", type=int, metavar="K",
      help="simgrid: simulate K rounds of each run of identical rounds and "
           "extrapolate (default: all)")
    a("--sample-rounds", type=int, metavar="N",
      help="simgrid: simulate N pairs of consecutive rounds (first and "
           "last included) and interpolate the others' durations, for "
           "schedules whose rounds all differ (default: all)")
    a("--sample-peers", type=int, metavar="N",
      help="simgrid: keep the messages of N sampled peer offsets, each "
           "carrying the bytes of its stratum's offsets, for schedules "
           "that post all their messages in one round (the linear ones; "
           "default: all)")
    a("--symmetric", action="store_true",
      help="simgrid: build rank 0's schedule (or node 0's ranks') and a "
           "sample, relabel the rest")
    a("--phases", action="store_true",
      help="simgrid: simulate an algorithm declared as collectives run "
           "one after the other (the broadcast's scatter_allgather) phase "
           "by phase, each with the options it allows (--symmetric for the "
           "unrooted ones), and add their times; others whole")
    a("--send-overhead", type=float, default=0.0, metavar="SECONDS",
      help="simgrid: CPU time each send costs its sender before it enters "
           "the network, one send after another (LogP's o; SMPI's "
           "smpi/ois): a rank's i-th message of a round (i = 0, 1, ...) "
           "leaves (i+1)*SECONDS after the round starts, so an algorithm "
           "posting p-1 messages at once pays p-1 overheads; default 0 "
           "(all of a round's messages start together)")
    a("--recv-overhead", type=float, default=0.0, metavar="SECONDS",
      help="simgrid: CPU time each message costs its receiver once it has "
           "arrived, one message after another in the order they arrive "
           "(LogP's o at the receiver), so an algorithm receiving p-1 "
           "messages in a round pays p-1 overheads; default 0 (a message "
           "is received when it ends)")
    a("--quantum", type=float, default=0.0, metavar="SECONDS",
      help="simgrid: the controller looks for ended messages every SECONDS "
           "of simulated time (and at reductions' ends) instead of at each "
           "instant one ends, so a rank's next round starts up to SECONDS "
           "late: faster when many flows end at many instants, an "
           "approximation; default 0 (exact, event-driven)")
    a("--timeout", type=float, default=300.0, metavar="SECONDS",
      help="simgrid: limit per run; default 300")
    a("--simgrid", metavar="DIR",
      help="simgrid: folder of the SimGrid module to run (4.1: "
           "scripts/simgrid41.sh --print-dir); default $MPICOLL_SIMGRID, "
           "else the venv's")


def problems(args: argparse.Namespace) -> list[tuple[bool, str]]:
    """``(bad, message)`` for each check of the options."""
    simgrid = args.model == "simgrid"
    return [
        (args.keep is not None and args.keep < 2, "--keep must be >= 2"),
        (args.sample_rounds is not None and args.sample_rounds < 2,
         "--sample-rounds must be >= 2 (the first and last pairs)"),
        (args.sample_rounds is not None and args.keep is not None,
         "--keep and --sample-rounds are two ways to leave rounds out: "
         "use one"),
        (args.sample_rounds is not None and not simgrid,
         "--sample-rounds is for --model simgrid"),
        (args.sample_peers is not None and args.sample_peers < 1,
         "--sample-peers must be >= 1"),
        (args.sample_peers is not None and not simgrid,
         "--sample-peers is for --model simgrid"),
        (args.phases and not simgrid, "--phases is for --model simgrid"),
        *[problem for side in ("send", "recv")
          for problem in _overhead_problems(args, side, simgrid)],
        (not math.isfinite(args.quantum) or args.quantum < 0,
         "--quantum must be a finite number >= 0"),
        (args.quantum and not simgrid,
         "--quantum is for --model simgrid (the analytic model has no "
         "events to quantize)")]


def _overhead_problems(args: argparse.Namespace, side: str,
                       simgrid: bool) -> list[tuple[bool, str]]:
    """:func:`problems`' checks of ``--send-overhead`` or
    ``--recv-overhead`` (``side``: send or recv)."""
    option = f"--{side}-overhead"
    value = getattr(args, f"{side}_overhead")
    return [
        (args.sample_peers is not None and value,
         f"--sample-peers leaves messages out, whose {option} would not "
         "be charged: use one"),
        (not math.isfinite(value) or value < 0,
         f"{option} must be a finite number >= 0"),
        (value and not simgrid,
         f"{option} is for --model simgrid (the analytic model charges "
         "--alpha per message)")]


def simulate_kwargs(args: argparse.Namespace) -> dict:
    """The options as :func:`mpicoll.sim.simgrid.run_collective`'s keyword arguments."""
    return {"keep": args.keep, "sample": args.sample_rounds,
            "peers": args.sample_peers, "symmetric": args.symmetric,
            "phases": args.phases,
            "send_overhead": args.send_overhead,
            "recv_overhead": args.recv_overhead, "quantum": args.quantum,
            "timeout": args.timeout, "simgrid": args.simgrid}


def approximations(args: argparse.Namespace) -> str:
    """``", quantum Q s, N sampled peers, by phases"``: the
    approximations named with the model in titles and rules sources;
    ``""`` when none."""
    said = [f"quantum {args.quantum:g} s"] * bool(args.quantum)
    said += [f"{args.sample_peers} sampled peers"] * (
        args.sample_peers is not None)
    said += ["by phases"] * args.phases
    return "".join(f", {s}" for s in said)


def header_fields(args: argparse.Namespace) -> dict:
    """The options in the ``--json`` header."""
    return {"keep": args.keep, "sample_rounds": args.sample_rounds,
            "sample_peers": args.sample_peers, "phases": args.phases,
            "send_overhead": args.send_overhead,
            "recv_overhead": args.recv_overhead, "quantum": args.quantum,
            "symmetric": args.symmetric}
