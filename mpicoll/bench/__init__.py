"""``python -m mpicoll.bench``: time every algorithm of every collective.

nccl-tests / OSU style: warm-up, barrier-aligned timed iterations,
validation after timing, ``#wrong`` per row, a table per collective on
rank 0, JSON and CSV records. :func:`run` and :func:`main` return their
results so tests can call them directly.
"""

from mpicoll.bench.cli import main, parse_args, run

__all__ = ["main", "parse_args", "run"]
