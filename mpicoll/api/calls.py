"""Argument checks and call records shared by both faces.

:class:`CallBuilder` is a mixin of :class:`mpicoll.Comm` (mpi4py's face)
and :class:`mpicoll.ProcessGroup` (torch.distributed's): it expects
``self._engine`` (:class:`~mpicoll.engine.engine.Engine`). Its checks turn a
local mistake into an error naming the rank and the call before any
message moves; its builders turn parsed flat views into one
:class:`~mpicoll.engine.engine.Call` per collective call and launch it, with the
MPI library's own call (``native``) prepared on the private duplicate.
"""

from __future__ import annotations

from functools import partial

import numpy as np
from mpi4py import MPI

from mpicoll.device.cuda import copyto, empty_like, location
from mpicoll.engine.engine import Call
from mpicoll.engine.work import then
from mpicoll.errors import (
    BufferSpecError,
    InvalidArgumentTypeError,
)
from mpicoll.args.checks import check_alias, check_op, check_reduction
from mpicoll.args.datatypes import pack, repack, unpack
from mpicoll.args.mpi_ops import as_op, native_op

IN_PLACE = MPI.IN_PLACE


class CallBuilder:
    """Checks and call records (a mixin; see the module docstring)."""

    # ---------------------------------------------------------- checks

    def _where(self, collective) -> dict:
        return self._engine.where(collective)

    def _same_type(self, send: np.ndarray, recv: np.ndarray,
                   collective) -> None:
        if send.dtype != recv.dtype:
            raise BufferSpecError(
                f"send dtype {send.dtype} differs from receive dtype "
                f"{recv.dtype}", **self._where(collective))
        self._same_memory(send, recv, collective)

    def _same_memory(self, send, recv, collective) -> None:
        if (type(send) is not np.ndarray or type(recv) is not np.ndarray) \
                and location(send) != location(recv):
            raise BufferSpecError(
                f"send buffer is {_memory(send)} but receive buffer is "
                f"{_memory(recv)}; both must be in the same memory",
                **self._where(collective))

    # --------------------------------------- mpi4py's buffer face: parsing

    def _mpi_op(self, op, where) -> tuple:
        """``(Op, why_native)`` of an ``MPI.Op`` argument (anything else is
        mpi4py's ``TypeError``): an op hand-built algorithms cannot apply
        (MAXLOC, MINLOC, REPLACE, NO_OP) gives ``(None, why)``."""
        if not isinstance(op, MPI.Op):
            raise InvalidArgumentTypeError(
                f"Argument 'op' has incorrect type (expected mpi4py.MPI.Op, "
                f"got {type(op).__name__})", **where)
        try:
            return as_op(op), None
        except ValueError:
            return None, f"{op} has no hand-built implementation"

    def _reduction(self, op, send, recv, where) -> None:
        """mpi4py's and MPI's checks of a reduction's buffers and op."""
        check_reduction(send, recv, where=where)
        check_alias(send, recv, where=where)
        check_op(op, recv.datatype, where=where)

    def _staged(self, where, send, recv, *, reducing: bool,
                read_recv: bool = False):
        """``(send view, recv view, unstage, restage, why_native)`` of
        parsed messages (None: absent). Basic datatypes give the messages'
        own views; a derived datatype is packed (MPI ``Pack``) into
        scratch of its basic type (bytes when mixed) for hand-built
        algorithms, ``unstage`` unpacks the result into the caller's
        buffer and ``restage`` packs the input again (the call's
        ``stage``: a persistent request's every start); a reduction over
        mixed basic types runs natively only. Both views must be in the
        same memory (host, or one device)."""
        unstage = restage = why = None
        sv = None
        if send is not None:
            sv = pack(send) if send.derived else send.array
            if send.derived:
                restage = partial(repack, send, sv)
        rv = None
        if recv is not None:
            if recv.derived:
                rv = pack(recv) if read_recv else \
                    np.empty_like(pack(recv))
                unstage = partial(unpack, recv, rv)
                if read_recv:
                    restage = then(restage, partial(repack, recv, rv))
            else:
                rv = recv.array
        if sv is not None and rv is not None:
            self._same_memory(sv, rv, where["collective"])
        if reducing and any(m is not None and m.derived and m.unit is None
                            for m in (send, recv)):
            why = "a reduction over a derived datatype of mixed types"
        elif sv is not None and rv is not None and sv.dtype != rv.dtype:
            sv, rv = _bytes(sv), _bytes(rv)
        return sv, rv, unstage, restage, why

    # ---------------------------------------------------- call records
    #
    # Each builder launches one collective on parsed flat views. ``extra``
    # goes into the Call as is: ``given`` (the caller's own mpi4py call, made
    # instead of one on the views when the call runs natively on the host),
    # ``why_native`` and ``unstage`` (see mpicoll.engine.engine.Call).

    def _allreduce(self, send, recv, op, algorithm, owners, async_op,
                   memo=None, **extra):
        engine = self._engine

        def native(nonblocking, send, recv):
            return engine.prepared("Allreduce", nonblocking,
                                   IN_PLACE if send is recv else send, recv,
                                   native_op(op))

        return engine.launch(Call("allreduce", algorithm, send, recv,
                                  recv.size, op, 0, native, owners, None,
                                  memo, **extra), async_op)

    def _reduce(self, send, recv, op, root, algorithm, owners, async_op,
                memo=None, **extra):
        engine = self._engine

        def native(nonblocking, send, recv):
            at_root = engine.rank == root
            return engine.prepared("Reduce", nonblocking,
                                   IN_PLACE if send is recv else send,
                                   recv if at_root else None, native_op(op),
                                   root)

        return engine.launch(Call("reduce", algorithm, send, recv, send.size,
                                  op, root, native, owners, None, memo,
                                  **extra), async_op)

    def _bcast(self, data, root, algorithm, owners, async_op, memo=None,
               **extra):
        engine = self._engine

        def native(nonblocking, send, recv):
            return engine.prepared("Bcast", nonblocking, recv, root)

        return engine.launch(Call("bcast", algorithm, data[:0], data,
                                  data.size, None, root, native, owners, None,
                                  memo, **extra), async_op)

    def _gathering(self, c, send, recv, count, root, algorithm, owners,
                   async_op, *, inplace, memo=None, finish=None, **extra):
        """Launch allgather, gather or allgatherv (``count``: the per-rank
        tuple) on parsed buffers."""
        engine = self._engine

        def native(nonblocking, send, recv):
            s = IN_PLACE if inplace else send
            if c == "allgather":
                return engine.prepared("Allgather", nonblocking, s, recv)
            if c == "allgatherv":
                return engine.prepared("Allgatherv", nonblocking, s,
                                       [recv, list(count)])
            r = recv if engine.rank == root else None
            return engine.prepared("Gather", nonblocking, s, r, root)

        return engine.launch(Call(c, algorithm, send, recv, count, None, root,
                                  native, owners, finish, memo, **extra,
                                  inplace=inplace), async_op)

    def _alltoallv(self, send, recv, scounts, rcounts, algorithm, owners,
                   async_op, finish=None, **extra):
        c = "alltoallv"
        engine = self._engine
        size = engine.size
        rows, _, agreement = engine.agree(c, (tuple(scounts),
                                              tuple(rcounts)))
        matrix = tuple(tuple(sc) for sc, _ in rows)
        engine.disagree(c, [
            f"rank {i} sends {matrix[i][j]} to rank {j}, which expects "
            f"{rows[j][1][i]}" for i in range(size) for j in range(size)
            if matrix[i][j] != rows[j][1][i]])
        send = send[:sum(scounts)]

        def native(nonblocking, send, recv):
            return engine.prepared("Alltoallv", nonblocking,
                                   [send, list(scounts)],
                                   [recv, list(rcounts)])

        return engine.launch(Call(c, algorithm, send, recv, matrix, None, 0,
                                  native, owners, finish, **extra,
                                  agreement=agreement), async_op)

    def _scan(self, c, send, recv, op, algorithm, owners, async_op,
              memo=None, **extra):
        engine = self._engine
        name = "Scan" if c == "scan" else "Exscan"

        def native(nonblocking, send, recv):
            return engine.prepared(name, nonblocking,
                                   IN_PLACE if send is recv else send, recv,
                                   native_op(op))

        return engine.launch(Call(c, algorithm, send, recv, recv.size, op, 0,
                                  native, owners, None, memo, **extra),
                             async_op)

    def _reduce_scatter(self, c, send, recv, count, counts, op, algorithm,
                        owners, async_op, memo=None, *, inplace=False,
                        **extra):
        """Both reduce-scatters on parsed views; ``count`` keys the
        schedule (an int for _block, the counts tuple otherwise). In place
        (``send`` is the input, the front of the receive buffer), the
        result is staged, then copied to the front."""
        engine = self._engine
        if inplace:
            into = send[:counts[engine.rank]]
            recv = empty_like(send, counts[engine.rank])
            owners = (*owners, recv)
            extra["unstage"] = then(partial(copyto, into, recv),
                                    extra.get("unstage"))

        def native(nonblocking, send, recv):
            if c == "reduce_scatter_block":
                return engine.prepared("Reduce_scatter_block", nonblocking,
                                       send, recv, native_op(op))
            return engine.prepared("Reduce_scatter", nonblocking, send, recv,
                                   list(counts), native_op(op))

        return engine.launch(Call(c, algorithm, send, recv, count, op, 0,
                                  native, owners, None, memo, **extra,
                                  inplace=inplace), async_op)

    def _barrier(self, algorithm, async_op, memo=None):
        engine = self._engine
        empty = np.empty(0, np.uint8)

        def native(nonblocking, send, recv):
            return engine.prepared("Barrier", nonblocking)

        return engine.launch(Call("barrier", algorithm, empty, empty, 0,
                                  None, 0, native, (), None, memo), async_op)


def owners_of(*specs) -> tuple:
    """The caller's buffer objects behind buffer specifications."""
    return tuple([s[0] if type(s) in (list, tuple) else s for s in specs])


def _bytes(view):
    """A flat view as bytes (a derived and a basic datatype, or two
    derived ones, meet as the bytes MPI moves)."""
    return view.view(np.uint8) if view.size else view[:0].view(np.uint8)


def _memory(x) -> str:
    where = location(x)
    return "host memory" if where is None else f"on CUDA device {where[1]}"
