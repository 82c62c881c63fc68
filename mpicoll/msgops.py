"""What is done with parsed messages (:mod:`mpicoll.message`).

The checks MPI makes of a collective's arguments, made before anything
moves and raising what MPI (through mpi4py) raises: an ``MPI.Exception``
with MPI's error class, or mpi4py's own ``ValueError`` for mismatched
reduction buffers; each is also an :class:`~mpicoll.errors.MpicollError`
naming the rank and the call. And the staging of derived datatypes for
hand-built algorithms: :func:`pack` into contiguous scratch, :func:`unpack`
back, both by MPI on ``MPI.COMM_SELF``.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from mpicoll import cuda
from mpicoll.schedule.plan import address as plan_address
from mpicoll.errors import (BufferSpecError, BufferSpecMPIError,
                            InvalidArgumentError, InvalidArgumentOverflowError,
                            InvalidArgumentTypeError, MPIOpTypeError,
                            RootError)

_PREDEFINED = {getattr(MPI, name).handle for name in dir(MPI)
               if isinstance(getattr(MPI, name), MPI.Datatype)}
_OPS: dict = {}  # (op handle, datatype handle) -> MPI error class, 0: defined
_OP_NAMES = {getattr(MPI, name).handle: f"MPI.{name}" for name in dir(MPI)
             if isinstance(getattr(MPI, name), MPI.Op)}


def check_root(root, size: int, *, where: dict) -> int:
    """``root`` as an int, as mpi4py converts it (``int()``, so 0.5 is 0),
    and in ``range(size)`` as MPI requires (``MPI.ERR_ROOT``)."""
    if not (hasattr(type(root), "__int__") or hasattr(type(root), "__index__")):
        raise InvalidArgumentTypeError("root: an integer is required", **where)
    try:
        value = int(root)
    except TypeError as exc:
        raise InvalidArgumentTypeError(f"root: {exc}", **where) from exc
    except OverflowError as exc:  # int(inf)
        raise InvalidArgumentOverflowError(f"root: {exc}", **where) from exc
    except ValueError as exc:  # int(nan)
        raise InvalidArgumentError(f"root: {exc}", **where) from exc
    if not -2**31 <= value < 2**31:
        raise InvalidArgumentOverflowError(
            "root: value too large to convert to int", **where)
    if not 0 <= value < size:
        raise RootError(f"invalid root {value}: not a rank of a "
                        f"communicator of size {size}",
                        error_class=MPI.ERR_ROOT, **where)
    return value


def check_op(op: MPI.Op, datatype: MPI.Datatype, *, where: dict) -> None:
    """Raise ``MPI.ERR_OP`` where MPI does not define a predefined ``op`` on
    ``datatype`` (MAX on complex, SUM on C_BOOL, REPLACE in a reduction):
    asks MPI through ``op.Reduce_local`` on one element of scratch, once
    per predefined pair. User-defined ops are not checked."""
    if not op.is_predefined:
        return
    key = (op.handle, datatype.handle)
    error = _OPS.get(key) if datatype.handle in _PREDEFINED else None
    if error is None:
        error = _try_op(op, datatype)
        if datatype.handle in _PREDEFINED:
            _OPS[key] = error
    if error:
        raise MPIOpTypeError(f"MPI does not define "
                             f"{_OP_NAMES.get(op.handle, op)} on "
                             f"{datatype.Get_name() or 'this datatype'}",
                             error_class=error, **where)


def _try_op(op, datatype) -> int:
    try:
        true_lb, true_extent = datatype.Get_true_extent()
        scratch = [np.zeros(max(true_extent, 1), np.uint8) for _ in range(2)]
        a, b = (MPI.buffer.fromaddress(s.ctypes.data - true_lb, 0)
                for s in scratch)
        op.Reduce_local([a, 1, datatype], [b, 1, datatype])
    except MPI.Exception as exc:
        return exc.Get_error_class()
    return 0


def check_reduction(send, recv, *,
                    where: dict) -> None:
    """mpi4py's ``chk_cro_args``: a reduction's send and receive buffers
    have the same datatype and count (``send`` None: in place)."""
    if send is None:
        return
    if send.datatype != recv.datatype:
        raise BufferSpecError("mismatch in send and receive MPI datatypes",
                              **where)
    if send.count != recv.count:
        raise BufferSpecError(f"mismatch in send count {send.count} and "
                              f"receive count {recv.count}", **where)


def check_reduce_scatter(send, recv, counts,
                         rank: int, *, where: dict) -> None:
    """mpi4py's checks of ``Reduce_scatter`` (``send`` None: in place)."""
    total = sum(counts)
    if send is None:
        if recv.count != total:
            raise BufferSpecError(f"mismatch in receive count {recv.count} "
                                  f"and sum(counts) {total}", **where)
        return
    if send.datatype != recv.datatype:
        raise BufferSpecError("mismatch in send and receive MPI datatypes",
                              **where)
    if send.count != total:
        raise BufferSpecError(f"mismatch in send count {send.count} and "
                              f"sum(counts) {total}", **where)
    if recv.count != counts[rank]:
        raise BufferSpecError(f"mismatch in receive count {recv.count} and "
                              f"counts[{rank}] {counts[rank]}", **where)


def address(msg) -> int | None:
    """Where ``msg``'s data starts (a vector message: its buffer)."""
    raw = msg.buffer
    if raw is None:
        return None
    offset = msg.offset if not hasattr(msg, "displs") else 0
    return offset + plan_address(raw)


def check_alias(send, recv, *, where: dict) -> None:
    """MPI's ``MPI.ERR_BUFFER`` when a collective is given the same
    address to send from and receive into (``MPI.IN_PLACE`` is the way)."""
    if send is None or recv is None:
        return
    count = send.count if not hasattr(send, "displs") else sum(send.counts)
    at = address(send) if count else None
    if at is not None and at == address(recv):
        raise BufferSpecMPIError("sendbuf and recvbuf are the same buffer "
                                 "(use MPI.IN_PLACE)",
                                 error_class=MPI.ERR_BUFFER, **where)


# -- staging derived datatypes ---------------------------------------------------

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
