"""``mpicoll.Comm``: an mpi4py communicator with a choice of algorithms.

``mpicoll.Comm(comm)`` *is* an mpi4py communicator (a subclass of
``MPI.Intracomm``, or of ``MPI.Cartcomm`` / ``MPI.Graphcomm`` /
``MPI.Distgraphcomm`` when ``comm`` has that topology) sharing ``comm``'s
handle, as ``MPI.Intracomm(comm)`` does: every method mpicoll does not
define is mpi4py's own — the lowercase object calls (``bcast``,
``allreduce``, ``send``, ...), ``Get_rank``, ``Split``, ``Create_cart`` —
and ``comm == mpicoll.Comm(comm)``. Wrapping the communicator of an mpi4py
program changes nothing but what the caller asks for.

mpicoll defines mpi4py's buffer collectives with the same names,
signatures and buffer specifications, plus a keyword ``algorithm=``
(``"auto"``, ``"native"``: the MPI library's own call, or a hand-built
schedule such as ``"ring"``; :func:`mpicoll.algorithms` lists them), and
the buffer point-to-point calls (checked, and device buffers staged when
MPI is not CUDA-aware). Collectives run on a private duplicate of the
communicator, made on the first collective call (collective) by the
:class:`~mpicoll.engine.engine.Engine`, so library traffic never matches the
caller's messages; ``Free``/``free`` release it with the communicator.

The torch.distributed-style face is :class:`mpicoll.ProcessGroup`.
"""

from __future__ import annotations

from functools import partial

import numpy as np
from mpi4py import MPI

from mpicoll.api.calls import CallBuilder, owners_of
from mpicoll.api.children import Children, constructors, mpi4py_class_of
from mpicoll.api.faces import accelerate
from mpicoll.device.cuda import copyto
from mpicoll.collectives import COLLECTIVES
from mpicoll.engine.engine import Call, Engine, Settings
from mpicoll.errors import BufferSpecError, BufferSpecMPIError
from mpicoll.args.checks import check_alias, check_op, check_root
from mpicoll.args.datatypes import unpack
from mpicoll.args.message import is_in_place, message
from mpicoll.args.mpi_ops import as_op
from mpicoll.api.groups import Groups
from mpicoll.guard.guarded import guard_settings, guarded_class
from mpicoll.api.nonblocking_calls import NonblockingCalls
from mpicoll.api.p2p import PointToPoint
from mpicoll.api.persistent_calls import PersistentCalls
from mpicoll.schedule.layout import inplace_recv, inplace_send
from mpicoll.device.memory import overlap
from mpicoll.select.policy import Choice
from mpicoll.api.vector_calls import VectorCalls
from mpicoll.engine.work import then

IN_PLACE = MPI.IN_PLACE


