"""Accepting every way a caller names an operation, with its MPI twin.

``as_op`` takes a name (``"sum"``), an :class:`~mpicoll.schedule.ops.Op`, a
predefined ``MPI.Op`` (``MPI.SUM``), a user ``MPI.Op`` made with
``MPI.Op.Create`` (its commute flag is honoured), or a plain callable
``f(a, b) -> a (op) b`` (taken as non-commutative). ``native_op`` gives the
``MPI.Op`` a native call needs, creating one for callables on first use.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI
from mpi4py.util import dtlib

from mpicoll.schedule.ops import BUILTIN_NAMES, Op, builtin_op
from mpicoll.device.memory import same_memory

_NATIVE = {name: getattr(MPI, name.upper()) for name in BUILTIN_NAMES}
_CONVERTED: dict[int, tuple[object, Op]] = {}  # id(op given) -> (op, Op)
CONVERTED = 64  # entries kept (a new callable per call must not pile up)


def as_op(op) -> Op:
    """The :class:`Op` for any accepted spelling of an operation.

    Raises ``ValueError`` for an unknown name and ``TypeError`` for anything
    else that is not an operation; callers wrap those with rank and call.
    """
    if isinstance(op, Op):
        return op
    if isinstance(op, str):
        found = builtin_op(op)
        if found is None:
            raise ValueError(f"unknown operation {op!r}; built-in ones are "
                             + ", ".join(BUILTIN_NAMES))
        return found
    if isinstance(op, MPI.Op):
        return _cached(op, lambda: _from_mpi(op))
    if callable(op):
        return _cached(op, lambda: Op.from_callable(op))
    raise TypeError(f"{op!r} is not an operation")


def _cached(key, make) -> Op:
    """Convert once per object, for the last :data:`CONVERTED` objects;
    holding ``key`` keeps its id from reuse while the entry lives."""
    hit = _CONVERTED.get(id(key))
    if hit is None or hit[0] is not key:
        if len(_CONVERTED) >= CONVERTED:
            _CONVERTED.clear()
        hit = _CONVERTED[id(key)] = (key, make())
    return hit[1]


def _from_mpi(op: MPI.Op) -> Op:
    for name, predefined in _NATIVE.items():  # MPI.Op is unhashable
        if op == predefined:
            return builtin_op(name)
    if op == MPI.OP_NULL or op in (MPI.MAXLOC, MPI.MINLOC, MPI.REPLACE,
                                   MPI.NO_OP):
        raise ValueError(f"operation {op} is not supported")
    return _from_user_mpi_op(op)


def _from_user_mpi_op(mpi_op: MPI.Op) -> Op:
    """Wrap a user ``MPI.Op``; ``Reduce_local(in, inout)`` computes
    ``inout = in (op) inout``, so ``dst = a (op) b`` lands in ``b``'s slot."""

    def apply(a, b, dst):
        if same_memory(dst, b):
            mpi_op.Reduce_local(a, dst)
        elif same_memory(dst, a):
            result = b.copy()
            mpi_op.Reduce_local(a, result)
            np.copyto(dst, result)
        else:
            np.copyto(dst, b)
            mpi_op.Reduce_local(a, dst)

    return Op("user MPI.Op", apply, commutative=bool(mpi_op.Is_commutative()),
              mpi_op=mpi_op, host_only=True)


def native_op(op: Op) -> MPI.Op:
    """The ``MPI.Op`` a native call passes: the predefined one, the user's
    ``MPI.Op``, or for a Python callable the one :func:`lent_op` lent it
    for this call."""
    if op.mpi_op is None:
        predefined = _NATIVE.get(op.name)
        if predefined is not None and builtin_op(op.name) is op:
            return predefined
        raise ValueError(f"{op.name!r} has no MPI.Op: lend it one")
    return op.mpi_op


def lent_op(op: Op | None) -> MPI.Op | None:
    """For a Python callable (no MPI twin): a new ``MPI.Op`` running it,
    set as ``op.mpi_op`` while the caller prepares one native call, which
    must ``Free`` it once the call is complete (mpi4py holds only a few
    dozen user ops at once, so none is kept per callable; ``auto`` runs
    callables hand-built). None for every other op."""
    if op is None or op.mpi_op is not None or op.ufunc is not None:
        return None
    op.mpi_op = MPI.Op.Create(_mpi_function(op), commute=op.commutative)
    return op.mpi_op


def _mpi_function(op: Op):
    def function(inbuf, inoutbuf, datatype):
        dtype = dtlib.to_numpy_dtype(datatype)
        a = np.frombuffer(inbuf, dtype=dtype)
        b = np.frombuffer(inoutbuf, dtype=dtype)
        op.apply(a, b, b)

    return function
