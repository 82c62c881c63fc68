"""``mpicoll.Comm``: an mpi4py communicator with a choice of algorithms.

Two faces over one engine:

- **The buffer face** keeps mpi4py's names, signatures and buffer
  specifications (``Allreduce(sendbuf, recvbuf, op)``, ``MPI.IN_PLACE``,
  ``[buf, MPI.DOUBLE]``) and adds a keyword ``algorithm=``, so an mpi4py code
  switches by wrapping its communicator. Attributes mpicoll does not define
  fall through to the wrapped communicator.
- **The array face** is torch.distributed's: ``all_reduce(x, op="sum",
  algorithm="auto", async_op=False)`` and friends work in place on arrays
  and return a :class:`~mpicoll.work.Work` when ``async_op=True``.

Every call validates its local arguments (buffers, counts, root, op and
type, algorithm and its constraints) before any message moves, then runs
either the MPI library's own call (``algorithm="native"``) or a hand-built
schedule on the library's private duplicate of the communicator.
"""

from __future__ import annotations

import logging
import sys
from functools import partial

import numpy as np
from mpi4py import MPI

from mpicoll import progress
from mpicoll.buffers import as_buffer, vector_buffer
from mpicoll.coll.registry import REDUCING
from mpicoll.context import context_of, forget
from mpicoll.cuda import (
    copyto,
    cuda_aware,
    empty_like,
    placement,
    runtime_of,
)
from mpicoll.devicecall import (
    DeviceTarget,
    caller_ready,
    hold_until,
    native_steps,
    order_caller,
)
from mpicoll.errors import BufferSpecError, InvalidArgumentError, OpTypeError
from mpicoll.mpi_ops import as_op, native_op
from mpicoll.ops import Op
from mpicoll.groups import Groups
from mpicoll.p2p import PointToPoint
from mpicoll.schedule.executor import Execution, run
from mpicoll.schedule.layout import inplace_recv, inplace_send
from mpicoll.schedule.plan import overlap, same_memory
from mpicoll.select import (
    Choice,
    choose,
    environment_explain,
    environment_overrides,
    environment_rules,
)
from mpicoll.work import Work

IN_PLACE = MPI.IN_PLACE
REPLAYS = 32  # blocking calls remembered per Comm for replay

log = logging.getLogger("mpicoll")
_explain_all: bool | None = None  # set_explain(); None: each Comm's env


def _log_to_stderr() -> None:
    """Make explain lines visible: a stderr handler on the ``mpicoll``
    logger at INFO, unless the application configured one."""
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
    if log.level == logging.NOTSET or log.level > logging.INFO:
        log.setLevel(logging.INFO)


def set_explain(on: bool | None = True) -> None:
    """Explain mode for every ``Comm`` in this process: each new choice
    (per collective, requested algorithm, message size and commutativity)
    is logged once at INFO on the ``mpicoll`` logger (stderr by default).
    ``None`` goes back to each Comm's ``MPICOLL_EXPLAIN`` setting."""
    global _explain_all
    _explain_all = None if on is None else bool(on)
    if on:
        _log_to_stderr()


