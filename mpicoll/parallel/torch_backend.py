"""A torch.distributed backend named ``"mpicoll"``, on MPI through
:class:`mpicoll.ProcessGroup` (needs PyTorch; ``import mpicoll.torch``
registers it).

    import mpicoll.torch
    dist.init_process_group("mpicoll", init_method="mpicoll://")

``mpicoll://`` is a rendezvous that asks MPI (``MPI.COMM_WORLD``) for the
rank and world size and hands torch a ``HashStore``, a store in the
process's own memory: no socket is opened, no address or port needed.
``init_process_group("mpicoll", store=dist.HashStore(), rank=...,
world_size=...)`` is the same with rank and size given by hand; the default
group's rank ``r`` must be ``COMM_WORLD``'s rank ``r`` (checked).

Every group of this backend is an :class:`MpicollBackend`, a Python
``torch.distributed.ProcessGroup`` whose calls run through a
:class:`mpicoll.ProcessGroup` on its own communicator: the world group on a
duplicate of ``COMM_WORLD`` (one ``MPI_Comm_dup`` when made), a
``new_group(ranks)`` (and DeviceMesh's groups) on ``Create_group`` of those
ranks, made by them only. So algorithm rules, ``MPICOLL_<C>_ALGORITHM``
overrides, check mode, deadlines and the flight recorder apply to every
call, and the tensors are used in place (DLPack views, no copy) where
:class:`mpicoll.ProcessGroup` does so.

The collectives run in the background on the group's thread, in call
order (:mod:`mpicoll.parallel.torch_worker`), so that ``async_op=True``
calls and DDP's bucket allreduces overlap the caller's work; a small one
made while the group has nothing queued runs in the caller's thread.
``send`` and ``recv`` are nonblocking (a :class:`Pending` Work, complete
at ``wait``), as torch's are. Calls torch makes on tensor lists of
several tensors per rank (the ``*_coalesced`` ones) make one call per
tensor.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from mpi4py import MPI
from torch.distributed.rendezvous import register_rendezvous_handler

from mpicoll.api.process_group import ProcessGroup, ReduceOp
from mpicoll.errors import InvalidArgumentError, InvalidArgumentTypeError
from mpicoll.parallel.torch_worker import Worker

NAME = "mpicoll"
WORLD = MPI.COMM_WORLD
RedOpType = dist.ReduceOp.RedOpType
OPS = {RedOpType.SUM: ReduceOp.SUM, RedOpType.PRODUCT: ReduceOp.PRODUCT,
       RedOpType.MIN: ReduceOp.MIN, RedOpType.MAX: ReduceOp.MAX,
       RedOpType.BAND: ReduceOp.BAND, RedOpType.BOR: ReduceOp.BOR,
       RedOpType.BXOR: ReduceOp.BXOR}


class Pending(dist._Work):
    """The Work of a send or receive in flight (``MPI_Isend``,
    ``MPI_Irecv``): ``wait`` blocks until it is complete, ``is_completed``
    tests it, and the future completes with them; a receive's status says
    who sent."""

    def __init__(self, request: MPI.Request, tensors) -> None:
        super().__init__()
        self._request, self._tensors = request, tensors
        self._status = MPI.Status()
        self._future = torch.futures.Future()

    def wait(self, timeout=None) -> bool:
        if not self._future.done():
            self._request.Wait(self._status)
            self._future.set_result(self._tensors)
        return True

    def is_completed(self) -> bool:
        if not self._future.done() and self._request.Test(self._status):
            self._future.set_result(self._tensors)
        return self._future.done()

    def get_future(self) -> torch.futures.Future:
        return self._future

    def _source_rank(self) -> int:
        self.wait()
        return self._status.Get_source()


class MpicollBackend(dist.ProcessGroup):
    """torch.distributed's backend calls (the methods C++ and
    ``torch.distributed``'s functions call on a group, with torch's option
    objects) on ``pg``, a :class:`mpicoll.ProcessGroup`. Each returns a
    Work: the :class:`~mpicoll.parallel.torch_worker.Worker`'s (the
    collectives) or a :class:`Pending` (``send``, ``recv``)."""

    def __init__(self, pg: ProcessGroup) -> None:
        super().__init__(pg.rank(), pg.size())
        self.pg = pg
        self.worker = Worker()  # where the collectives run, in order

    def getBackendName(self) -> str:
        return NAME

    # torch keeps a group's name in its C++ backends, which a Python group
    # has none of: DeviceMesh reads it back, so it is kept here.
    def _set_group_name(self, name: str) -> None:
        self._name = name

    @property
    def group_name(self) -> str:
        return self._name

    def shutdown(self) -> None:
        """Free the group's communicator and mpicoll's duplicate of it
        (``destroy_process_group`` calls it on every rank of the group, so
        the collective ``MPI_Comm_free`` matches)."""
        self.worker.stop()
        if self.pg.comm != MPI.COMM_NULL:
            self.pg.comm.Free()

    def _where(self, call: str) -> dict:
        return self.pg._where(call)

    def _op(self, opts, call: str, tensors) -> ReduceOp:
        """mpicoll's op for torch's ``opts.reduceOp``; ``AVG`` is ``SUM``
        followed by :meth:`_average` (floating-point tensors only, as in
        gloo)."""
        op = opts.reduceOp.op
        if op == RedOpType.AVG:
            if not all(t.is_floating_point() or t.is_complex()
                       for t in tensors):
                raise InvalidArgumentTypeError(
                    "ReduceOp.AVG needs floating-point tensors",
                    **self._where(call))
            return ReduceOp.SUM
        if op not in OPS:
            raise InvalidArgumentError(
                f"ReduceOp.{op.name} is not supported by the mpicoll backend: "
                f"use {', '.join(o.name for o in OPS)} or AVG",
                **self._where(call))
        return OPS[op]

    def _average(self, opts, tensors) -> None:
        """Divide the sums of an ``AVG`` by the group's size, in place."""
        if opts.reduceOp.op == RedOpType.AVG:
            for t in tensors:
                t.detach().div_(self.pg.size())

    # ----------------------------------------------------------- reductions

    def allreduce(self, tensors, opts=None):
        """One in-place allreduce per tensor."""
        opts = opts or dist.AllreduceOptions()
        op = self._op(opts, "allreduce", tensors)

        def call():
            for t in tensors:
                self.pg.all_reduce(t.detach(), op)
            self._average(opts, tensors)
        return self.worker.run(call, tensors, tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        """As :meth:`allreduce` (one call per tensor)."""
        return self.allreduce(tensors, opts)

    def reduce(self, tensors, opts):
        op = self._op(opts, "reduce", tensors)

        def call():
            for t in tensors:
                self.pg.reduce(t.detach(), opts.rootRank, op)
            if self.pg.rank() == opts.rootRank:
                self._average(opts, tensors)
        return self.worker.run(call, tensors, tensors)

    def reduce_scatter(self, outputs, input_lists, opts):
        """``reduce_scatter``: inputs staged through one flat buffer (one
        copy in, :meth:`mpicoll.ProcessGroup.reduce_scatter`)."""
        op = self._op(opts, "reduce_scatter", outputs)

        def call():
            for out, ins in zip(outputs, input_lists):
                self.pg.reduce_scatter(out.detach(),
                                       [t.detach() for t in ins], op)
            self._average(opts, outputs)
        return self.worker.run(call, outputs, input_lists)

    def reduce_scatter_single(self, output, input, opts):
        """``reduce_scatter_tensor`` in place in ``output``, no copy."""
        return self.reduce_scatter_single_coalesced([output], [input], opts)

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts):
        """One ``reduce_scatter_tensor`` per pair, no copy."""
        op = self._op(opts, "reduce_scatter", outputs)

        def call():
            for out, x in zip(outputs, inputs):
                self.pg.reduce_scatter_tensor(out.detach(), x.detach(), op)
            self._average(opts, outputs)
        return self.worker.run(call, outputs, inputs)

    # ------------------------------------------------------------ movement

    def broadcast(self, tensors, opts):
        def call():
            for t in tensors:
                self.pg.broadcast(t.detach(), opts.rootRank)
        return self.worker.run(call, tensors, tensors)

    def allgather(self, output_lists, inputs, opts=None):
        """``all_gather``: staged through one flat buffer (one copy out)."""
        def call():
            for outs, x in zip(output_lists, inputs):
                self.pg.all_gather([t.detach() for t in outs], x.detach())
        return self.worker.run(call, output_lists, output_lists)

    allgather_coalesced = allgather

    def all_gather_single(self, output, input, opts=None):
        """``all_gather_into_tensor`` straight into ``output``, no copy."""
        return self.all_gather_single_coalesced([output], [input], opts)

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        """One ``all_gather_into_tensor`` per pair, no copy."""
        def call():
            for out, x in zip(outputs, inputs):
                self.pg.all_gather_into_tensor(out.detach(), x.detach())
        return self.worker.run(call, outputs, outputs)

    def gather(self, output_lists, inputs, opts):
        """``gather``: staged at the root (one copy out)."""
        here = self.pg.rank() == opts.rootRank

        def call():
            self.pg.gather(inputs[0].detach(),
                           [t.detach() for t in output_lists[0]] if here
                           else None, opts.rootRank)
        return self.worker.run(call, output_lists, inputs)

    def scatter(self, outputs, input_lists, opts):
        """``scatter``: staged at the root (one copy in)."""
        here = self.pg.rank() == opts.rootRank

        def call():
            self.pg.scatter(outputs[0].detach(),
                            [t.detach() for t in input_lists[0]] if here
                            else None, opts.rootRank)
        return self.worker.run(call, outputs, outputs)

    def all_to_all_single(self, output, input, output_split_sizes,
                          input_split_sizes, opts=None):
        """``all_to_all_single``: equal blocks, or rows by the split sizes
        (an alltoallv, its counts agreed across ranks); no copy."""
        def call():
            self.pg.all_to_all_single(output.detach(), input.detach(),
                                      output_split_sizes or None,
                                      input_split_sizes or None)
        return self.worker.run(call, [output], [input])

    def alltoall(self, outputs, inputs, opts=None):
        """``all_to_all`` on lists: staged (one copy in, one out)."""
        def call():
            self.pg.all_to_all([t.detach() for t in outputs],
                               [t.detach() for t in inputs])
        return self.worker.run(call, outputs, inputs)

    def barrier(self, opts=None):
        return self.worker.run(self.pg.barrier, [], [])

    # ------------------------------------------------------ point to point

    def send(self, tensors, dst, tag):
        """A nonblocking send (``MPI_Isend``) of ``tensors[0]``."""
        flat, dst, tag = self._p2p("isend", tensors[0], dst, tag, False)
        return Pending(self.pg.comm.Isend(flat, dst, tag), tensors)

    def recv(self, tensors, src, tag):
        """A nonblocking receive (``MPI_Irecv``) into ``tensors[0]``."""
        flat, src, tag = self._p2p("irecv", tensors[0], src, tag, True)
        return Pending(self.pg.comm.Irecv(flat, src, tag), tensors)

    def recv_anysource(self, tensors, tag):
        return self.recv(tensors, None, tag)

    def _p2p(self, call, tensor, peer, tag, receiving):
        """:meth:`mpicoll.ProcessGroup._p2p`'s checks of a CPU tensor."""
        if tensor.device.type != "cpu":
            raise InvalidArgumentError(
                f"the mpicoll backend sends and receives CPU tensors, got "
                f"one on {tensor.device}", **self._where(call))
        return self.pg._p2p(call, tensor.detach(), peer, tag, receiving)


