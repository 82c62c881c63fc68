"""``mpicoll.ProcessGroup``: torch.distributed's calls on an MPI communicator.

    pg = mpicoll.ProcessGroup(MPI.COMM_WORLD)
    pg.all_reduce(t)                                  # in place, every rank
    work = pg.all_reduce(t, op=mpicoll.ReduceOp.MAX, async_op=True)
    work.wait()
    pg.all_to_all_single(out, t, algorithm="pairwise")

The names, argument order and keywords are torch.distributed's (``src``,
``dst``, ``tensor_list``, ``async_op``, ``output_split_sizes`` ...), with
``algorithm=`` added to every collective. Tensors are NumPy arrays, CuPy
arrays, PyTorch tensors (CPU through DLPack, CUDA through the CUDA array
interface) or anything else exporting DLPack: zero-copy views, so results
land in the caller's tensor. They must be contiguous. Calls whose inputs or
outputs are lists of tensors (``all_gather``, ``gather``, ``scatter``,
``reduce_scatter``, ``all_to_all``) stage them through one flat buffer.

It runs on the engine of :class:`mpicoll.Comm` (``pg.comm``), so both
faces of one communicator share its private duplicate and caches.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from mpi4py import MPI

from mpicoll.api.calls import CallBuilder
from mpicoll.api.comm import Comm
from mpicoll.device.cuda import empty_like
from mpicoll.engine.engine import Call
from mpicoll.guard.guarded import guard_settings, guarded_class
from mpicoll.engine.persistent import PERSISTENT, Persistent
from mpicoll.args.tensors import (
    TensorArguments,
    row_elements,
    stage_tensors,
    unstage_tensors,
)
from mpicoll.api.torch_p2p import TorchPointToPoint
from mpicoll.errors import (
    BufferSpecError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
)
from mpicoll.schedule.layout import inplace_send
from mpicoll.device.memory import same_memory

class ReduceOp(enum.Enum):
    """torch.distributed's ``ReduceOp`` (``op=`` also takes the value
    strings, mpicoll's :class:`~mpicoll.schedule.ops.Op` and ``MPI.Op``)."""

    SUM = "sum"
    PRODUCT = "prod"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"


class P2POp(NamedTuple):
    """One operation of :meth:`ProcessGroup.batch_isend_irecv`, as in
    torch.distributed: ``op`` is ``pg.isend`` / ``pg.irecv`` or their
    names ``"isend"`` / ``"irecv"``."""

    op: object
    tensor: object
    peer: int
    tag: int = 0