class Comm(NonblockingCalls, VectorCalls, PersistentCalls, CallBuilder,
           PointToPoint, Groups, Children, MPI.Intracomm):
    """``comm`` (default ``MPI.COMM_WORLD``) with mpicoll's collectives.

    Not collective to create, as ``MPI.Intracomm(comm)`` is not; the
    first collective call makes the private duplicate (every rank calls
    it, as every collective). ``MPICOLL_<COLLECTIVE>_ALGORITHM``,
    ``MPICOLL_RULES``, ``MPICOLL_EXPLAIN``, ``MPICOLL_RANKS_PER_NODE``,
    ``MPICOLL_CHECK``, ``MPICOLL_TIMEOUT`` and ``MPICOLL_ON_TIMEOUT`` are
    read here, once (a bad setting raises here).

    ``check=True`` puts the communicator in check mode (every collective
    call is first agreed by every rank: :mod:`mpicoll.guard.check_mode`);
    ``timeout=SECONDS`` bounds every collective call and ``Work.wait``,
    then ``on_timeout`` (``"abort"``, the default, or ``"raise"``):
    :mod:`mpicoll.guard.watchdog`. None reads the environment variable.
    Communicators made from this one (``split``, ``new_group``, meshes)
    inherit both.
    """

    def __new__(cls, comm: MPI.Comm | None = None, *, check=None,
                timeout=None, on_timeout=None):
        if comm is None:
            comm = MPI.COMM_WORLD
        if not isinstance(comm, MPI.Intracomm):
            raise TypeError(f"mpicoll.Comm wraps an MPI.Intracomm, "
                            f"got {type(comm).__name__}")
        # Read now, so that a bad setting fails here (local, not collective).
        settings = Settings.from_environment(
            comm.Get_rank(), guard_settings(check, timeout, on_timeout))
        return _wrapped(cls, comm, settings)

    def __init__(self, comm: MPI.Comm | None = None, *, check=None,
                 timeout=None, on_timeout=None) -> None:
        pass  # made by __new__

    guarded = False  # a guarded subclass (mpicoll.guard.guarded) says True

    def _derived(self, mpi: MPI.Intracomm, now: bool = True):
        """A ``Comm`` of ``mpi`` (made from this one by a collective call
        of its ranks), guarded as this is, its other settings read from
        the environment now (as ``mpicoll.Comm(mpi)`` reads them; this
        rank names a bad one); ``MPI.COMM_NULL`` as it is. One with a
        deadline or check mode makes its private duplicate ``now``, while
        every rank is here, so that its first collective call is bounded
        by the deadline as every later one, and its ranks can be asked
        where they are."""
        if mpi == MPI.COMM_NULL:
            return mpi
        guard = self._settings.guard
        comm = _wrapped(Comm, mpi, Settings.from_environment(
            self.Get_rank(), guard))
        if now and (guard.on or guard.timeout is not None):
            comm._engine  # noqa: B018 (collective: the private Dup)
        return comm

    def __getattr__(self, name):
        # Called only when normal lookup fails: mpicoll's state is made on
        # first use, so that communicators mpi4py makes of this class
        # without calling __init__ (Dup, Clone, Idup) work too.
        if name == "_engine":
            engine = self.__dict__["_engine"] = Engine(self, self._settings)
            return engine
        if name in ("_replayed", "_restarted"):  # the engine's, bound
            lookup = self.__dict__[name] = getattr(self._engine, name[1:])
            return lookup
        if name == "_settings":
            settings = self.__dict__["_settings"] = \
                Settings.from_environment(self.Get_rank())
            return settings
        if name == "_subcomms":
            # "node", "leaders" -> Comm | None: see mpicoll.api.groups.
            subcomms = self.__dict__["_subcomms"] = {}
            return subcomms
        raise AttributeError(f"{type(self).__name__!r} object has no "
                             f"attribute {name!r}")

    def __repr__(self) -> str:
        return f"<mpicoll.Comm of {MPI.Intracomm(self)!r}>"

    def explain(self, collective: str, *, count: int = 1, dtype="float64",
                op="sum", algorithm: str = "auto", inplace: bool = False,
                form: str = "blocking") -> Choice:
        """Which algorithm a call with these arguments runs (in place or
        not, as a ``"blocking"``, ``"nonblocking"`` or ``"persistent"``
        call), and why."""
        row = COLLECTIVES.get(collective)
        return self._engine.describe(
            collective, count=count, dtype=dtype,
            op=as_op(op) if row is not None and row.reducing else None,
            algorithm=algorithm, inplace=inplace, form=form)

    # ------------------------------------------------------------ collectives
    #
    # Each collective X has one parser, _call_x(..., async_op, name), which
    # checks the arguments and launches a Call; X (blocking, here), IX
    # (nonblocking, returns a Work: mpicoll.api.nonblocking_calls) and
    # X_init (persistent: mpicoll.api.persistent_calls) all reach it. X
    # and IX first offer the call to the engine's replays
    # (mpicoll.engine.replay: _replayed, _restarted), keyed by the method's
    # name, algorithm=, its buffer and up to three more arguments: a repeat
    # on the same objects runs without parsing. On a miss, the parser
    # keeps the call under the memo it makes of ``name`` and the same
    # arguments (no name: a persistent call, never kept).

    def Allreduce(self, sendbuf, recvbuf, op=MPI.SUM, *, algorithm="auto"):
        if not self._replayed("Allreduce", algorithm, recvbuf, sendbuf, op):
            self._call_allreduce(sendbuf, recvbuf, op, algorithm, False,
                                 "Allreduce")

    def _call_allreduce(self, sendbuf, recvbuf, op, algorithm, async_op,
                        name=None):
        memo = name and (name, algorithm, recvbuf, sendbuf, op, None)
        where = self._where("allreduce")
        mop, why = self._mpi_op(op, where)
        s, r = self._reduction_messages(sendbuf, recvbuf, op, where)
        send, recv, unstage, restage, why = self._reduction_views(
            s, r, why, where)
        return self._allreduce(
            send, recv, mop, algorithm, owners_of(sendbuf, recvbuf),
            async_op, _memo(memo, s, r), why_native=why, unstage=unstage,
            stage=restage, given=("Allreduce", (sendbuf, recvbuf, op)))

    def _reduction_messages(self, sendbuf, recvbuf, op, where):
        """Parsed send (None: in place) and receive messages of an
        allreduce-style call, checked as mpi4py and MPI check them."""
        r = message(recvbuf, readonly=False, where=where)
        s = None if is_in_place(sendbuf) else \
            message(sendbuf, readonly=True, where=where)
        self._reduction(op, s, r, where)
        return s, r

    def _reduction_views(self, s, r, why, where):
        """``(send, recv, unstage, restage, why_native)`` views of a
        reduction's messages; in place, one view twice."""
        send, recv, unstage, restage, staged_why = self._staged(where,
            s, r, reducing=True, read_recv=s is None)
        if s is None:
            send = recv
        elif overlap(send, recv):
            raise BufferSpecError("sendbuf and recvbuf overlap; pass "
                                  "MPI.IN_PLACE as sendbuf for an in-place "
                                  "call", **where)
        return send, recv, unstage, restage, why or staged_why

    def Reduce(self, sendbuf, recvbuf, op=MPI.SUM, root=0, *,
               algorithm="auto"):
        if not self._replayed("Reduce", algorithm, recvbuf, sendbuf, op, root):
            self._call_reduce(sendbuf, recvbuf, op, root, algorithm, False,
                              "Reduce")

    def _call_reduce(self, sendbuf, recvbuf, op, root, algorithm, async_op,
                     name=None):
        memo = name and (name, algorithm, recvbuf, sendbuf, op, root)
        where = self._where("reduce")
        mop, why = self._mpi_op(op, where)
        root = check_root(root, self._engine.size, where=where)
        if self._engine.rank == root:
            s, r = self._reduction_messages(sendbuf, recvbuf, op, where)
        else:  # the receive buffer is ignored, as in mpi4py
            s = message(sendbuf, readonly=True, where=where)
            r = None
            check_op(op, s.datatype, where=where)
        if r is None:
            send, _, _, restage, staged_why = self._staged(
                where, s, None, reducing=True)
            recv, unstage, why = send[:0], None, why or staged_why
        else:
            send, recv, unstage, restage, why = self._reduction_views(
                s, r, why, where)
        return self._reduce(
            send, recv, mop, root, algorithm, owners_of(sendbuf, recvbuf),
            async_op, _memo(memo, s, r), why_native=why, unstage=unstage,
            stage=restage, given=("Reduce", (sendbuf, recvbuf, op, root)))

    def Bcast(self, buf, root=0, *, algorithm="auto"):
        if not self._replayed("Bcast", algorithm, buf, root):
            self._call_bcast(buf, root, algorithm, False, "Bcast")

    def _call_bcast(self, buf, root, algorithm, async_op, name=None):
        memo = name and (name, algorithm, buf, root, None, None)
        where = self._where("bcast")
        root = check_root(root, self._engine.size, where=where)
        at_root = self._engine.rank == root
        m = message(buf, readonly=at_root, where=where)
        data, _, _, restage, _ = self._staged(where, m, None,
                                              reducing=False)
        unstage = None
        if not at_root:
            restage = None  # the data is the root's
            if m.derived:
                unstage = partial(unpack, m, data)
        elif type(data) is np.ndarray and not data.flags.writeable:
            data = data.copy()  # schedules may write the root's own copy
            restage = partial(copyto, data, m.array)
            memo = None  # and a replay would send this call's copy
        return self._bcast(data, root, algorithm, owners_of(buf), async_op,
                           _memo(memo, m), unstage=unstage, stage=restage,
                           given=("Bcast", (buf, root)))

    def Allgather(self, sendbuf, recvbuf, *, algorithm="auto"):
        if not self._replayed("Allgather", algorithm, recvbuf, sendbuf):
            self._call_allgather(sendbuf, recvbuf, algorithm, False,
                                 "Allgather")

    def _call_allgather(self, sendbuf, recvbuf, algorithm, async_op,
                        name=None):
        memo = name and (name, algorithm, recvbuf, sendbuf, None, None)
        c = "allgather"
        where = self._where(c)
        r = message(recvbuf, readonly=False, blocks=self._engine.size,
                    where=where)
        s = None if is_in_place(sendbuf) else \
            message(sendbuf, readonly=True, where=where)
        check_alias(s, r, where=where)
        return self._blocks_call(c, s, r, 0, algorithm,
                                 owners_of(sendbuf, recvbuf), async_op,
                                 _memo(memo, s, r),
                                 ("Allgather", (sendbuf, recvbuf)))

    def _blocks_call(self, c, s, r, root, algorithm, owners, async_op, memo,
                     given):
        """Allgather or gather (at the root) of parsed messages: ``r``
        holds one block per rank; in place (``s`` None) this rank's block
        is the input. A send that is not one receive block of bytes runs
        natively (MPI's own rules apply)."""
        where = self._where(c)
        send, recv, unstage, restage, why = self._staged(
            where, s, r, reducing=False, read_recv=s is None)
        size = self._engine.size
        block = recv.size // size
        if s is None:
            send = inplace_send(c, recv, self._engine.rank, size, block)
        elif send.nbytes != block * recv.itemsize:
            why = self._mismatch(algorithm, send.nbytes,
                                 block * recv.itemsize, where)
            send = send[:0]
        return self._gathering(c, send, recv, block, root, algorithm, owners,
                               async_op, inplace=s is None, memo=memo,
                               why_native=why, unstage=unstage, stage=restage,
                               given=given)

    @staticmethod
    def _mismatch(algorithm, sent: int, room: int, where,
                  error_class=MPI.ERR_TRUNCATE) -> str:
        """Why a call whose blocks sent and received differ in size runs
        natively (MPI's rules apply: it may truncate, or fill a part);
        forced hand-built, a message larger than its room is MPI's
        ``ERR_TRUNCATE`` at once, before any message moves."""
        if sent > room and algorithm not in ("auto", "native"):
            raise BufferSpecMPIError(
                f"a block of {sent} bytes does not fit in {room}",
                error_class=error_class,
                **{**where, "algorithm": algorithm})
        return (f"blocks of {sent} bytes are sent into {room} bytes; only "
                f"the MPI library applies its rules to that")

    def Gather(self, sendbuf, recvbuf, root=0, *, algorithm="auto"):
        if not self._replayed("Gather", algorithm, recvbuf, sendbuf, root):
            self._call_gather(sendbuf, recvbuf, root, algorithm, False,
                              "Gather")

    def _call_gather(self, sendbuf, recvbuf, root, algorithm, async_op,
                     name=None):
        memo = name and (name, algorithm, recvbuf, sendbuf, root, None)
        c = "gather"
        where = self._where(c)
        root = check_root(root, self._engine.size, where=where)
        given = ("Gather", (sendbuf, recvbuf, root))
        owners = owners_of(sendbuf, recvbuf)
        if self._engine.rank == root:
            r = message(recvbuf, readonly=False, blocks=self._engine.size,
                        where=where)
            s = None if is_in_place(sendbuf) else \
                message(sendbuf, readonly=True, where=where)
            check_alias(s, r, where=where)
            return self._blocks_call(c, s, r, root, algorithm, owners,
                                     async_op, _memo(memo, s, r), given)
        s = message(sendbuf, readonly=True, where=where)
        send, _, _, restage, _ = self._staged(where, s, None,
                                              reducing=False)
        return self._gathering(c, send, send[:0], send.size, root, algorithm,
                               owners, async_op, inplace=False,
                               memo=_memo(memo, s), stage=restage,
                               given=given)

    def Scatter(self, sendbuf, recvbuf, root=0, *, algorithm="auto"):
        if not self._replayed("Scatter", algorithm, recvbuf, sendbuf, root):
            self._call_scatter(sendbuf, recvbuf, root, algorithm, False,
                               "Scatter")

    def _call_scatter(self, sendbuf, recvbuf, root, algorithm, async_op,
                      name=None):
        memo = name and (name, algorithm, recvbuf, sendbuf, root, None)
        c = "scatter"
        where = self._where(c)
        engine = self._engine
        root = check_root(root, engine.size, where=where)
        at_root = engine.rank == root
        inplace = at_root and is_in_place(recvbuf)
        s = message(sendbuf, readonly=True, blocks=engine.size,
                    null=not at_root, where=where)
        r = None if inplace else message(recvbuf, readonly=False, where=where)
        check_alias(s, r, where=where)
        send, recv, unstage, restage, why = self._staged(where, s, r,
                                                         reducing=False)
        if s is None:
            send = recv[:0]
            count = recv.size
        else:
            count = send.size // engine.size
            if inplace:
                recv = inplace_recv(c, send, engine.rank, count)
            elif recv.nbytes != count * send.itemsize:
                why = self._mismatch(algorithm, count * send.itemsize,
                                     recv.nbytes, where)
        given = ("Scatter", (sendbuf, recvbuf, root))

        def native(nonblocking, send, recv):
            return engine.prepared("Scatter", nonblocking,
                                   send if at_root else None,
                                   IN_PLACE if inplace else recv, root)

        return engine.launch(Call(
            c, algorithm, send, recv, count, None, root, native,
            owners_of(sendbuf, recvbuf), None, _memo(memo, s, r),
            why_native=why, unstage=unstage, given=given, stage=restage),
            async_op)

    def Alltoall(self, sendbuf, recvbuf, *, algorithm="auto"):
        if not self._replayed("Alltoall", algorithm, recvbuf, sendbuf):
            self._call_alltoall(sendbuf, recvbuf, algorithm, False,
                                "Alltoall")

    def _call_alltoall(self, sendbuf, recvbuf, algorithm, async_op,
                       name=None):
        """In place, the input is copied out of ``recvbuf`` first (every
        block of it is both sent and overwritten)."""
        memo = name and (name, algorithm, recvbuf, sendbuf, None, None)
        c = "alltoall"
        where = self._where(c)
        engine = self._engine
        r = message(recvbuf, readonly=False, blocks=engine.size, where=where)
        s = None if is_in_place(sendbuf) else \
            message(sendbuf, readonly=True, blocks=engine.size, where=where)
        check_alias(s, r, where=where)
        send, recv, unstage, stage, why = self._staged(
            where, s, r, reducing=False, read_recv=s is None)
        if s is None:  # the input, copied again before every run
            send = engine.ctx.input_copy(recv)
            stage = then(stage, partial(copyto, send, recv))
        elif send.nbytes != recv.nbytes:
            # MPICH reports an alltoall's truncated block in its status
            why = self._mismatch(algorithm, send.nbytes, recv.nbytes, where,
                                 MPI.ERR_IN_STATUS)
        count = recv.size // engine.size

        def native(nonblocking, send, recv):
            return engine.prepared("Alltoall", nonblocking, send, recv)

        return engine.launch(Call(
            c, algorithm, send, recv, count, None, 0, native,
            (*owners_of(sendbuf, recvbuf), send), None, _memo(memo, s, r),
            why_native=why, unstage=unstage,
            given=("Alltoall", (sendbuf, recvbuf)), stage=stage), async_op)

    def Scan(self, sendbuf, recvbuf, op=MPI.SUM, *, algorithm="auto"):
        if not self._replayed("Scan", algorithm, recvbuf, sendbuf, op):
            self._call_scan("scan", sendbuf, recvbuf, op, algorithm, False,
                            "Scan")

    def Exscan(self, sendbuf, recvbuf, op=MPI.SUM, *, algorithm="auto"):
        if not self._replayed("Exscan", algorithm, recvbuf, sendbuf, op):
            self._call_scan("exscan", sendbuf, recvbuf, op, algorithm, False,
                            "Exscan")

    def _call_scan(self, c, sendbuf, recvbuf, op, algorithm, async_op,
                   name=None):
        memo = name and (name, algorithm, recvbuf, sendbuf, op, None)
        where = self._where(c)
        mop, why = self._mpi_op(op, where)
        s, r = self._reduction_messages(sendbuf, recvbuf, op, where)
        send, recv, unstage, restage, why = self._reduction_views(
            s, r, why, where)
        return self._scan(
            c, send, recv, mop, algorithm, owners_of(sendbuf, recvbuf),
            async_op, _memo(memo, s, r), why_native=why, unstage=unstage,
            stage=restage, given=("Scan" if c == "scan" else "Exscan",
                   (sendbuf, recvbuf, op)))

    def Reduce_scatter_block(self, sendbuf, recvbuf, op=MPI.SUM, *,
                             algorithm="auto"):
        if not self._replayed("Reduce_scatter_block", algorithm, recvbuf,
                              sendbuf, op):
            self._call_reduce_scatter_block(sendbuf, recvbuf, op, algorithm,
                                            False, "Reduce_scatter_block")

    def _call_reduce_scatter_block(self, sendbuf, recvbuf, op, algorithm,
                                   async_op, name=None):
        memo = name and (name, algorithm, recvbuf, sendbuf, op, None)
        c = "reduce_scatter_block"
        where = self._where(c)
        mop, why = self._mpi_op(op, where)
        size = self._engine.size
        inplace = is_in_place(sendbuf)
        r = message(recvbuf, readonly=False, blocks=size if inplace else 1,
                    where=where)
        s = None if inplace else \
            message(sendbuf, readonly=True, blocks=size, where=where)
        self._reduction(op, s, r, where)
        send, recv, unstage, restage, staged_why = self._staged(where,
            s, r, reducing=True, read_recv=inplace)
        n = recv.size // size if inplace else recv.size
        if inplace:
            send = recv
        return self._reduce_scatter(
            c, send, recv, n, (n,) * size, mop, algorithm,
            owners_of(sendbuf, recvbuf), async_op, _memo(memo, s, r),
            inplace=inplace, why_native=why or staged_why, unstage=unstage,
            stage=restage,
            given=("Reduce_scatter_block", (sendbuf, recvbuf, op)))

    def Barrier(self, *, algorithm="auto"):
        if not self._replayed("Barrier", algorithm, None):
            self._barrier(algorithm, False,
                          ("Barrier", algorithm, None, None, None, None))