def _communicator(ranks) -> MPI.Intracomm:
    """The communicator of a group of ``COMM_WORLD``'s ``ranks`` (every
    rank: a duplicate of ``COMM_WORLD``); collective over ``ranks`` only."""
    if list(ranks) == list(range(WORLD.size)):
        return WORLD.Dup()
    group = WORLD.Get_group().Incl(list(ranks))
    try:
        return WORLD.Create_group(group)
    finally:
        group.Free()


def create(options, backend_options=None) -> MpicollBackend:
    """torch's creator of a group of this backend (``extended_api``:
    ``options`` holds the group's rank, size and its ranks in the default
    group). torch's ``timeout`` is not used: mpicoll's default deadline
    (``MPICOLL_TIMEOUT``) applies."""
    ranks = list(options.global_ranks_in_group) or list(range(WORLD.size))
    if len(ranks) != options.group_size or \
            ranks[options.group_rank] != WORLD.rank or \
            (dist.is_initialized() and dist.get_rank() != WORLD.rank):
        raise ValueError(
            f"the mpicoll backend needs torch.distributed's ranks to be "
            f"MPI.COMM_WORLD's: this process is COMM_WORLD rank "
            f"{WORLD.rank} but rank {options.group_rank} of a group of "
            f"{options.group_size} ({ranks})")
    return MpicollBackend(ProcessGroup(_communicator(ranks)))


def rendezvous(url: str, **kwargs):
    """The ``mpicoll://`` rendezvous: ``(HashStore, COMM_WORLD's rank,
    its size)``; a ``rank`` or ``world_size`` torch was given must be
    those."""
    query = dict(p.split("=") for p in url.partition("?")[2].split("&") if p)
    for key, value in (("rank", WORLD.rank), ("world_size", WORLD.size)):
        if key in query and int(query[key]) != value:
            raise ValueError(f"init_process_group(init_method='mpicoll://') "
                             f"takes {key} from MPI ({value}), was given "
                             f"{query[key]}")
    yield dist.HashStore(), WORLD.rank, WORLD.size


def register() -> None:
    """Register the backend and the ``mpicoll://`` rendezvous with torch
    (once per process)."""
    if NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(NAME, create, extended_api=True,
                                  devices=["cpu"])
    register_rendezvous_handler(NAME, rendezvous)
