"""The library's private state for one user communicator.

Like mpi4py's ``commctx`` and mpi4jax: library traffic runs on a ``Dup`` of
the user's communicator, so it can never match a message of the user's, and
each hand-built collective call takes the next tag of a rolling counter, so
two nonblocking collectives in flight never match each other's messages.
Persistent collectives take one tag each, for good, from the upper half of
the tag space (their runs never overlap, so one tag serves them all, and
their messages are persistent requests made once). (Every rank calls
collectives, and prepares persistent ones, in the same order, as MPI
requires, so the counters agree.)

The context is cached on the user's communicator as an MPI attribute: every
``mpicoll.Comm`` wrapping the same communicator shares one duplicate and one
tag counter.

It also caches compiled plans: a plan binds a schedule to the caller's
buffers (views, reduction callables and a scratch array), and rebinding
costs microseconds, which is the whole budget of a small message. Entries
are keyed by the identity of the caller's buffer objects and hold them, so
an entry can never point at freed memory; the cache is small (``PLANS``
entries), so at most that many dropped buffers stay alive.

When a buffer is big enough to hold a message over MPI's ``int`` count
limit (2**31 - 1 bytes: messages travel as bytes), the schedule's long
messages are split into chunks before binding
(:mod:`mpicoll.schedule.chunk`); smaller calls pay one comparison.

For device arrays it owns the communication streams, a pool per device
(:meth:`Context.streams`), and compiles plans for them with
:mod:`mpicoll.device.steps` (scratch on the device, pinned host mirrors
when staging), keyed also by the device, the stream and the staging
mode.

Finally it knows which ranks share a node (:attr:`Context.nodes`), and
caches the node-local and cross-node communicators built from that, all on
first use: topology-aware algorithms and ``Comm.node`` / ``Comm.leaders``
read them from here; and, for a Cartesian communicator, its dimensions
(:attr:`Context.dims`), which Cartesian algorithms (the torus allreduce)
run on.
"""

from __future__ import annotations

import os
from collections import OrderedDict

import numpy as np
from mpi4py import MPI

from mpicoll.guard import deadline, dump, exchange
from mpicoll.guard.recorder import Recorder
from mpicoll.guard.watchdog import Asking
from mpicoll.device.cuda import copyto, empty_like
from mpicoll.device.rules import DeviceTarget, hold_until
from mpicoll.errors import InvalidArgumentError
from mpicoll.schedule.chunk import MAX_MESSAGE_BYTES, element_limit, split_messages
from mpicoll.device.steps import compile_device
from mpicoll.device.streams import StreamPool
from mpicoll.device.memory import address
from mpicoll.engine.executor import compile_plan, needs_progress
from mpicoll.schedule.bind import Step, bind
from mpicoll.engine.rebind import Rebinding

PLANS = 16
_KEYVAL = MPI.Comm.Create_keyval()


class CompiledPlan:
    """Steps bound to specific buffers; ``busy`` while a nonblocking call
    runs them (a second concurrent call then binds its own). A device
    plan's ``end`` is the event after its last device work (its scratch
    and mirrors live in the steps' views). ``background``: a nonblocking
    host run is handed to the progress thread
    (:func:`~mpicoll.engine.executor.needs_progress`). ``execution``:
    the :class:`~mpicoll.engine.executor.Execution` of its last
    nonblocking host run, restarted (on the new call's tag) by the next
    one instead of making another (:meth:`mpicoll.engine.engine.Engine.launch`);
    never shared by two runs, since a run holds the plan ``busy`` until it
    completes (one that failed never releases it); it goes with the plan
    (evicted from the cache, or the communicator freed)."""

    __slots__ = ("background", "busy", "end", "execution", "owners",
                 "steps")

    def __init__(self, steps: tuple[Step, ...], owners: tuple,
                 end=None, background: bool = True) -> None:
        self.steps = steps
        self.owners = owners  # the caller's objects, kept alive
        self.busy = False
        self.end = end
        self.background = background
        self.execution = None