accelerate(Comm)  # blocking calls offer their memo from C (api/faces.py)

# The collective methods a guarded Comm wraps (mpicoll.guard.guarded).
METHODS = {name: row.name for row in COLLECTIVES.values()
           for name in (row.method, row.nonblocking_method,
                        row.method + "_init")}


def _topology_class(mpi4py_class):
    return type(mpi4py_class.__name__, (mpi4py_class, Comm), {
        "__doc__": f"mpicoll.Comm of an MPI.{mpi4py_class.__name__}.",
        "__module__": __name__, **constructors(mpi4py_class, own=True)})


_WITH_TOPOLOGY = {k: _topology_class(k) for k in (
    MPI.Cartcomm, MPI.Graphcomm, MPI.Distgraphcomm)}


def _wrapped(cls: type, comm: MPI.Intracomm, settings: Settings) -> Comm:
    """``cls`` (``Comm`` or a subclass) of ``comm``'s handle: the class of
    its topology, guarded as ``settings`` say."""
    if cls is Comm:  # keep the topology's methods (Get_coords, ...)
        for topology, with_topology in _WITH_TOPOLOGY.items():
            if isinstance(comm, topology):
                cls = with_topology
    if settings.guard.on:
        cls = guarded_class(cls, METHODS)
    self = mpi4py_class_of(cls).__new__(cls, comm)
    self._settings = settings
    return self


def _memo(memo, *messages):
    """``memo``, unless a message is staged (derived datatypes are not
    replayed)."""
    if memo is None or any(m is not None and m.derived for m in messages):
        return None
    return memo