class Comm(PointToPoint, Groups):
    """Wrap ``comm`` (default ``MPI.COMM_WORLD``); collective on ``comm``.

    ``MPICOLL_<COLLECTIVE>_ALGORITHM``, ``MPICOLL_RULES`` and
    ``MPICOLL_EXPLAIN`` environment settings are read here, once.
    """

    def __init__(self, comm: MPI.Comm | None = None) -> None:
        if comm is None:
            comm = MPI.COMM_WORLD
        elif isinstance(comm, Comm):
            comm = comm.mpi
        if not isinstance(comm, MPI.Intracomm):
            raise TypeError(f"mpicoll.Comm wraps an MPI.Intracomm, "
                            f"got {type(comm).__name__}")
        self.mpi = comm  # the caller's communicator, untouched
        self._ctx = context_of(comm)
        self.rank = self._ctx.rank
        self.size = self._ctx.size
        self._overrides = environment_overrides()
        self._rules = environment_rules()
        self._explain = environment_explain()
        if self._explain:
            _log_to_stderr()
        self._choices: dict[tuple, Choice] = {}
        # (collective, algorithm, bytes, dtype, op) -> Algorithm, for calls
        # whose op/type pair and choice were already checked.
        self._checked: dict[tuple, object] = {}
        # key -> (objects, dtypes, runner, finish): see _replayed.
        self._replays: dict[tuple, tuple] = {}
        # "node", "leaders" -> Comm | None: see the groups block below.
        self._subcomms: dict[str, Comm | None] = {}

    def __getattr__(self, name):
        return getattr(self.mpi, name)

    def __repr__(self) -> str:
        return f"<mpicoll.Comm rank {self.rank} of {self.size}>"

    def free(self) -> None:
        """Free the library's private duplicate (collective)."""
        self._replays.clear()
        forget(self.mpi)

    # ------------------------------------------------------------ selection

    def explain(self, collective: str, *, count: int = 1, dtype="float64",
                op="sum", algorithm: str = "auto") -> Choice:
        """Which algorithm a call with these arguments runs, and why."""
        op = as_op(op) if collective in REDUCING else None
        nbytes = count * np.dtype(dtype).itemsize
        return self._choose(collective, algorithm, nbytes, op,
                            {"rank": self.rank, "collective": collective})

    def _choose(self, collective, algorithm, nbytes, op, where) -> Choice:
        commutative = op is None or op.commutative
        key = (collective, algorithm, nbytes, commutative)
        choice = self._choices.get(key)
        if choice is None:
            choice = self._choices[key] = choose(
                collective, algorithm, size=self.size, nbytes=nbytes,
                commutative=commutative, overrides=self._overrides,
                where=where, rules=self._rules)
            if _explain_all or (_explain_all is None and self._explain):
                log.info("[rank %d] %s %d B: %s (%s)", self.rank, collective,
                         nbytes, choice.algorithm.name, choice.reason)
        return choice

    # ------------------------------------------------------------- engine

    def _launch(self, collective, algorithm, *, send, recv, count, op,
                root, native, owners, async_op, finish=None, memo=None):
        """Choose, then run natively or by schedule; blocking or a Work.

        ``native(nonblocking)`` prepares the MPI library's call (made here;
        it returns a request when nonblocking, and a blocking one is what
        a replay makes again); ``owners`` are the caller's objects behind
        ``send``/``recv`` (plan cache key, kept alive while in flight);
        ``finish`` runs once the result is in ``recv``; ``memo`` is the
        ``(key, objects)`` under which a blocking call is kept for replay.
        """
        nbytes = recv.nbytes if collective == "bcast" else send.nbytes
        key = (collective, algorithm, nbytes, send.dtype.char, op)
        alg = self._checked.get(key)
        if alg is None:  # first call of its kind: check and choose
            where = self._where(collective)
            if op is not None and not op.supports(send.dtype):
                raise OpTypeError(f"operation {op.name!r} is not defined "
                                  f"for dtype {send.dtype}", **where)
            alg = self._choose(collective, algorithm, nbytes, op,
                               where).algorithm
            self._checked[key] = alg
        if async_op:
            where = {**self._where(collective), "algorithm": alg.name}
        on_device = None if type(recv) is np.ndarray else placement(recv)
        if on_device is not None:
            return self._launch_device(
                collective, alg, on_device, send=send, recv=recv,
                count=count, op=op, root=root, native=native, owners=owners,
                async_op=async_op, finish=finish)
        if alg.native:
            call = native(async_op, send, recv)
            if async_op:
                return Work(where=where, request=call(), finish=finish,
                            keep=owners)
            call()
            if memo is not None:
                self._remember(memo, call, finish)
        else:
            plan = self._ctx.plan(alg, count, root, op, send, recv, owners)
            tag = self._ctx.next_tag()
            if async_op:
                plan.busy = True

                def release():
                    plan.busy = False
                    if finish is not None:
                        finish()

                execution = Execution(plan.steps, self._ctx.comm, tag)
                work = Work(where=where, finish=release, keep=owners,
                            execution=execution)
                progress.submit(execution)
                return work
            run(plan.steps, self._ctx.comm, tag)
            if memo is not None:
                self._remember(memo, partial(self._run_steps, plan.steps),
                               finish)
        if finish is not None:
            finish()
        return None

    def _launch_device(self, collective, alg, on_device, *, send, recv,
                       count, op, root, native, owners, async_op, finish):
        """``_launch`` for device arrays, by the rules of
        :mod:`mpicoll.devicecall`. Not replayed: each call records its
        events."""
        where = {**self._where(collective), "algorithm": alg.name}
        if op is not None and op.ufunc is None and (
                alg.native or op.host_only):
            raise OpTypeError(
                f"operation {op.name!r} on device arrays: only built-in "
                f"operations run natively, and a user MPI.Op only on host "
                f"memory; pass a Python callable (it is given CuPy arrays) "
                f"with a hand-built algorithm, e.g. "
                f"algorithm='recursive_doubling'", **where)
        runtime, device = on_device
        target = DeviceTarget(runtime, device,
                              self._ctx.stream(runtime, device),
                              not cuda_aware())
        ready = caller_ready(target)
        plan = None
        if alg.native:
            (steps, end), held = native_steps(target, collective, native,
                                              send, recv, ready)
        else:
            plan = self._ctx.plan(alg, count, root, op, send, recv, owners,
                                  target)
            steps, end, held = plan.steps, plan.end, (plan,)
        tag = self._ctx.next_tag()
        keep = (*owners, *held)
        if async_op:
            if plan is not None:
                plan.busy = True

            def release():
                if plan is not None:
                    plan.busy = False
                if finish is not None:
                    finish()

            execution = Execution(steps, self._ctx.comm, tag)
            work = Work(where=where, execution=execution, finish=release,
                        keep=keep, device=(target, end))
            progress.submit(execution)
            return work
        run(steps, self._ctx.comm, tag)
        order_caller(target, end)
        hold_until(end, keep)
        if finish is not None:
            finish()
        return None

    # ------------------------------------------------------------- replay

    def _prepared(self, name: str, nonblocking: bool, *args) -> partial:
        """The private communicator's call ``name`` (or its ``I`` twin) with
        ``args`` bound, not yet made: a replayed call makes it directly."""
        if nonblocking:
            name = "I" + name[0].lower() + name[1:]
        return partial(getattr(self._ctx.comm, name), *args)

    def _run_steps(self, steps) -> None:
        run(steps, self._ctx.comm, self._ctx.next_tag())

    def _replayed(self, key, objects) -> bool:
        """Run a blocking call again if this exact call on these very
        objects was checked before; False if it must take the full path.

        ``key`` holds the objects' ids and the entry holds the objects, so
        while the entry lives no other object can have those ids: a hit is
        this very call on these very objects. What can still change is an
        array's dtype (reassignable in place; its size and memory cannot
        change while the plan's views exist), so that is checked. A hit
        costs a dict lookup and a dtype comparison per array instead of
        parsing buffer specifications and choosing again.
        """
        entry = self._replays.get(key)
        if entry is None:
            return False
        arrays, dtypes, runner, finish, _held = entry
        for array, dtype in zip(arrays, dtypes):
            if array.dtype is not dtype:
                return False
        runner()
        if finish is not None:
            finish()
        return True

    def _remember(self, memo, runner, finish) -> None:
        key, objects = memo
        if len(self._replays) >= REPLAYS:
            self._replays.clear()
        arrays = tuple(o for o in objects if hasattr(o, "dtype"))
        # The entry holds ``objects`` so that the ids in ``key`` cannot be
        # reused while it exists.
        self._replays[key] = (arrays, tuple(a.dtype for a in arrays), runner,
                              finish, objects)

    # ----------------------------------------------------- argument parsing

    def _where(self, collective) -> dict:
        return {"rank": self.rank, "collective": collective}

    def _buffer(self, spec, collective, what, writable=False) -> np.ndarray:
        return as_buffer(spec, what=what, writable=writable,
                         where=self._where(collective))

    def _array(self, x, collective, what, writable=True) -> np.ndarray:
        """Array-face argument ``x`` as a flat view of its memory."""
        if not isinstance(x, np.ndarray) and runtime_of(x) is None:
            raise BufferSpecError(f"{what} must be a NumPy or CuPy array, "
                                  f"got {type(x).__name__}",
                                  **self._where(collective))
        return self._buffer(x, collective, what, writable)

    def _op(self, op, collective) -> Op:
        try:
            return as_op(op)
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(str(exc),
                                       **self._where(collective)) from None

    def _root(self, root, collective) -> int:
        if not isinstance(root, (int, np.integer)) or not \
                0 <= root < self.size:
            raise InvalidArgumentError(
                f"root {root!r} is not a rank of this communicator "
                f"(size {self.size})", **self._where(collective))
        return int(root)

    def _need(self, buf: np.ndarray, n: int, collective, what) -> np.ndarray:
        """The first ``n`` elements of ``buf`` (``buf`` itself if that is
        all of it), or a clear error."""
        if buf.size < n:
            raise BufferSpecError(f"{what} holds {buf.size} elements, "
                                  f"needs {n}", **self._where(collective))
        return buf if buf.size == n else buf[:n]

    def _vectors(self, sendbuf, recvbuf, collective):
        """``(send, recv)`` of equal length for an allreduce-style call;
        the very same view twice for ``MPI.IN_PLACE``."""
        rbuf = self._buffer(recvbuf, collective, "recvbuf", writable=True)
        if sendbuf is IN_PLACE:
            return rbuf, rbuf
        send = self._buffer(sendbuf, collective, "sendbuf")
        self._same_type(send, rbuf, collective)
        recv = self._need(rbuf, send.size, collective, "recvbuf")
        if overlap(send, recv):
            raise BufferSpecError("sendbuf and recvbuf overlap; pass "
                                  "MPI.IN_PLACE as sendbuf for an in-place "
                                  "call", **self._where(collective))
        return send, recv

    def _same_type(self, send: np.ndarray, recv: np.ndarray,
                   collective) -> None:
        if send.dtype != recv.dtype:
            raise BufferSpecError(
                f"send dtype {send.dtype} differs from receive dtype "
                f"{recv.dtype}", **self._where(collective))
        self._same_memory(send, recv, collective)

    def _same_memory(self, send, recv, collective) -> None:
        if (type(send) is not np.ndarray or type(recv) is not np.ndarray) \
                and placement(send) != placement(recv):
            raise BufferSpecError(
                f"send buffer is {_memory(send)} but receive buffer is "
                f"{_memory(recv)}; both must be in the same memory",
                **self._where(collective))

    # ---------------------------------------------------- buffer face (MPI)
    #
    # Each collective X has one parser, _call_x(..., async_op, memo), which
    # checks the arguments and launches; X (blocking, replayed when it
    # repeats) and IX (nonblocking, returns a Work) both call it. X builds
    # its replay key inline, on purpose: a repeated call then costs one
    # tuple and one dict lookup before the MPI call, with no helper call.

    def Allreduce(self, sendbuf, recvbuf, op=MPI.SUM, *, algorithm="auto"):
        memo = (("Allreduce", algorithm, id(sendbuf), id(recvbuf), id(op)),
                (sendbuf, recvbuf, op))
        if not self._replayed(*memo):
            self._call_allreduce(sendbuf, recvbuf, op, algorithm, False, memo)

    def Iallreduce(self, sendbuf, recvbuf, op=MPI.SUM, *,
                   algorithm="auto") -> Work:
        return self._call_allreduce(sendbuf, recvbuf, op, algorithm, True)

    def _call_allreduce(self, sendbuf, recvbuf, op, algorithm, async_op,
                        memo=None):
        c = "allreduce"
        op = self._op(op, c)
        send, recv = self._vectors(sendbuf, recvbuf, c)
        return self._allreduce(send, recv, op, algorithm,
                               _owners(sendbuf, recvbuf), async_op, memo)

    def _allreduce(self, send, recv, op, algorithm, owners, async_op,
                   memo=None):
        def native(nonblocking, send, recv):
            return self._prepared("Allreduce", nonblocking,
                IN_PLACE if send is recv else send, recv, native_op(op))

        return self._launch("allreduce", algorithm, send=send, recv=recv,
                            count=recv.size, op=op, root=0, native=native,
                            owners=owners, async_op=async_op, memo=memo)

    def Reduce(self, sendbuf, recvbuf, op=MPI.SUM, root=0, *,
               algorithm="auto"):
        memo = (("Reduce", algorithm, id(sendbuf), id(recvbuf), id(op),
                 id(root)), (sendbuf, recvbuf, op, root))
        if not self._replayed(*memo):
            self._call_reduce(sendbuf, recvbuf, op, root, algorithm, False,
                              memo)

    def Ireduce(self, sendbuf, recvbuf, op=MPI.SUM, root=0, *,
                algorithm="auto") -> Work:
        return self._call_reduce(sendbuf, recvbuf, op, root, algorithm, True)

    def _call_reduce(self, sendbuf, recvbuf, op, root, algorithm, async_op,
                     memo=None):
        c = "reduce"
        op = self._op(op, c)
        root = self._root(root, c)
        if self.rank != root:
            self._not_in_place(sendbuf, c, "sendbuf")
            send = self._buffer(sendbuf, c, "sendbuf")
            recv, owners = send[:0], _owners(sendbuf)
        else:
            send, recv = self._vectors(sendbuf, recvbuf, c)
            owners = _owners(sendbuf, recvbuf)
        return self._reduce(send, recv, op, root, algorithm, owners,
                            async_op, memo)

    def _reduce(self, send, recv, op, root, algorithm, owners, async_op,
                memo=None):
        def native(nonblocking, send, recv):
            return self._prepared("Reduce", nonblocking,
                IN_PLACE if send is recv else send,
                recv if self.rank == root else None, native_op(op), root)

        return self._launch("reduce", algorithm, send=send, recv=recv,
                            count=send.size, op=op, root=root, native=native,
                            owners=owners, async_op=async_op, memo=memo)

    def Bcast(self, buf, root=0, *, algorithm="auto"):
        memo = (("Bcast", algorithm, id(buf), id(root)), (buf, root))
        if not self._replayed(*memo):
            self._call_bcast(buf, root, algorithm, False, memo)

    def Ibcast(self, buf, root=0, *, algorithm="auto") -> Work:
        return self._call_bcast(buf, root, algorithm, True)

    def _call_bcast(self, buf, root, algorithm, async_op, memo=None):
        c = "bcast"
        root = self._root(root, c)
        data = self._buffer(buf, c, "buf", writable=True)
        return self._bcast(data, root, algorithm, _owners(buf), async_op,
                           memo)

    def _bcast(self, data, root, algorithm, owners, async_op, memo=None):
        def native(nonblocking, send, recv):
            return self._prepared("Bcast", nonblocking, recv, root)

        return self._launch("bcast", algorithm, send=data[:0], recv=data,
                            count=data.size, op=None, root=root,
                            native=native, owners=owners, async_op=async_op,
                            memo=memo)

    def Allgather(self, sendbuf, recvbuf, *, algorithm="auto"):
        memo = (("Allgather", algorithm, id(sendbuf), id(recvbuf)),
                (sendbuf, recvbuf))
        if not self._replayed(*memo):
            self._call_allgather(sendbuf, recvbuf, algorithm, False, memo)

    def Iallgather(self, sendbuf, recvbuf, *, algorithm="auto") -> Work:
        return self._call_allgather(sendbuf, recvbuf, algorithm, True)

    def _call_allgather(self, sendbuf, recvbuf, algorithm, async_op,
                        memo=None):
        c = "allgather"
        send, recv, count = self._blocks_in(sendbuf, recvbuf, c)
        return self._gathering(c, send, recv, count, 0, algorithm,
                               _owners(sendbuf, recvbuf), async_op,
                               inplace=sendbuf is IN_PLACE, memo=memo)

    def Gather(self, sendbuf, recvbuf, root=0, *, algorithm="auto"):
        memo = (("Gather", algorithm, id(sendbuf), id(recvbuf), id(root)),
                (sendbuf, recvbuf, root))
        if not self._replayed(*memo):
            self._call_gather(sendbuf, recvbuf, root, algorithm, False, memo)

    def Igather(self, sendbuf, recvbuf, root=0, *, algorithm="auto") -> Work:
        return self._call_gather(sendbuf, recvbuf, root, algorithm, True)

    def _call_gather(self, sendbuf, recvbuf, root, algorithm, async_op,
                     memo=None):
        c = "gather"
        root = self._root(root, c)
        if self.rank == root:
            send, recv, count = self._blocks_in(sendbuf, recvbuf, c)
            owners = _owners(sendbuf, recvbuf)
        else:
            self._not_in_place(sendbuf, c, "sendbuf")
            send = self._buffer(sendbuf, c, "sendbuf")
            recv, count, owners = send[:0], send.size, _owners(sendbuf)
        return self._gathering(c, send, recv, count, root, algorithm, owners,
                               async_op, inplace=sendbuf is IN_PLACE,
                               memo=memo)

    def _blocks_in(self, sendbuf, recvbuf, collective):
        """``(send, recv, count)`` for a call whose ``recvbuf`` holds one
        block of ``count`` per rank; in place, ``send`` is recv's own."""
        rbuf = self._buffer(recvbuf, collective, "recvbuf", writable=True)
        if sendbuf is IN_PLACE:
            count = rbuf.size // self.size
        else:
            send = self._buffer(sendbuf, collective, "sendbuf")
            self._same_type(send, rbuf, collective)
            count = send.size
        recv = self._need(rbuf, count * self.size, collective, "recvbuf")
        if sendbuf is IN_PLACE:
            send = inplace_send(collective, recv, self.rank, self.size, count)
        return send, recv, count

    def _gathering(self, c, send, recv, count, root, algorithm, owners,
                   async_op, *, inplace, memo=None, finish=None):
        """Launch allgather, gather or allgatherv (``count``: the per-rank
        tuple) on parsed buffers."""
        def native(nonblocking, send, recv):
            s = IN_PLACE if inplace else send
            if c == "allgather":
                return self._prepared("Allgather", nonblocking, s, recv)
            if c == "allgatherv":
                return self._prepared("Allgatherv", nonblocking,
                    s, [recv, list(count)])
            r = recv if self.rank == root else None
            return self._prepared("Gather", nonblocking, s, r, root)

        return self._launch(c, algorithm, send=send, recv=recv, count=count,
                            op=None, root=root, native=native, owners=owners,
                            async_op=async_op, memo=memo, finish=finish)

    def Allgatherv(self, sendbuf, recvbuf, *, algorithm="auto"):
        memo = (("Allgatherv", algorithm, id(sendbuf), id(recvbuf)),
                (sendbuf, recvbuf))
        if not self._replayed(*memo):
            self._call_allgatherv(sendbuf, recvbuf, algorithm, False, memo)

    def Iallgatherv(self, sendbuf, recvbuf, *, algorithm="auto") -> Work:
        return self._call_allgatherv(sendbuf, recvbuf, algorithm, True)

    def _call_allgatherv(self, sendbuf, recvbuf, algorithm, async_op,
                         memo=None):
        """``recvbuf`` is ``[buf, counts]``, ``[buf, counts, TYPE]``,
        ``[buf, (counts, displs), TYPE]`` or ``[buf, counts, displs, TYPE]``
        as in mpi4py. Unpacked displacements are staged through a packed
        copy (:class:`~mpicoll.buffers.VectorBuffer`), and such calls are
        not replayed."""
        c = "allgatherv"
        v, rspec = self._vector(recvbuf, c, "recvbuf", receiving=True)
        counts, recv = v.counts, v.array
        if v.staged:
            memo = None
        if sendbuf is IN_PLACE:
            send = inplace_send(c, recv, self.rank, self.size, counts)
            v.pack([self.rank])
        else:
            send = self._buffer(sendbuf, c, "sendbuf")
            self._same_type(send, recv, c)
            if send.size != counts[self.rank]:
                raise BufferSpecError(
                    f"sendbuf holds {send.size} elements, recvcounts says "
                    f"{counts[self.rank]}", **self._where(c))
        return self._gathering(c, send, recv, counts, 0, algorithm,
                               (*_owners(sendbuf, rspec), recv), async_op,
                               inplace=sendbuf is IN_PLACE, memo=memo,
                               finish=v.unpack if v.staged else None)

    def _vector_spec(self, spec, collective, what):
        """``(buffer spec, counts, displs or None)`` from an mpi4py vector
        specification."""
        where = self._where(collective)
        if not isinstance(spec, (list, tuple)) or len(spec) < 2:
            raise BufferSpecError(f"{what} must be [buf, counts(, displs)"
                                  "(, TYPE)]", **where)
        buf, *rest = spec
        dtype = [rest.pop()] if isinstance(rest[-1], MPI.Datatype) else []
        if len(rest) == 1 and isinstance(rest[0], tuple) and \
                len(rest[0]) == 2 and not np.isscalar(rest[0][0]):
            rest = list(rest[0])  # (counts, displs)
        counts = tuple(int(n) for n in rest[0])
        if len(counts) != self.size or min(counts, default=0) < 0:
            raise InvalidArgumentError(
                f"counts must hold {self.size} non-negative counts, got "
                f"{list(rest[0])}", **where)
        displs = rest[1] if len(rest) == 2 else None
        return [buf, *dtype], counts, displs

    def _vector(self, spec, collective, what, *, receiving):
        """``(VectorBuffer, buffer spec)`` of a vector specification."""
        buf_spec, counts, displs = self._vector_spec(spec, collective, what)
        flat = self._buffer(buf_spec, collective, what, writable=receiving)
        return vector_buffer(flat, counts, displs, receiving=receiving,
                             what=what, where=self._where(collective)), \
            buf_spec

    def _agree(self, mine, theirs_from=None, root=0):
        """Every rank's ``mine`` and, from ``root``, ``theirs_from``: one
        small allgather, so that all ranks see the same counts and reach
        the same verdict on them (a count error raised on one rank alone
        would leave the others waiting in the collective)."""
        rows = self._ctx.comm.allgather((mine, theirs_from))
        return [m for m, _ in rows], rows[root][1]

    def _disagree(self, collective, bad) -> None:
        if bad:
            raise InvalidArgumentError(
                "counts disagree between ranks: " + "; ".join(bad),
                **self._where(collective))

    def Gatherv(self, sendbuf, recvbuf, root=0, *, algorithm="auto"):
        self._call_gatherv(sendbuf, recvbuf, root, algorithm, False)

    def Igatherv(self, sendbuf, recvbuf, root=0, *,
                 algorithm="auto") -> Work:
        return self._call_gatherv(sendbuf, recvbuf, root, algorithm, True)

    def _call_gatherv(self, sendbuf, recvbuf, root, algorithm, async_op):
        """Gather blocks of per-rank sizes into the root's ``recvbuf``, a
        vector specification (unpacked displacements are staged, as in
        :meth:`Allgatherv`). Every call checks,
        in one small allgather, that each rank sends what the root's
        ``recvcounts`` expects; that is also how every rank learns the
        counts the binomial algorithm needs."""
        c = "gatherv"
        root = self._root(root, c)
        counts = finish = None
        if self.rank == root:
            v, rspec = self._vector(recvbuf, c, "recvbuf", receiving=True)
            counts, recv = v.counts, v.array
            if sendbuf is IN_PLACE:
                send = inplace_send(c, recv, self.rank, self.size, counts)
                v.pack([self.rank])
            else:
                send = self._buffer(sendbuf, c, "sendbuf")
                self._same_type(send, recv, c)
            owners = (*_owners(sendbuf, rspec), recv)
            finish = v.unpack if v.staged else None
        else:
            self._not_in_place(sendbuf, c, "sendbuf")
            send = self._buffer(sendbuf, c, "sendbuf")
            recv, owners = send[:0], _owners(sendbuf)
        sizes, counts = self._agree(send.size, counts, root)
        self._disagree(c, [f"rank {q} sends {n}, recvcounts[{q}] is "
                           f"{counts[q]}" for q, n in enumerate(sizes)
                           if n != counts[q]])
        counts = tuple(counts)

        def native(nonblocking, send, recv):
            s = IN_PLACE if sendbuf is IN_PLACE else send
            r = [recv, list(counts)] if self.rank == root else None
            return self._prepared("Gatherv", nonblocking, s, r, root)

        return self._launch(c, algorithm, send=send, recv=recv, count=counts,
                            op=None, root=root, native=native, owners=owners,
                            async_op=async_op, finish=finish)

    def Scatterv(self, sendbuf, recvbuf, root=0, *, algorithm="auto"):
        self._call_scatterv(sendbuf, recvbuf, root, algorithm, False)

    def Iscatterv(self, sendbuf, recvbuf, root=0, *,
                  algorithm="auto") -> Work:
        return self._call_scatterv(sendbuf, recvbuf, root, algorithm, True)

    def _call_scatterv(self, sendbuf, recvbuf, root, algorithm, async_op):
        """Scatter blocks of per-rank sizes from the root's ``sendbuf``, a
        vector specification (unpacked displacements are staged); counts
        are checked across ranks as in :meth:`Gatherv`."""
        c = "scatterv"
        root = self._root(root, c)
        counts = None
        inplace = recvbuf is IN_PLACE
        if self.rank == root:
            v, sspec = self._vector(sendbuf, c, "sendbuf", receiving=False)
            v.pack()
            counts, send = v.counts, v.array
            if inplace:  # the root's block stays where it is
                start = v.displs[root]
                recv = v.flat[start:start + counts[root]]
            else:
                recv = self._buffer(recvbuf, c, "recvbuf", writable=True)
                self._same_type(send, recv, c)
            owners = (*_owners(sspec, recvbuf), send)
        else:
            self._not_in_place(recvbuf, c, "recvbuf")
            recv = self._buffer(recvbuf, c, "recvbuf", writable=True)
            send, owners = recv[:0], _owners(recvbuf)
        sizes, counts = self._agree(recv.size, counts, root)
        self._disagree(c, [f"rank {q} receives {n}, sendcounts[{q}] is "
                           f"{counts[q]}" for q, n in enumerate(sizes)
                           if n < counts[q]])
        counts = tuple(counts)
        recv = recv[:counts[self.rank]]

        def native(nonblocking, send, recv):
            s = [send, list(counts)] if self.rank == root else None
            return self._prepared("Scatterv", nonblocking,
                s, IN_PLACE if inplace else recv, root)

        return self._launch(c, algorithm, send=send, recv=recv, count=counts,
                            op=None, root=root, native=native, owners=owners,
                            async_op=async_op)

    def Alltoallv(self, sendbuf, recvbuf, *, algorithm="auto"):
        self._call_alltoallv(sendbuf, recvbuf, algorithm, False)

    def Ialltoallv(self, sendbuf, recvbuf, *, algorithm="auto") -> Work:
        return self._call_alltoallv(sendbuf, recvbuf, algorithm, True)

    def _call_alltoallv(self, sendbuf, recvbuf, algorithm, async_op):
        """Blocks of any sizes between every pair: both buffers are vector
        specifications (unpacked displacements are staged). One small
        allgather of
        every rank's send and receive counts builds the whole count matrix
        the schedules are keyed by, and checks that what ``i`` sends to
        ``j`` is what ``j`` expects from ``i``. In place, the input is
        copied out of ``recvbuf`` first, with the receive counts."""
        c = "alltoallv"
        rv, rspec = self._vector(recvbuf, c, "recvbuf", receiving=True)
        if sendbuf is IN_PLACE:
            rv.pack()
            sv, sspec = rv, None
            send = rv.array.copy()
        else:
            sv, sspec = self._vector(sendbuf, c, "sendbuf", receiving=False)
            sv.pack()
            send = sv.array
            self._same_type(send, rv.array, c)
        return self._alltoallv(send, rv.array, sv.counts, rv.counts,
                               algorithm,
                               (*_owners(sspec, rspec), send, rv.array),
                               async_op,
                               finish=rv.unpack if rv.staged else None)

    def _alltoallv(self, send, recv, scounts, rcounts, algorithm, owners,
                   async_op, finish=None):
        c = "alltoallv"
        rows, _ = self._agree((tuple(scounts), tuple(rcounts)))
        matrix = tuple(tuple(sc) for sc, _ in rows)
        self._disagree(c, [
            f"rank {i} sends {matrix[i][j]} to rank {j}, which expects "
            f"{rows[j][1][i]}" for i in range(self.size)
            for j in range(self.size) if matrix[i][j] != rows[j][1][i]])
        send = send[:sum(scounts)]

        def native(nonblocking, send, recv):
            return self._prepared("Alltoallv", nonblocking,
                [send, list(scounts)], [recv, list(rcounts)])

        return self._launch(c, algorithm, send=send, recv=recv, count=matrix,
                            op=None, root=0, native=native, owners=owners,
                            async_op=async_op, finish=finish)

    def Scatter(self, sendbuf, recvbuf, root=0, *, algorithm="auto"):
        memo = (("Scatter", algorithm, id(sendbuf), id(recvbuf), id(root)),
                (sendbuf, recvbuf, root))
        if not self._replayed(*memo):
            self._call_scatter(sendbuf, recvbuf, root, algorithm, False, memo)

    def Iscatter(self, sendbuf, recvbuf, root=0, *,
                 algorithm="auto") -> Work:
        return self._call_scatter(sendbuf, recvbuf, root, algorithm, True)

    def _call_scatter(self, sendbuf, recvbuf, root, algorithm, async_op,
                      memo=None):
        c = "scatter"
        root = self._root(root, c)
        inplace = recvbuf is IN_PLACE
        if self.rank == root:
            sbuf = self._buffer(sendbuf, c, "sendbuf")
            if inplace:
                count = sbuf.size // self.size
            else:
                recv = self._buffer(recvbuf, c, "recvbuf", writable=True)
                self._same_type(sbuf, recv, c)
                count = recv.size
            send = self._need(sbuf, count * self.size, c, "sendbuf")
            if inplace:
                recv = inplace_recv(c, send, self.rank, count)
            owners = _owners(sendbuf, recvbuf)
        else:
            self._not_in_place(recvbuf, c, "recvbuf")
            recv = self._buffer(recvbuf, c, "recvbuf", writable=True)
            send, count, owners = recv[:0], recv.size, _owners(recvbuf)

        def native(nonblocking, send, recv):
            s = send if self.rank == root else None
            return self._prepared("Scatter", nonblocking,
                s, IN_PLACE if inplace else recv, root)

        return self._launch(c, algorithm, send=send, recv=recv, count=count,
                            op=None, root=root, native=native, owners=owners,
                            async_op=async_op, memo=memo)

    def Alltoall(self, sendbuf, recvbuf, *, algorithm="auto"):
        memo = (("Alltoall", algorithm, id(sendbuf), id(recvbuf)),
                (sendbuf, recvbuf))
        if not self._replayed(*memo):
            self._call_alltoall(sendbuf, recvbuf, algorithm, False, memo)

    def Ialltoall(self, sendbuf, recvbuf, *, algorithm="auto") -> Work:
        return self._call_alltoall(sendbuf, recvbuf, algorithm, True)

    def _call_alltoall(self, sendbuf, recvbuf, algorithm, async_op,
                       memo=None):
        """In place, the input is copied out of ``recvbuf`` first (every
        block of it is both sent and overwritten)."""
        c = "alltoall"
        recv = self._buffer(recvbuf, c, "recvbuf", writable=True)
        if sendbuf is IN_PLACE:
            send = recv.copy()
        else:
            send = self._buffer(sendbuf, c, "sendbuf")
            self._same_type(send, recv, c)
        count = send.size // self.size
        send = send[:count * self.size]
        recv = self._need(recv, count * self.size, c, "recvbuf")

        def native(nonblocking, send, recv):
            return self._prepared("Alltoall", nonblocking, send, recv)

        return self._launch(c, algorithm, send=send, recv=recv, count=count,
                            op=None, root=0, native=native,
                            owners=(*_owners(sendbuf, recvbuf), send),
                            async_op=async_op, memo=memo)

    def Scan(self, sendbuf, recvbuf, op=MPI.SUM, *, algorithm="auto"):
        memo = (("Scan", algorithm, id(sendbuf), id(recvbuf), id(op)),
                (sendbuf, recvbuf, op))
        if not self._replayed(*memo):
            self._call_scan("scan", sendbuf, recvbuf, op, algorithm, False,
                            memo)

    def Iscan(self, sendbuf, recvbuf, op=MPI.SUM, *, algorithm="auto") -> Work:
        return self._call_scan("scan", sendbuf, recvbuf, op, algorithm, True)

    def Exscan(self, sendbuf, recvbuf, op=MPI.SUM, *, algorithm="auto"):
        memo = (("Exscan", algorithm, id(sendbuf), id(recvbuf), id(op)),
                (sendbuf, recvbuf, op))
        if not self._replayed(*memo):
            self._call_scan("exscan", sendbuf, recvbuf, op, algorithm, False,
                            memo)

    def Iexscan(self, sendbuf, recvbuf, op=MPI.SUM, *,
                algorithm="auto") -> Work:
        return self._call_scan("exscan", sendbuf, recvbuf, op, algorithm,
                               True)

    def _call_scan(self, c, sendbuf, recvbuf, op, algorithm, async_op,
                   memo=None):
        op = self._op(op, c)
        send, recv = self._vectors(sendbuf, recvbuf, c)
        return self._scan(c, send, recv, op, algorithm,
                          _owners(sendbuf, recvbuf), async_op, memo)

    def _scan(self, c, send, recv, op, algorithm, owners, async_op,
              memo=None):
        def native(nonblocking, send, recv):
            name = "Scan" if c == "scan" else "Exscan"
            return self._prepared(name, nonblocking,
                IN_PLACE if send is recv else send, recv, native_op(op))

        return self._launch(c, algorithm, send=send, recv=recv,
                            count=recv.size, op=op, root=0, native=native,
                            owners=owners, async_op=async_op, memo=memo)

    def Reduce_scatter_block(self, sendbuf, recvbuf, op=MPI.SUM, *,
                             algorithm="auto"):
        memo = (("Reduce_scatter_block", algorithm, id(sendbuf), id(recvbuf),
                 id(op)), (sendbuf, recvbuf, op))
        if not self._replayed(*memo):
            self._call_reduce_scatter_block(sendbuf, recvbuf, op, algorithm,
                                            False, memo)

    def Ireduce_scatter_block(self, sendbuf, recvbuf, op=MPI.SUM, *,
                              algorithm="auto") -> Work:
        return self._call_reduce_scatter_block(sendbuf, recvbuf, op,
                                               algorithm, True)

    def _call_reduce_scatter_block(self, sendbuf, recvbuf, op, algorithm,
                                   async_op, memo=None):
        c = "reduce_scatter_block"
        op = self._op(op, c)
        rbuf = self._buffer(recvbuf, c, "recvbuf", writable=True)
        n = rbuf.size // self.size if sendbuf is IN_PLACE else rbuf.size
        return self._reduce_scatter(c, sendbuf, rbuf, n, (n,) * self.size,
                                    op, algorithm, _owners(sendbuf, recvbuf),
                                    async_op, memo)

    def Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=MPI.SUM,
                       *, algorithm="auto"):
        # recvcounts=None exchanges counts each call: never replayed.
        memo = None if recvcounts is None else (
            ("Reduce_scatter", algorithm, id(sendbuf), id(recvbuf),
             id(recvcounts), id(op)), (sendbuf, recvbuf, recvcounts, op))
        if memo is None or not self._replayed(*memo):
            self._call_reduce_scatter(sendbuf, recvbuf, recvcounts, op,
                                      algorithm, False, memo)

    def Ireduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=MPI.SUM,
                        *, algorithm="auto") -> Work:
        return self._call_reduce_scatter(sendbuf, recvbuf, recvcounts, op,
                                         algorithm, True)

    def _call_reduce_scatter(self, sendbuf, recvbuf, recvcounts, op,
                             algorithm, async_op, memo=None):
        c = "reduce_scatter"
        op = self._op(op, c)
        rbuf = self._buffer(recvbuf, c, "recvbuf", writable=True)
        if recvcounts is None:
            if sendbuf is IN_PLACE:
                raise InvalidArgumentError(
                    "MPI.IN_PLACE needs recvcounts", **self._where(c))
            recvcounts = self._ctx.comm.allgather(rbuf.size)
        counts = tuple(int(n) for n in recvcounts)
        if len(counts) != self.size or min(counts) < 0:
            raise InvalidArgumentError(
                f"recvcounts must hold {self.size} non-negative counts, "
                f"got {list(recvcounts)}", **self._where(c))
        return self._reduce_scatter(c, sendbuf, rbuf, counts, counts, op,
                                    algorithm, _owners(sendbuf, recvbuf),
                                    async_op, memo)

    def _reduce_scatter(self, c, sendbuf, rbuf, count, counts, op,
                        algorithm, owners, async_op, memo=None):
        """Both reduce-scatters; ``count`` keys the schedule (an int for
        _block, the counts tuple otherwise). In place, the input is
        ``rbuf`` and the result is staged, then copied to its front."""
        total, mine = sum(counts), counts[self.rank]
        finish = None
        if sendbuf is IN_PLACE:
            send = self._need(rbuf, total, c, "recvbuf")
            recv = empty_like(send, mine)
            owners = (*owners, recv)

            def finish():
                copyto(send[:mine], recv)
        else:
            send = self._need(self._buffer(sendbuf, c, "sendbuf"), total, c,
                              "sendbuf")
            self._same_type(send, rbuf, c)
            recv = self._need(rbuf, mine, c, "recvbuf")

        def native(nonblocking, send, recv):
            if c == "reduce_scatter_block":
                return self._prepared("Reduce_scatter_block", nonblocking,
                    send, recv, native_op(op))
            return self._prepared("Reduce_scatter", nonblocking,
                send, recv, list(counts), native_op(op))

        return self._launch(c, algorithm, send=send, recv=recv, count=count,
                            op=op, root=0, native=native, owners=owners,
                            async_op=async_op, finish=finish, memo=memo)

    def Barrier(self, *, algorithm="auto"):
        self.barrier(algorithm=algorithm)

    def Ibarrier(self, *, algorithm="auto") -> Work:
        return self.barrier(algorithm=algorithm, async_op=True)

    def _not_in_place(self, spec, collective, what) -> None:
        if spec is IN_PLACE:
            raise InvalidArgumentError(
                f"MPI.IN_PLACE as {what} is for the root only",
                **self._where(collective))

    # ------------------------------------------- array face (torch-style)

    def all_reduce(self, x, op="sum", *, algorithm="auto", async_op=False):
        """Reduce ``x`` across ranks, in place on every rank."""
        memo = None if async_op else (
            ("all_reduce", algorithm, id(x), id(op)), (x, op))
        if memo and self._replayed(*memo):
            return None
        c = "allreduce"
        op = self._op(op, c)
        flat = self._array(x, c, "x")
        return self._allreduce(flat, flat, op, algorithm, (x,), async_op,
                               memo)

    def reduce(self, x, root=0, op="sum", *, algorithm="auto",
               async_op=False):
        """Reduce ``x`` onto ``root``, in place there; elsewhere ``x`` is
        only read."""
        memo = None if async_op else (
            ("reduce", algorithm, id(x), id(root), id(op)), (x, root, op))
        if memo and self._replayed(*memo):
            return None
        c = "reduce"
        op = self._op(op, c)
        root = self._root(root, c)
        at_root = self.rank == root
        flat = self._array(x, c, "x", writable=at_root)
        return self._reduce(flat, flat if at_root else flat[:0], op, root,
                            algorithm, (x,), async_op, memo)

    def broadcast(self, x, root=0, *, algorithm="auto", async_op=False):
        """Copy root's ``x`` into every rank's ``x``."""
        memo = None if async_op else (
            ("broadcast", algorithm, id(x), id(root)), (x, root))
        if memo and self._replayed(*memo):
            return None
        c = "bcast"
        root = self._root(root, c)
        return self._bcast(self._array(x, c, "x"), root, algorithm, (x,),
                           async_op, memo)

    def all_gather(self, out, x, *, algorithm="auto", async_op=False):
        """Every rank's ``x`` into ``out``, in rank order.

        ``out`` is one array of ``size * x.size`` elements (any shape; ``x``
        may be ``out``'s own block, in place), or a list of ``size`` arrays,
        one per rank, whose sizes may differ (``out[rank]`` the size of
        ``x``): then an allgatherv, staged through one flat buffer."""
        if isinstance(out, (list, tuple)):
            return self._all_gather_list(out, x, algorithm, async_op)
        memo = None if async_op else (
            ("all_gather", algorithm, id(out), id(x)), (out, x))
        if memo and self._replayed(*memo):
            return None
        c = "allgather"
        send = self._array(x, c, "x", writable=False)
        recv = self._array(out, c, "out")
        self._whole_blocks(recv, send, c, "out", "x")
        block = inplace_send(c, recv, self.rank, self.size, send.size)
        inplace = same_memory(block, send)
        return self._gathering(c, block if inplace else send, recv,
                               send.size, 0, algorithm, (out, x), async_op,
                               inplace=inplace, memo=memo)

    def _all_gather_list(self, outs, x, algorithm, async_op):
        c = "allgatherv"
        send = self._array(x, c, "x", writable=False)
        if len(outs) != self.size:
            raise BufferSpecError(f"out must list {self.size} arrays, got "
                                  f"{len(outs)}", **self._where(c))
        flats = [self._array(o, c, f"out[{q}]") for q, o in enumerate(outs)]
        if any(f.dtype != send.dtype for f in flats) or \
                flats[self.rank].size != send.size:
            raise BufferSpecError(
                f"out[{self.rank}] must match x ({send.size} elements of "
                f"{send.dtype}), and every out[i] be of that dtype",
                **self._where(c))
        counts = tuple(f.size for f in flats)
        rows, _ = self._agree(counts)
        self._disagree(c, [f"rank {q} lists sizes {list(row)}, rank "
                           f"{self.rank} {list(counts)}"
                           for q, row in enumerate(rows) if row != counts])
        staging = empty_like(send, sum(counts))
        bounds = np.cumsum((0, *counts))

        def finish():
            for q, f in enumerate(flats):
                copyto(f, staging[bounds[q]:bounds[q + 1]])

        return self._gathering(c, send, staging, counts, 0, algorithm,
                               (*outs, x, staging), async_op, inplace=False,
                               finish=finish)

    def gather(self, out, x, root=0, *, algorithm="auto", async_op=False):
        """Concatenate every rank's ``x`` into root's ``out`` (``size *
        x.size`` elements in rank order); ``out`` is ignored (may be None)
        elsewhere; at the root ``x`` may be ``out``'s own block."""
        c = "gather"
        root = self._root(root, c)
        send = self._array(x, c, "x", writable=False)
        if self.rank != root:
            return self._gathering(c, send, send[:0], send.size, root,
                                   algorithm, (x,), async_op, inplace=False)
        recv = self._array(out, c, "out")
        self._whole_blocks(recv, send, c, "out", "x")
        block = inplace_send(c, recv, self.rank, self.size, send.size)
        inplace = same_memory(block, send)
        return self._gathering(c, block if inplace else send, recv,
                               send.size, root, algorithm, (out, x),
                               async_op, inplace=inplace)

    def scatter(self, out, x, root=0, *, algorithm="auto", async_op=False):
        """Block ``rank`` of root's ``x`` (``size * out.size`` elements) into
        every rank's ``out``; ``x`` is ignored (may be None) elsewhere."""
        c = "scatter"
        root = self._root(root, c)
        recv = self._array(out, c, "out")
        if self.rank != root:
            send = recv[:0]
            owners = (out,)
        else:
            send = self._array(x, c, "x", writable=False)
            self._whole_blocks(send, recv, c, "x", "out")
            owners = (out, x)

        def native(nonblocking, send, recv):
            s = send if self.rank == root else None
            return self._prepared("Scatter", nonblocking, s, recv, root)

        return self._launch(c, algorithm, send=send, recv=recv,
                            count=recv.size, op=None, root=root,
                            native=native, owners=owners, async_op=async_op)

    def all_to_all(self, out, x, out_splits=None, in_splits=None, *,
                   algorithm="auto", async_op=False):
        """Like torch's ``all_to_all_single``: ``x`` is cut into ``size``
        blocks, block ``j`` going to rank ``j``; ``out`` receives block
        ``i`` from rank ``i``. Without splits the blocks are equal; with
        ``in_splits`` / ``out_splits`` (elements per rank, summing to
        ``x.size`` / ``out.size``; a missing one means equal blocks) it is
        an alltoallv, whose counts are checked across ranks."""
        c = "alltoall"
        send = self._array(x, c, "x", writable=False)
        recv = self._array(out, c, "out")
        if recv.dtype != send.dtype:
            raise BufferSpecError(f"x is {send.dtype} but out is "
                                  f"{recv.dtype}", **self._where(c))
        self._same_memory(send, recv, c)
        if out_splits is None and in_splits is None:
            if recv.size != send.size or send.size % self.size:
                raise BufferSpecError(
                    f"x and out must be {self.size} equal blocks, got "
                    f"{send.size} and {recv.size} elements",
                    **self._where(c))

            def native(nonblocking, send, recv):
                return self._prepared("Alltoall", nonblocking, send, recv)

            return self._launch(c, algorithm, send=send, recv=recv,
                                count=send.size // self.size, op=None,
                                root=0, native=native, owners=(out, x),
                                async_op=async_op)
        scounts = self._splits(in_splits, send, "in_splits")
        rcounts = self._splits(out_splits, recv, "out_splits")
        return self._alltoallv(send, recv, scounts, rcounts, algorithm,
                               (out, x), async_op)

    def _splits(self, splits, buf, what) -> tuple[int, ...]:
        """Per-rank element counts of ``buf``, checked; None: equal."""
        c = "alltoallv"
        if splits is None:
            if buf.size % self.size:
                raise BufferSpecError(
                    f"{buf.size} elements do not split into {self.size} "
                    f"equal blocks; pass {what}", **self._where(c))
            return (buf.size // self.size,) * self.size
        counts = tuple(int(n) for n in splits)
        if len(counts) != self.size or min(counts) < 0 or \
                sum(counts) != buf.size:
            raise BufferSpecError(
                f"{what} {list(splits)} must be {self.size} non-negative "
                f"counts summing to the buffer's {buf.size} elements",
                **self._where(c))
        return counts

    def scan(self, x, op="sum", *, algorithm="auto", async_op=False):
        """Inclusive prefix reduction in place: rank r gets x0 op ... op xr."""
        return self._scan_array("scan", x, op, algorithm, async_op)

    def exscan(self, x, op="sum", *, algorithm="auto", async_op=False):
        """Exclusive prefix reduction in place: rank r > 0 gets
        x0 op ... op x(r-1); rank 0's ``x`` is left as it was."""
        return self._scan_array("exscan", x, op, algorithm, async_op)

    def _scan_array(self, c, x, op, algorithm, async_op):
        op = self._op(op, c)
        flat = self._array(x, c, "x")
        return self._scan(c, flat, flat, op, algorithm, (x,), async_op)

    def _whole_blocks(self, whole, block, collective, whole_name,
                      block_name) -> None:
        self._same_memory(whole, block, collective)
        if whole.dtype != block.dtype or whole.size != block.size * self.size:
            raise BufferSpecError(
                f"{whole_name} must be {self.size} x {block.size} elements "
                f"of {block.dtype} (the size of {block_name}), got "
                f"{whole.size} of {whole.dtype}",
                **self._where(collective))

    def reduce_scatter(self, out, x, op="sum", *, algorithm="auto",
                       async_op=False):
        """Reduce ``x`` (``size * out.size`` elements) across ranks and
        leave block ``rank`` of the result in ``out``."""
        memo = None if async_op else (
            ("reduce_scatter", algorithm, id(out), id(x), id(op)), (out, x, op))
        if memo and self._replayed(*memo):
            return None
        c = "reduce_scatter_block"
        op = self._op(op, c)
        send = self._array(x, c, "x", writable=False)
        recv = self._array(out, c, "out")
        self._whole_blocks(send, recv, c, "x", "out")
        n = recv.size
        return self._reduce_scatter(c, send, recv, n, (n,) * self.size, op,
                                    algorithm, (out, x), async_op, memo)

    def barrier(self, *, algorithm="auto", async_op=False):
        """Block until every rank has entered the barrier."""
        memo = None if async_op else (("barrier", algorithm), ())
        if memo and self._replayed(*memo):
            return None
        empty = np.empty(0, np.uint8)

        def native(nonblocking, send, recv):
            return self._prepared("Barrier", nonblocking)

        return self._launch("barrier", algorithm, send=empty, recv=empty,
                            count=0, op=None, root=0, native=native,
                            owners=(), async_op=async_op, memo=memo)


def _owners(*specs) -> tuple:
    """The caller's buffer objects behind buffer specifications."""
    return tuple([s[0] if type(s) in (list, tuple) else s for s in specs])


def _memory(x) -> str:
    where = placement(x)
    return "host memory" if where is None else f"on CUDA device {where[1]}"