class Context:
    def __init__(self, comm: MPI.Comm, ranks_per_node: int | None,
                 bound=None) -> None:
        self.ranks_per_node = ranks_per_node
        # A plain mpi4py communicator: the caller's may be an mpicoll.Comm,
        # whose Dup is one too, and whose collectives would come back here.
        if bound is None:
            dup = MPI.Intracomm.Dup(comm)
        else:  # under a deadline: bound(request, what) waits
            dup, request = MPI.Intracomm.Idup(comm)
            bound(request, "creating mpicoll's private communicator")
        self.comm = MPI.Intracomm(dup)
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        # MPI attaches TAG_UB to COMM_WORLD (Open MPI to it and its
        # duplicates only; MPICH to every communicator).
        tag_ub = min(int(MPI.COMM_WORLD.Get_attr(MPI.TAG_UB)), 1 << 30)
        # The two highest tags are the watchdog's (mpicoll.guard.watchdog):
        # where-are-you queries and their answers; schedules roll below.
        # Calls roll through the lower half, persistent requests the upper.
        self.monitor_tags = (tag_ub, tag_ub - 1)
        self._tag_ub = (tag_ub - 2) // 2
        self._tag = 0
        self._persistent_tag = self._tag_ub
        #: the flight recorder (call numbers, the blocked call, the ring)
        self.recorder = Recorder.from_environment()
        self.trace_id = dump.register(self.recorder, comm)
        self._watched = None  # under the watch thread's deadline
        self._plans: OrderedDict = OrderedDict()
        self._copies: OrderedDict = OrderedDict()  # see input_copy
        self._nodes: tuple[int, ...] | None = None
        self._node_comm: MPI.Intracomm | None = None
        self._leader_comm: MPI.Intracomm | None = None
        self._streams: dict[tuple, object] = {}
        #: The dimensions of a Cartesian communicator (``Create_cart``, an
        #: ``mpicoll.Mesh``), MPI's order; None for any other. Local.
        self.dims: tuple[int, ...] | None = None
        if comm.Get_topology() == MPI.CART:
            self.dims = tuple(MPI.Cartcomm(comm).Get_topo()[0])

    def streams(self, runtime, device: int) -> StreamPool:
        """This communicator's streams on ``device``, created on first
        use."""
        key = (id(runtime), device)
        pool = self._streams.get(key)
        if pool is None or pool.runtime is not runtime:  # an id reused
            pool = self._streams[key] = StreamPool(runtime, device)
        return pool

    def next_tag(self) -> int:
        """The tag of the next hand-built call."""
        self._tag = self._tag + 1 if self._tag < self._tag_ub else 1
        return self._tag

    def persistent_tag(self) -> int:
        """The tag of the next persistent hand-built collective (after
        ``2**29`` of them, the first again)."""
        top = self.monitor_tags[1] - 1
        self._persistent_tag = self._persistent_tag + 1 \
            if self._persistent_tag < top else self._tag_ub + 1
        return self._persistent_tag

    def plan(self, alg, count, root, op, send: np.ndarray, recv: np.ndarray,
             owners: tuple,
             device: DeviceTarget | None = None) -> CompiledPlan:
        """The compiled plan of ``alg`` on these buffers, cached.

        The memory a plan is bound to keys the cache: ``send``'s and
        ``recv``'s addresses, not the objects, so a new view of the same
        buffer (a device array's, each call) finds its plan, and scratch
        made anew for a call (a derived datatype packed, an in-place
        all-to-all's input copy) never finds an older call's. A cached
        plan holds its arrays, so an address cannot be reused while its
        plan is cached. ``owners`` are the caller's objects ``send`` and
        ``recv`` view, kept with the plan. ``device`` says where device
        arrays run.
        """
        key = (alg, count, root, id(op), send.dtype.char, recv.dtype.char,
               send.shape[0], recv.shape[0], address(send), address(recv),
               device and device[1:])
        entry = self._plans.get(key)
        if entry is not None and not entry.busy:
            self._plans.move_to_end(key)
            return entry
        schedule, arrays = self._arrays(alg, count, root, op, send, recv)
        if device is None:
            steps = compile_plan(bind(schedule, arrays, op))
            entry = CompiledPlan(steps, owners,
                                 background=needs_progress(steps))
        else:
            entry = self._device_plan(schedule, arrays, op, owners, device)
        if key not in self._plans or not self._plans[key].busy:
            self._plans[key] = entry
            self._plans.move_to_end(key)
            while len(self._plans) > PLANS:
                _, dropped = self._plans.popitem(last=False)
                hold_until(dropped.end, (dropped,))
        return entry

    def input_copy(self, x):
        """A copy of ``x`` (a flat view) in the same memory, for a call
        whose buffer is both its input and its output (an in-place
        all-to-all sends every block it overwrites). The same array for
        the same buffer call after call, so that a plan bound to it (with
        its pinned mirrors, when staged) is found again; written from
        ``x`` here, and again before every run by the call's ``stage``.
        At most :data:`PLANS` kept, the least recently used dropped."""
        key = (address(x), x.nbytes, x.dtype.str, type(x))
        copy = self._copies.pop(key, None)
        if copy is None:
            copy = empty_like(x, x.shape[0])
        self._copies[key] = copy
        while len(self._copies) > PLANS:
            self._copies.popitem(last=False)
        copyto(copy, x)
        return copy

    def rebinding(self, alg, count, root, op, send: np.ndarray,
                  recv: np.ndarray) -> Rebinding:
        """``alg``'s host plan compiled on ``send`` and ``recv`` and a
        scratch array of its own, to be bound again to arrays alike to
        them (:class:`~mpicoll.engine.rebind.Rebinding`); not cached
        here (:mod:`mpicoll.engine.likeness` keeps it)."""
        schedule, arrays = self._arrays(alg, count, root, op, send, recv)
        return Rebinding(compile_plan(bind(schedule, arrays, op)), send,
                         recv)

    def _arrays(self, alg, count, root, op, send, recv) -> tuple:
        """``(schedule, arrays)``: ``alg``'s schedule of this rank for
        these buffers (long messages split) and the arrays it binds to,
        with a new scratch array."""
        # Only topology-aware algorithms ask for the node map: finding it
        # is collective the first time (every rank plans the same first
        # call). It never changes for a context, so plan keys leave it out.
        schedule = alg.schedule(self.rank, self.size, count, root=root,
                                commutative=op is None or op.commutative,
                                nodes=self.nodes if alg.topology else None,
                                dims=self.dims)
        itemsize = send.dtype.itemsize
        # No message is longer than the largest buffer it lives in.
        if max(send.shape[0], recv.shape[0],
               schedule.tmp) * itemsize > MAX_MESSAGE_BYTES:
            schedule = split_messages(schedule, element_limit(itemsize))
        return schedule, {"send": send, "recv": recv,
                          "tmp": empty_like(send, schedule.tmp),
                          "sync": np.empty(0, np.uint8)}

    @staticmethod
    def _device_plan(schedule, arrays, op, owners,
                     device: DeviceTarget) -> CompiledPlan:
        runtime, where, stream, staged = device
        mirrors = None
        if staged:
            mirrors = {name: runtime.pinned_empty(a.shape[0], a.dtype)
                       for name, a in arrays.items() if name != "sync"}
            mirrors["sync"] = arrays["sync"]
        steps, end = compile_device(schedule, arrays, op, runtime, where,
                                    stream, mirrors)
        return CompiledPlan(steps, owners, end)

    # ------------------------------------------------------------ nodes

    @property
    def nodes(self) -> tuple[int, ...]:
        """The node index of every rank, nodes numbered 0.. in order of
        their lowest rank: ``(0, 0, 1, 1, 2)`` for 5 ranks in nodes of 2.

        Computed on first use and cached. With ``MPICOLL_RANKS_PER_NODE=k``
        (read when the context was created) node ``i`` is ranks ``i*k`` to
        ``i*k + k - 1``, with no communication. Otherwise the ranks that
        share memory (``Split_type(COMM_TYPE_SHARED)``) form a node: one
        ``Split_type`` and one small allgather, collective over the
        communicator on first use.
        """
        if self._nodes is None:
            k = self.ranks_per_node
            if k is not None:
                self._nodes = tuple(r // k for r in range(self.size))
            else:
                with self.recorder.step("finding the ranks of each node"):
                    node = self.comm.Split_type(MPI.COMM_TYPE_SHARED,
                                                key=self.rank)
                    node_group = node.Get_group()
                    group = self.comm.Get_group()
                    lowest = node_group.Translate_ranks([0], group)[0]
                    node_group.Free()
                    group.Free()
                    lowests = exchange.allgather(self.comm, lowest)
                index = {r: i for i, r in enumerate(sorted(set(lowests)))}
                self._nodes = tuple(index[r] for r in lowests)
                self._node_comm = node
        return self._nodes

    @property
    def node_comm(self) -> MPI.Intracomm:
        """The ranks of this rank's node, in rank order (a communicator of
        the library's own); collective on first use (one ``Split`` when
        ``MPICOLL_RANKS_PER_NODE`` is set, else what :attr:`nodes` costs)."""
        nodes = self.nodes
        if self._node_comm is None:
            self._node_comm = self.comm.Split(nodes[self.rank], self.rank)
        return self._node_comm

    @property
    def leader_comm(self) -> MPI.Intracomm:
        """The lowest rank of each node, in rank order; ``MPI.COMM_NULL``
        on the other ranks. Collective on first use: one ``Split`` (after
        what :attr:`nodes` costs)."""
        if self._leader_comm is None:
            nodes = self.nodes
            first = self.rank == nodes.index(nodes[self.rank])
            self._leader_comm = self.comm.Split(
                0 if first else MPI.UNDEFINED, self.rank)
        return self._leader_comm

    def watch(self, timeout: float) -> None:
        """Put this communicator under the watch thread's deadline
        (:mod:`mpicoll.guard.deadline`), once."""
        if self._watched is None:
            self._watched = deadline.watch(
                Asking(self.comm, self.rank, self.monitor_tags,
                       self.recorder), timeout, {"rank": self.rank})

    def free(self) -> None:
        if self._watched is not None:
            deadline.unwatch(self._watched)
            self._watched = None
        dump.unregister(self.recorder)
        for entry in self._plans.values():
            hold_until(entry.end, (entry,))
        self._plans.clear()
        self._copies.clear()
        for sub in (self._node_comm, self._leader_comm):
            if sub is not None and sub != MPI.COMM_NULL:
                forget(sub)
                sub.Free()
        self._node_comm = self._leader_comm = None
        if self.comm != MPI.COMM_NULL:
            self.comm.Free()


def ranks_per_node(rank: int) -> int | None:
    """``MPICOLL_RANKS_PER_NODE`` as a positive int, None if unset: a
    single machine then behaves as nodes of that many consecutive ranks."""
    text = os.environ.get("MPICOLL_RANKS_PER_NODE", "").strip()
    if not text:
        return None
    try:
        k = int(text)
    except ValueError:
        k = 0
    if k < 1:
        raise InvalidArgumentError(
            f"MPICOLL_RANKS_PER_NODE must be a positive integer, got {text!r}",
            rank=rank, collective="mpicoll.Comm")
    return k


def context_of(comm: MPI.Comm, ranks_per_node: int | None = None,
               bound=None) -> Context:
    """The shared context of ``comm``, created on first use (collective:
    every rank of ``comm`` must get here the first time together), with
    ``ranks_per_node`` (:func:`ranks_per_node`) then; ``bound(request,
    what)``, if given, waits for its private duplicate under a deadline
    (:func:`mpicoll.guard.watchdog.bounded`)."""
    ctx = comm.Get_attr(_KEYVAL)
    if ctx is None:
        ctx = Context(comm, ranks_per_node, bound)
        comm.Set_attr(_KEYVAL, ctx)
    return ctx


def forget(comm: MPI.Comm) -> None:
    """Free ``comm``'s context, if it has one."""
    ctx = comm.Get_attr(_KEYVAL)
    if ctx is not None:
        comm.Delete_attr(_KEYVAL)
        ctx.free()