class ProcessGroup(TorchPointToPoint, TensorArguments, CallBuilder):
    """torch.distributed's collectives on ``comm`` (an ``MPI.Intracomm``
    or :class:`mpicoll.Comm`; default ``MPI.COMM_WORLD``). Not collective
    to create."""

    guarded = False  # a guarded subclass (mpicoll.guard.guarded) says True

    def __new__(cls, comm: MPI.Comm | None = None, **guard):
        guard = {k: v for k, v in guard.items() if v is not None}
        if cls is ProcessGroup and (
                comm.guarded if isinstance(comm, Comm) and not guard
                else guard_settings(**guard).on):
            cls = guarded_class(cls, METHODS)
        return super().__new__(cls)

    def __init__(self, comm: MPI.Comm | None = None, *, check=None,
                 timeout=None, on_timeout=None) -> None:
        """``check``, ``timeout``, ``on_timeout``: as for
        :class:`mpicoll.Comm`; given, they make a new ``Comm`` of
        ``comm`` with them."""
        guard = {k: v for k, v in (("check", check), ("timeout", timeout),
                                   ("on_timeout", on_timeout))
                 if v is not None}
        if isinstance(comm, Comm) and not guard:
            self.comm = comm
        else:
            self.comm = Comm(comm, **guard)

    @property
    def _engine(self):
        return self.comm._engine

    def rank(self) -> int:
        return self.comm.Get_rank()

    def size(self) -> int:
        return self.comm.Get_size()

    def __repr__(self) -> str:
        return f"<mpicoll.ProcessGroup rank {self.rank()} of {self.size()}>"

    def _replay_or_parse(self, memo, async_op, parse, *args):
        """Make one call: a repeat of a call already checked on these very
        objects (its ``memo``: ``(method, algorithm, buf, a, b, c)``,
        :mod:`mpicoll.engine.replay`) is replayed (blocking) or relaunched
        (``async_op``) without parsing; any other call (a first one, a
        prepared one) is parsed and launched by ``parse(*args, async_op,
        memo)``. Returns what the call returns: None, a
        :class:`~mpicoll.engine.work.Work` or a
        :class:`~mpicoll.engine.persistent.Persistent`."""
        if memo is not None and async_op is not PERSISTENT:
            if not async_op:
                if self._engine.replayed(*memo):
                    return None
            else:
                work = self._engine.restarted(*memo)
                if work is not None:
                    return work
        return parse(*args, async_op, memo)

    def _op_of(self, op, collective):
        return self._op(op.value if isinstance(op, ReduceOp) else op,
                        collective)

    # ------------------------------------------------------ collectives

    def all_reduce(self, tensor, op=ReduceOp.SUM, async_op=False, *,
                   algorithm="auto"):
        """Reduce ``tensor`` across ranks, in place on every rank."""
        return self._replay_or_parse(
            ("all_reduce", algorithm, tensor, op, None, None), async_op,
            self._call_all_reduce, tensor, op, algorithm)

    def _call_all_reduce(self, tensor, op, algorithm, async_op, memo):
        c = "allreduce"
        op = self._op_of(op, c)
        flat = self._tensor(tensor, c, "tensor")
        return self._allreduce(flat, flat, op, algorithm, (tensor,),
                               async_op, memo)

    def reduce(self, tensor, dst=0, op=ReduceOp.SUM, async_op=False, *,
               algorithm="auto"):
        """Reduce ``tensor`` onto ``dst``, in place there; elsewhere
        ``tensor`` is only read."""
        return self._replay_or_parse(
            ("reduce", algorithm, tensor, op, dst, None), async_op,
            self._call_reduce, tensor, dst, op, algorithm)

    def _call_reduce(self, tensor, dst, op, algorithm, async_op, memo):
        c = "reduce"
        op = self._op_of(op, c)
        dst = self._root(dst, c)
        at_root = self._engine.rank == dst
        flat = self._tensor(tensor, c, "tensor", writable=at_root)
        return self._reduce(flat, flat if at_root else flat[:0], op, dst,
                            algorithm, (tensor,), async_op, memo)

    def broadcast(self, tensor, src=0, async_op=False, *, algorithm="auto"):
        """Copy ``src``'s ``tensor`` into every rank's ``tensor``."""
        return self._replay_or_parse(
            ("broadcast", algorithm, tensor, src, None, None), async_op,
            self._call_broadcast, tensor, src, algorithm)

    def _call_broadcast(self, tensor, src, algorithm, async_op, memo):
        c = "bcast"
        src = self._root(src, c)
        return self._bcast(self._tensor(tensor, c, "tensor"), src, algorithm,
                           (tensor,), async_op, memo)

    def all_gather_into_tensor(self, output_tensor, input_tensor,
                               async_op=False, *, algorithm="auto"):
        """Every rank's ``input_tensor`` into ``output_tensor`` (``size``
        times as many elements), in rank order; ``input_tensor`` may be
        ``output_tensor``'s own block (in place)."""
        return self._replay_or_parse(
            ("all_gather_into_tensor", algorithm, output_tensor,
             input_tensor, None, None), async_op,
            self._call_all_gather_into_tensor, output_tensor, input_tensor,
            algorithm)

    def _call_all_gather_into_tensor(self, out, x, algorithm, async_op,
                                     memo):
        c = "allgather"
        send = self._tensor(x, c, "input_tensor", writable=False)
        recv = self._tensor(out, c, "output_tensor")
        self._whole_blocks(recv, send, c, "output_tensor", "input_tensor")
        block = inplace_send(c, recv, self._engine.rank, self._engine.size,
                             send.size)
        inplace = same_memory(block, send)
        return self._gathering(c, block if inplace else send, recv,
                               send.size, 0, algorithm, (out, x), async_op,
                               inplace=inplace, memo=memo)

    def all_gather(self, tensor_list, tensor, async_op=False, *,
                   algorithm="auto"):
        """Every rank's ``tensor`` into ``tensor_list[rank]``. The sizes
        may differ between ranks (an allgatherv: every rank lists the same
        sizes, checked in one small allgather); staged through one flat
        buffer."""
        c = "allgatherv"
        send = self._tensor(tensor, c, "tensor", writable=False)
        flats = self._tensors(tensor_list, c, "tensor_list")
        rank = self._engine.rank
        if flats[0].dtype != send.dtype or flats[rank].size != send.size:
            raise BufferSpecError(
                f"tensor_list[{rank}] must match tensor ({send.size} "
                f"elements of {send.dtype}), and every tensor_list[i] be of "
                f"that dtype", **self._where(c))
        counts = tuple(f.size for f in flats)
        rows, _, _ = self._engine.agree(c, counts)
        self._engine.disagree(c, [
            f"rank {q} lists sizes {list(row)}, rank {rank} {list(counts)}"
            for q, row in enumerate(rows) if row != counts])
        staging = empty_like(send, sum(counts))
        return self._gathering(
            c, send, staging, counts, 0, algorithm,
            (*tensor_list, tensor, staging), async_op, inplace=False,
            finish=unstage_tensors(flats, staging, counts))

    def reduce_scatter_tensor(self, output, input, op=ReduceOp.SUM,
                              async_op=False, *, algorithm="auto"):
        """Reduce ``input`` (``size`` blocks of ``output``'s size) across
        ranks and leave block ``rank`` of the result in ``output``."""
        return self._replay_or_parse(
            ("reduce_scatter_tensor", algorithm, output, input, op, None),
            async_op, self._call_reduce_scatter_tensor, output, input, op,
            algorithm)

    def _call_reduce_scatter_tensor(self, output, input, op, algorithm,
                                    async_op, memo):
        c = "reduce_scatter_block"
        op = self._op_of(op, c)
        send = self._tensor(input, c, "input", writable=False)
        recv = self._tensor(output, c, "output")
        self._whole_blocks(send, recv, c, "input", "output")
        n = recv.size
        return self._reduce_scatter(c, send, recv, n,
                                    (n,) * self._engine.size, op, algorithm,
                                    (output, input), async_op, memo)

    def reduce_scatter(self, output, input_list, op=ReduceOp.SUM,
                       async_op=False, *, algorithm="auto"):
        """Reduce ``input_list[i]`` across ranks into rank ``i``'s
        ``output``; the sizes may differ by ``i`` (a reduce_scatter with
        per-rank counts). The inputs are staged through one flat buffer."""
        c = "reduce_scatter"
        op = self._op_of(op, c)
        recv = self._tensor(output, c, "output")
        flats = self._tensors(input_list, c, "input_list", writable=False)
        counts = tuple(f.size for f in flats)
        if flats[0].dtype != recv.dtype or \
                counts[self._engine.rank] != recv.size:
            raise BufferSpecError(
                f"output must match input_list[{self._engine.rank}] "
                f"({counts[self._engine.rank]} elements of "
                f"{flats[0].dtype})", **self._where(c))
        send, restage = stage_tensors(flats, counts)
        return self._reduce_scatter(c, send, recv, counts, counts, op,
                                    algorithm, (output, *input_list, send),
                                    async_op, stage=restage)

    def gather(self, tensor, gather_list=None, dst=0, async_op=False, *,
               algorithm="auto"):
        """Every rank's ``tensor`` into ``dst``'s ``gather_list`` (``size``
        tensors of ``tensor``'s size; None elsewhere), staged."""
        c = "gather"
        dst = self._root(dst, c)
        send = self._tensor(tensor, c, "tensor", writable=False)
        if self._engine.rank != dst:
            return self._gathering(c, send, send[:0], send.size, dst,
                                   algorithm, (tensor,), async_op,
                                   inplace=False)
        flats = self._tensors(gather_list, c, "gather_list")
        if any(f.size != send.size or f.dtype != send.dtype for f in flats):
            raise BufferSpecError(
                f"gather_list must hold tensors of tensor's size "
                f"({send.size} elements of {send.dtype})", **self._where(c))
        staging = empty_like(send, send.size * self._engine.size)
        return self._gathering(
            c, send, staging, send.size, dst, algorithm,
            (*gather_list, tensor, staging), async_op, inplace=False,
            finish=unstage_tensors(flats, staging, (send.size,) * len(flats)))

    def scatter(self, tensor, scatter_list=None, src=0, async_op=False, *,
                algorithm="auto"):
        """``src``'s ``scatter_list[rank]`` into every rank's ``tensor``
        (``scatter_list``: ``size`` tensors of ``tensor``'s size at
        ``src``, None elsewhere), staged."""
        c = "scatter"
        src = self._root(src, c)
        recv = self._tensor(tensor, c, "tensor")
        restage = None
        if self._engine.rank != src:
            send, owners = recv[:0], (tensor,)
        else:
            flats = self._tensors(scatter_list, c, "scatter_list",
                                  writable=False)
            if any(f.size != recv.size or f.dtype != recv.dtype
                   for f in flats):
                raise BufferSpecError(
                    f"scatter_list must hold tensors of tensor's size "
                    f"({recv.size} elements of {recv.dtype})",
                    **self._where(c))
            send, restage = stage_tensors(flats, (recv.size,) * len(flats))
            owners = (tensor, *scatter_list, send)
        engine = self._engine

        def native(nonblocking, send, recv):
            return engine.prepared("Scatter", nonblocking,
                                   send if engine.rank == src else None,
                                   recv, src)

        return engine.launch(Call(c, algorithm, send, recv, recv.size, None,
                                  src, native, owners, stage=restage),
                             async_op)

    def all_to_all_single(self, output, input, output_split_sizes=None,
                          input_split_sizes=None, async_op=False, *,
                          algorithm="auto"):
        """``input`` cut along its first dimension into ``size`` blocks,
        block ``j`` going to rank ``j``; ``output`` receives block ``i``
        from rank ``i``. Split sizes are rows of the first dimension, as
        in torch (None: equal blocks); with any it is an alltoallv, whose
        counts are checked across ranks."""
        c = "alltoall"
        send = self._tensor(input, c, "input", writable=False)
        recv = self._tensor(output, c, "output")
        if recv.dtype != send.dtype:
            raise BufferSpecError(f"input is {send.dtype} but output is "
                                  f"{recv.dtype}", **self._where(c))
        self._same_memory(send, recv, c)
        size = self._engine.size
        if output_split_sizes is None and input_split_sizes is None:
            if recv.size != send.size or send.size % size:
                raise BufferSpecError(
                    f"input and output must be {size} equal blocks, got "
                    f"{send.size} and {recv.size} elements",
                    **self._where(c))
            engine = self._engine

            def native(nonblocking, send, recv):
                return engine.prepared("Alltoall", nonblocking, send, recv)

            return engine.launch(Call(c, algorithm, send, recv,
                                      send.size // size, None, 0, native,
                                      (output, input)), async_op)
        scounts = self._splits(input_split_sizes, send, row_elements(input),
                               "input_split_sizes")
        rcounts = self._splits(output_split_sizes, recv, row_elements(output),
                               "output_split_sizes")
        return self._alltoallv(send, recv, scounts, rcounts, algorithm,
                               (output, input), async_op)

    def all_to_all(self, output_tensor_list, input_tensor_list,
                   async_op=False, *, algorithm="auto"):
        """``input_tensor_list[j]`` to rank ``j``, into its
        ``output_tensor_list[i]`` from rank ``i`` (sizes may differ; an
        alltoallv, counts checked across ranks); staged."""
        c = "alltoallv"
        ins = self._tensors(input_tensor_list, c, "input_tensor_list",
                            writable=False)
        outs = self._tensors(output_tensor_list, c, "output_tensor_list")
        if ins[0].dtype != outs[0].dtype:
            raise BufferSpecError("input and output tensors must have one "
                                  "dtype", **self._where(c))
        scounts = tuple(f.size for f in ins)
        rcounts = tuple(f.size for f in outs)
        send, restage = stage_tensors(ins, scounts)
        recv = empty_like(send, sum(rcounts))
        return self._alltoallv(
            send, recv, scounts, rcounts, algorithm,
            (*output_tensor_list, *input_tensor_list, send, recv), async_op,
            finish=unstage_tensors(outs, recv, rcounts), stage=restage)

    def scan(self, tensor, op=ReduceOp.SUM, async_op=False, *,
             algorithm="auto"):
        """Inclusive prefix reduction in place: rank r gets t0 op ... op tr
        (MPI_Scan; not in torch.distributed)."""
        return self._scan_tensor("scan", tensor, op, algorithm, async_op)

    def exscan(self, tensor, op=ReduceOp.SUM, async_op=False, *,
               algorithm="auto"):
        """Exclusive prefix reduction in place: rank r > 0 gets
        t0 op ... op t(r-1); rank 0's tensor is left as it was
        (MPI_Exscan; not in torch.distributed)."""
        return self._scan_tensor("exscan", tensor, op, algorithm, async_op)

    def _scan_tensor(self, c, tensor, op, algorithm, async_op):
        op = self._op_of(op, c)
        flat = self._tensor(tensor, c, "tensor")
        return self._scan(c, flat, flat, op, algorithm, (tensor,), async_op)

    def prepare(self, collective: str, *args, **kwargs) -> Persistent:
        """A prepared collective (MPI-4 persistent, :mod:`mpicoll.engine.persistent`):
        ``collective`` names a method of this class (``"all_reduce"``,
        ``"all_gather_into_tensor"``, ...) called with ``args`` and
        ``kwargs`` as usual, but instead of running it returns a
        :class:`~mpicoll.engine.persistent.Persistent` that runs it on each
        ``start()``, completed by ``wait()``; the tensors are read at
        ``start()`` and written by completion, every time."""
        if collective not in METHODS:
            raise InvalidArgumentError(
                f"{collective!r} is not a collective of ProcessGroup "
                f"(one of {', '.join(METHODS)})", **self._where("prepare"))
        if "async_op" in kwargs:
            raise InvalidArgumentTypeError(
                "prepare() takes no async_op: a prepared collective is "
                "started and waited on", **self._where(METHODS[collective]))
        return getattr(self, collective)(*args, async_op=PERSISTENT,
                                         **kwargs)

    def barrier(self, async_op=False, *, algorithm="auto"):
        """Block until every rank has entered the barrier."""
        return self._replay_or_parse(
            ("barrier", algorithm, None, None, None, None), async_op,
            self._barrier, algorithm)


# The collective methods a guarded ProcessGroup wraps (mpicoll.guard.guarded).
METHODS = {
    "all_reduce": "allreduce", "reduce": "reduce", "broadcast": "bcast",
    "all_gather_into_tensor": "allgather", "all_gather": "allgatherv",
    "reduce_scatter_tensor": "reduce_scatter_block",
    "reduce_scatter": "reduce_scatter", "gather": "gather",
    "scatter": "scatter", "all_to_all_single": "alltoall",
    "all_to_all": "alltoallv", "scan": "scan", "exscan": "exscan",
    "barrier": "barrier"}
