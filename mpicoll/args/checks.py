"""The checks MPI makes of a collective's parsed arguments.

Made before anything moves (on messages from :mod:`mpicoll.args.message`)
and raising what MPI (through mpi4py) raises: an ``MPI.Exception`` with
MPI's error class, or mpi4py's own ``ValueError`` for mismatched
reduction buffers; each is also an :class:`~mpicoll.errors.MpicollError`
naming the rank and the call.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from mpicoll.device.memory import address as array_address
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


def _message_address(msg) -> int | None:
    """Where ``msg``'s data starts (a vector message: its buffer)."""
    raw = msg.buffer
    if raw is None:
        return None
    offset = msg.offset if not hasattr(msg, "displs") else 0
    return offset + array_address(raw)


def check_alias(send, recv, *, where: dict) -> None:
    """MPI's ``MPI.ERR_BUFFER`` when a collective is given the same
    address to send from and receive into (``MPI.IN_PLACE`` is the way)."""
    if send is None or recv is None:
        return
    count = send.count if not hasattr(send, "displs") else sum(send.counts)
    at = _message_address(send) if count else None
    if at is not None and at == _message_address(recv):
        raise BufferSpecMPIError("sendbuf and recvbuf are the same buffer "
                                 "(use MPI.IN_PLACE)",
                                 error_class=MPI.ERR_BUFFER, **where)
