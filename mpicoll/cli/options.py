"""The options the tools define alike, and how they are read.

``-c/--collective`` and ``-a/--algorithm`` (comma lists, read by
:func:`collective_names` and :func:`algorithm_names`), ``-b``, ``-e`` and
``-f`` (the sizes swept, :mod:`mpicoll.cli.sizes`), ``-d/--dtype`` and
the output files (``--json``, ``--plot``, ``--emit-rules``), for
``python -m mpicoll.bench``, ``python -m mpicoll.simulate`` and
``python -m mpicoll.calibrate``. A tool adds them with its parser's
``add_argument`` and checks them with its own: a bad value is
``parser.error`` (usage, message, exit code 2). :class:`RankZeroParser`
is the parser of the tools that run under MPI.
"""

from __future__ import annotations

import argparse

from mpicoll.cli import plot
from mpicoll.cli.sizes import parse_size
from mpicoll.coll.registry import algorithms

#: The collectives the tools sweep by size, in their tables' order: those
#: whose ``count`` is one number (not the v-forms and reduce_scatter,
#: whose counts are per rank).
COLLECTIVE_NAMES = ("allreduce", "reduce", "bcast", "allgather",
                    "reduce_scatter_block", "alltoall", "barrier", "gather",
                    "scatter", "scan", "exscan")
DTYPES = ("float32", "float64", "int32", "int64")


class RankZeroParser(argparse.ArgumentParser):
    """Prints (usage, errors, help) on rank 0 only; exits the same on all
    ranks, so a bad argument ends every rank with code 2 before any
    communication."""

    def __init__(self, rank: int, **kwargs):
        super().__init__(**kwargs)
        self.rank = rank

    def _print_message(self, message, file=None):
        if self.rank == 0:
            super()._print_message(message, file)


def comma_list(text: str) -> list[str]:
    """The non-empty items of a comma list, stripped."""
    return [item.strip() for item in text.split(",") if item.strip()]


def add_collective_options(add, *, default: str, help: str,
                           algorithm_help: str) -> None:
    """``-c/--collective`` (``default``, ``help``) and ``-a/--algorithm``
    (default ``all``) with ``add`` (a parser's ``add_argument``)."""
    add("-c", "--collective", default=default, help=help)
    add("-a", "--algorithm", default="all", help=algorithm_help)


def add_size_options(add, minbytes: str | None = "8",
                     maxbytes: str | None = "16M",
                     stepfactor: str | None = "2",
                     helps: tuple[str, str, str] | None = None) -> None:
    """``-b/--minbytes``, ``-e/--maxbytes`` and ``-f/--stepfactor`` with
    ``add``, their defaults as a user types them (``"16M"``), each helped
    by ``default X``; or, with ``helps``, those three help texts (where a
    default of None leaves the tool to choose one)."""
    defaults = (minbytes, maxbytes, stepfactor)
    helps = helps or tuple(f"default {d}" for d in defaults)
    add("-b", "--minbytes", type=parse_size, help=helps[0],
        default=None if minbytes is None else parse_size(minbytes))
    add("-e", "--maxbytes", type=parse_size, help=helps[1],
        default=None if maxbytes is None else parse_size(maxbytes))
    add("-f", "--stepfactor", type=float, help=helps[2],
        default=None if stepfactor is None else float(stepfactor))


def add_dtype_option(add, help: str | None = None) -> None:
    """``-d/--dtype``, one of :data:`DTYPES`, default float32."""
    add("-d", "--dtype", choices=DTYPES, default="float32", help=help)


def add_output_options(add, *, csv: bool, plot_help: str,
                       rules_help: str) -> None:
    """``--json FILE`` (the header and the records), ``--csv FILE`` (the
    records, where ``csv``), ``--plot FILE.png`` and ``--emit-rules FILE``
    (a rules file for ``MPICOLL_RULES``) with ``add``."""
    add("--json", metavar="FILE")
    if csv:
        add("--csv", metavar="FILE")
    add("--plot", metavar="FILE.png", help=plot_help)
    add("--emit-rules", metavar="FILE", help=rules_help)


def collective_names(parser: argparse.ArgumentParser, text: str, *,
                     allow_all: bool) -> list[str]:
    """The collectives of ``-c`` (``all``: :data:`COLLECTIVE_NAMES`, where
    ``allow_all``); ``parser.error`` for an unknown one or none."""
    if allow_all and text == "all":
        return list(COLLECTIVE_NAMES)
    names = comma_list(text)
    unknown = [c for c in names if c not in COLLECTIVE_NAMES]
    if unknown or not names:
        parser.error(f"unknown collective(s): "
                     f"{', '.join(unknown) or '(none)'}")
    return names


def hand_built_algorithms(collective: str) -> list[str]:
    """Every registered algorithm of ``collective`` but ``native``."""
    return [a for a in algorithms(collective) if a != "native"]


def algorithm_names(text: str, collectives: list[str], candidates
                    ) -> tuple[dict[str, list[str]], list[str]]:
    """Per collective, the algorithms of ``-a`` among
    ``candidates(collective)`` (``all``: every candidate; else in the
    order asked), and the names asked for that no collective has."""
    if text == "all":
        return {c: candidates(c) for c in collectives}, []
    wanted = comma_list(text)
    known = {a for c in collectives for a in candidates(c)}
    chosen = {c: [a for a in wanted if a in candidates(c)]
              for c in collectives}
    return chosen, [a for a in wanted if a not in known]


def size_problems(args: argparse.Namespace) -> list[tuple[bool, str]]:
    """``(bad, message)`` for each check of ``-b``, ``-e`` and ``-f``."""
    return [(args.minbytes > args.maxbytes, "-b is larger than -e"),
            (args.stepfactor <= 1 and args.minbytes != args.maxbytes,
             "-f must be > 1")]


def plot_problem(args: argparse.Namespace) -> tuple[bool, str]:
    """``(bad, message)``: ``--plot`` asked for without matplotlib."""
    return (args.plot is not None and not plot.available(),
            "--plot needs matplotlib (pip install 'mpicoll[plot]')")
