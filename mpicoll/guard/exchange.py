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
