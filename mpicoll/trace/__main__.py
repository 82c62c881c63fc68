"""``python -m mpicoll.trace DIR [--json]``: the verdict on a run's traces.

Exit status: 0 when nothing is wrong (every communicator clean), 1 when a
divergence, a hang or a member without a trace is found, 2 for a usage
error or no readable trace file.
"""

from __future__ import annotations

import argparse
import json
import sys

from mpicoll.trace.report import render, summary
from mpicoll.trace.verdict import PATTERN, TraceError, analyse, load


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: paths (folders or trace files) and ``--json``."""
    parser = argparse.ArgumentParser(
        prog="python -m mpicoll.trace",
        description="Merge mpicoll flight-recorder traces (one file per MPI "
                    "process) and say which call diverged, who is missing, "
                    "who straggles.")
    parser.add_argument("paths", nargs="+", metavar="DIR",
                        help=f"a folder holding {PATTERN} files, or such files")
    parser.add_argument("--json", action="store_true",
                        help="print the verdict as JSON instead of text")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the command; its exit status (0 clean, 1 problem, 2 no traces)."""
    args = parse_args(argv)
    try:
        verdict = analyse(load(args.paths))
    except TraceError as e:
        print(f"python -m mpicoll.trace: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(dict(verdict, summary=summary(verdict)), indent=2))
    else:
        print(render(verdict))
    return 0 if verdict["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
