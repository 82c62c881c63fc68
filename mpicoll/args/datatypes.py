r"""Derived datatypes staged for hand-built algorithms: packed and unpacked.

Schedules move flat runs of one basic type. A message with a derived
datatype is :func:`pack`\ ed into contiguous scratch (by MPI itself,
``Datatype.Pack`` on ``MPI.COMM_SELF``), the algorithm runs on the scratch,
and :func:`unpack` puts the result back where the datatype says. Host
buffers only.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from mpicoll.device import cuda


def _ranges(msg):
    extent = msg.datatype.Get_extent()[1]
    if not hasattr(msg, "displs"):
        return [(msg.offset, msg.count * msg.blocks)], extent
    return [(d * extent, c) for d, c in zip(msg.displs, msg.counts)], extent


def _host_base(msg, writing: bool) -> int:
    raw = msg.buffer
    if raw is None or not isinstance(raw, np.ndarray) or \
            cuda.runtime_of(raw) is not None:
        raise ValueError("pack/unpack: only host buffers can be staged")
    if writing and not raw.flags.writeable:
        raise ValueError("unpack: the buffer is read-only")
    return raw.__array_interface__["data"][0]


def pack(msg) -> np.ndarray:
    """The message's elements (every block, in order) packed contiguously
    by MPI (``Datatype.Pack`` on ``MPI.COMM_SELF``): a NumPy array of
    ``msg.unit`` when the datatype is homogeneous, else of bytes."""
    ranges = _ranges(msg)[0]
    dt, comm = msg.datatype, MPI.COMM_SELF
    out = np.empty(sum(dt.Pack_size(n, comm) for _, n in ranges), np.uint8)
    out = out[:_pack_into(msg, out)]
    unit = msg.unit
    if unit is not None and out.size % unit.itemsize == 0:
        return out.view(unit)
    return out


def repack(msg, scratch) -> None:
    """:func:`pack` again into ``scratch``, what it returned for ``msg``
    (the caller's buffer may hold new values: a persistent request's
    every start)."""
    _pack_into(msg, scratch.reshape(-1).view(np.uint8))


def _pack_into(msg, out: np.ndarray) -> int:
    """Pack the message's elements into the bytes ``out``; how many."""
    base, (ranges, extent) = _host_base(msg, False), _ranges(msg)
    dt, comm = msg.datatype, MPI.COMM_SELF
    position = 0
    for offset, n in ranges:
        if n:
            data = MPI.buffer.fromaddress(base + offset, n * extent, True)
            position = dt.Pack(data, out, position, comm)
    return position


def unpack(msg, scratch) -> None:
    """Put :func:`pack`'s layout back: ``scratch``'s elements into the
    message's place in the caller's buffer (``Datatype.Unpack``)."""
    base, (ranges, extent) = _host_base(msg, True), _ranges(msg)
    dt, comm = msg.datatype, MPI.COMM_SELF
    data = np.ascontiguousarray(scratch).reshape(-1).view(np.uint8)
    position = 0
    for offset, n in ranges:
        if n:
            place = MPI.buffer.fromaddress(base + offset, n * extent, False)
            position = dt.Unpack(data, position, place, comm)
