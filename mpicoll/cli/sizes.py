"""Message sizes as the tools take and report them.

A size on the command line is bytes (``8``, ``64K``, ``1M``, ``2G``,
:func:`parse_size`); ``-b``, ``-e`` and ``-f`` sweep ``lo, lo·f, lo·f², ...
<= hi`` (:func:`sizes`). A collective's reported size follows nccl-tests:
the row's ``report_blocks`` (:data:`mpicoll.collectives.COLLECTIVES`) says
whether it covers all ``p`` blocks of ``count`` elements (allgather reports
its output, reduce-scatter its input, alltoall one rank's send buffer) or
one vector (allreduce, bcast, ...); barrier carries no bytes.
"""

from __future__ import annotations

import argparse

import numpy as np

from mpicoll.collectives import COLLECTIVES

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """Bytes from ``8``, ``64K``, ``1M``, ``2G`` (a trailing B is allowed);
    ``argparse.ArgumentTypeError`` if it is not a size or is negative."""
    t = text.strip().upper().removesuffix("B")
    scale = UNITS.get(t[-1:], 1)
    digits = t[:-1] if t[-1:] in UNITS else t
    try:
        value = int(float(digits) * scale)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"negative size: {text!r}")
    return value


def sizes(lo: int, hi: int, factor: float) -> list[int]:
    """``lo, lo*f, lo*f², ... <= hi`` (just ``lo`` when ``lo == hi``)."""
    out = [lo]
    while factor > 1 and int(out[-1] * factor) <= hi:
        out.append(max(out[-1] + 1, int(out[-1] * factor)))
    return out


def _blocks(collective: str, nranks: int) -> int:
    """Blocks the reported size covers: ``nranks`` or one."""
    return nranks if COLLECTIVES[collective].report_blocks else 1


def message_bytes(collective: str, count: int, nranks: int,
                  itemsize: int) -> int:
    """The reported size of a call of ``count`` elements per block."""
    return count * itemsize * _blocks(collective, nranks)


def block_count(collective: str, nbytes: int, nranks: int,
                itemsize: int) -> int:
    """Elements per block for a reported size of ``nbytes`` (at least 1;
    0 for barrier)."""
    if COLLECTIVES[collective].counts == "none":
        return 0
    return max(1, nbytes // (itemsize * _blocks(collective, nranks)))


def swept_counts(args: argparse.Namespace, collective: str,
                 nranks: int) -> list[int]:
    """Elements per block for each size from ``args.minbytes`` to
    ``args.maxbytes`` by ``args.stepfactor`` in ``args.dtype``, sizes that
    round to the same count dropped."""
    itemsize = np.dtype(args.dtype).itemsize
    return list(dict.fromkeys(
        block_count(collective, n, nranks, itemsize)
        for n in sizes(args.minbytes, args.maxbytes, args.stepfactor)))
