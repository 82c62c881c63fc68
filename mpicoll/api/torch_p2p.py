"""torch.distributed's point-to-point calls on :class:`mpicoll.ProcessGroup`.

``send``, ``recv``, ``isend``, ``irecv`` and ``batch_isend_irecv`` (with
:class:`~mpicoll.api.process_group.P2POp`) go to the communicator itself, so
they match plain mpi4py code's messages, through ``mpicoll.Comm``'s calls
(device buffers staged when MPI is not CUDA-aware); the peer and tag are
checked first, as torch checks them, and a bad one raises before anything
is posted (in a batch: before any of its operations is posted).

A mixin of :class:`mpicoll.ProcessGroup`: it expects ``self.comm``,
``self._engine``, ``self._tensor`` and ``self._where``.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from mpicoll.errors import InvalidArgumentError
from mpicoll.engine.work import Work


class TorchPointToPoint:
    """torch.distributed's point-to-point calls (a mixin)."""


    def send(self, tensor, dst, tag=0) -> None:
        """Send ``tensor`` to rank ``dst``."""
        self.comm.Send(*self._p2p("send", tensor, dst, tag, False))

    def recv(self, tensor, src=None, tag=0) -> int:
        """Receive into ``tensor`` from ``src`` (any rank if None); returns
        the sender's rank, as torch.distributed does."""
        status = MPI.Status()
        self.comm.Recv(*self._p2p("recv", tensor, src, tag, True), status)
        return status.Get_source()

    def isend(self, tensor, dst, tag=0) -> Work:
        flat, dst, tag = self._p2p("isend", tensor, dst, tag, False)
        return self._work("isend", self.comm.Isend(flat, dst, tag), tensor)

    def irecv(self, tensor, src=None, tag=0) -> Work:
        flat, src, tag = self._p2p("irecv", tensor, src, tag, True)
        return self._work("irecv", self.comm.Irecv(flat, src, tag), tensor)

    def batch_isend_irecv(self, p2p_op_list) -> list[Work]:
        """Post every :class:`P2POp` (all checked before any is posted) and
        return their Works, in order."""
        c = "batch_isend_irecv"
        posts = []
        for p in p2p_op_list:
            name = getattr(p.op, "__name__", p.op)
            if name not in ("isend", "irecv"):
                raise InvalidArgumentError(
                    f"P2POp.op must be isend or irecv, got {p.op!r}",
                    **self._where(c))
            posts.append((name, self._p2p(c, p.tensor, p.peer, p.tag,
                                          name == "irecv"), p.tensor))
        return [self._work(name, getattr(self.comm, name.capitalize())(*args),
                           tensor) for name, args, tensor in posts]

    def _p2p(self, call, tensor, peer, tag, receiving) -> tuple:
        """``(flat view, peer, tag)``: a receive's ``None`` peer is any
        source; a peer must be a rank here (or ``MPI.PROC_NULL``), a tag in
        0..``MPI.TAG_UB``."""
        flat = self._tensor(tensor, call, "tensor", writable=receiving)
        if receiving and peer is None:
            peer = MPI.ANY_SOURCE
        wild = (MPI.ANY_SOURCE, MPI.PROC_NULL) if receiving else \
            (MPI.PROC_NULL,)
        if not (_is_int(peer) and (0 <= peer < self._engine.size
                                   or peer in wild)):
            raise InvalidArgumentError(
                f"{'src' if receiving else 'dst'} {peer!r} is not a rank of "
                f"this group (size {self._engine.size})", **self._where(call))
        ub = MPI.COMM_WORLD.Get_attr(MPI.TAG_UB)  # set on COMM_WORLD only
        if not (_is_int(tag) and 0 <= tag <= ub):
            raise InvalidArgumentError(f"tag {tag!r} is outside 0..{ub}",
                                       **self._where(call))
        return flat, int(peer), int(tag)

    def _work(self, call, request, tensor) -> Work:
        """A request as a :class:`Work` (a device receive's Work already
        is one: it copies the message back when complete)."""
        if isinstance(request, Work):
            return request
        return Work(where=self._where(call), request=request, keep=(tensor,))


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)
