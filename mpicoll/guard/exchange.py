"""Small exchanges of the library's own metadata between ranks, no pickle.

mpi4py's lowercase calls pickle their objects, and unpickling bytes that
came from another process runs whatever those bytes say. mpicoll's own
metadata (counts agreed by v-collectives, argument problems, node maps,
mesh and bucket layouts, check-mode fingerprints) is plain data: ints,
floats, strings, booleans, None and sequences of them. It travels as JSON
text in two buffer collectives on the given (private) communicator: one
``Allgather`` of lengths (8 bytes per rank) and one ``Allgatherv`` of the
UTF-8 bytes. Decoding JSON runs no code; sequences come back as tuples.

Collective: every rank of ``comm`` calls :func:`allgather` at the same
point, as it would ``comm.allgather``.
"""

from __future__ import annotations

import json

import numpy as np


def allgather(comm, item, complete=None) -> list:
    """Every rank's ``item`` (plain data, see the module docstring), in
    rank order, lists and tuples returned as tuples. Cost: two small
    collectives; memory: the encoded items of all ranks. ``complete``
    (default: ``request.Wait()``) waits for each of the two requests, so
    that a caller can bound the wait."""
    if complete is None:
        complete = _wait
    data = np.frombuffer(encode(item), np.uint8)
    lengths = np.empty(comm.Get_size(), np.int64)
    complete(comm.Iallgather(np.array([data.size], np.int64), lengths))
    everything = np.empty(int(lengths.sum()), np.uint8)
    complete(comm.Iallgatherv(data, [everything, lengths.tolist()]))
    ends = np.cumsum(lengths).tolist()
    return [decode(everything[end - n:end].tobytes())
            for n, end in zip(lengths.tolist(), ends)]


def count_row(p: int, mine, theirs=None) -> np.ndarray:
    """This rank's counts among ``p`` ranks as one row of ``3p + 4`` int64,
    for the exchange a v-collective makes on every call
    (:func:`gather_count_rows`, then :func:`from_count_rows`): what
    :func:`allgather` does for any plain data, with no text to encode or
    decode. ``mine`` is an int, a tuple of ints or a pair of tuples of
    ints, ``theirs`` None or a tuple of ints (lists do as tuples), ``3p``
    ints in all at most; a row that does not fit comes back as None on
    every rank."""
    width = 3 * p + 4
    row = np.zeros(width, np.int64)
    try:
        head, values = _count_row(mine, theirs)
        if len(head) + len(values) > width:
            raise ValueError
        row[:4] = head
        row[4:4 + len(values)] = values
    except (TypeError, ValueError, OverflowError):
        row[0] = -1  # does not fit: None on every rank
    return row


def gather_count_rows(comm, row: np.ndarray, complete=None) -> np.ndarray:
    """Every rank's :func:`count_row`, one row per rank (collective: one
    ``Allgather``). ``complete`` as in :func:`allgather` (given, the
    exchange is an ``Iallgather``)."""
    rows = np.empty((comm.Get_size(), row.size), np.int64)
    if complete is None:
        comm.Allgather(row, rows)
    else:
        complete(comm.Iallgather(row, rows))
    return rows


def from_count_rows(rows: np.ndarray) -> list:
    """Every rank's ``(mine, theirs)``, in rank order, from the gathered
    rows: tuples of Python ints, None for a row that did not fit."""
    return [_from_count_row(r) for r in rows.tolist()]


def _count_row(mine, theirs) -> tuple:
    """``([kind, n1, n2, n3], values)`` of :func:`count_row`'s
    item: kind 0 an int, 1 a tuple of ints, 2 a tuple of two tuples of
    ints; ``n1``, ``n2`` their lengths; ``n3`` the length of ``theirs``
    (-1: None)."""
    if isinstance(mine, _INTEGERS):
        kind, parts = 0, [(mine,)]
    elif type(mine) not in _SEQUENCES:
        raise ValueError
    elif all(isinstance(x, _INTEGERS) for x in mine):
        kind, parts = 1, [mine]
    elif len(mine) == 2:
        kind, parts = 2, list(mine)
    else:
        raise ValueError
    parts.append(() if theirs is None else theirs)
    for part in parts:
        if type(part) not in _SEQUENCES or \
                not all(isinstance(x, _INTEGERS) for x in part):
            raise ValueError
    head = [kind, len(parts[0]), len(parts[1]) if kind == 2 else 0,
            -1 if theirs is None else len(theirs)]
    return head, [int(x) for part in parts for x in part]


_INTEGERS = (int, np.integer)
_SEQUENCES = (tuple, list)


def _from_count_row(row: list):
    kind, n1, n2, n3 = row[:4]
    if kind < 0:
        return None
    values = row[4:]
    mine = values[0] if kind == 0 else tuple(values[:n1]) if kind == 1 \
        else (tuple(values[:n1]), tuple(values[n1:n1 + n2]))
    used = n1 + n2
    theirs = None if n3 < 0 else tuple(values[used:used + n3])
    return mine, theirs


def _wait(request) -> None:
    request.Wait()


def encode(item) -> bytes:
    """``item`` as compact JSON; NumPy scalars become Python numbers; a
    ``TypeError`` for anything that is not plain data."""
    return json.dumps(item, separators=(",", ":"), default=_plain).encode()


def decode(data: bytes):
    """What :func:`encode` made, with every list turned into a tuple."""
    return _tuples(json.loads(data.decode()))


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not plain data")


def _tuples(value):
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value
