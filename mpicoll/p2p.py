"""Point-to-point: mpi4py's buffer calls, checked, and torch-style arrays.

Unlike collectives, point-to-point messages travel on the caller's own
communicator, not the library's private duplicate: a message sent through
``mpicoll.Comm`` must match a receive posted by plain mpi4py code, and the
other way round. Arguments are checked first (peer, tag, buffer), then the
call goes to the MPI library with the caller's own buffer specification,
so datatypes and ``status`` behave exactly as in mpi4py. Messages above
2**31-1 elements rely on mpi4py 4's MPI-4 large-count calls. Device
buffers (CuPy) go to MPI as they are on a CUDA-aware library and through
pinned host copies otherwise (see "device buffers" below).

:class:`PointToPoint` is a mixin of :class:`mpicoll.Comm`; it expects
``self.mpi``, ``self.rank``, ``self.size``, ``self._buffer`` and
``self._where``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from mpi4py import MPI

from mpicoll.cuda import cuda_aware, placement
from mpicoll.devicecall import hold_until
from mpicoll.errors import InvalidArgumentError
from mpicoll.work import Work


class P2POp(NamedTuple):
    """One operation of :meth:`PointToPoint.batch_isend_irecv`, as in
    torch.distributed: ``op`` is ``"isend"`` or ``"irecv"``."""

    op: str
    x: np.ndarray
    peer: int
    tag: int = 0


class PointToPoint:
    # ---------------------------------------------------------- checks

    def _peer(self, peer, call: str, *, receiving: bool) -> int:
        wild = (MPI.ANY_SOURCE,) if receiving else ()
        if isinstance(peer, (int, np.integer)) and (
                0 <= peer < self.size or peer == MPI.PROC_NULL
                or peer in wild):
            return int(peer)
        raise InvalidArgumentError(
            f"{'source' if receiving else 'dest'} {peer!r} is not a rank of "
            f"this communicator (size {self.size})", **self._where(call))

    def _tag(self, tag, call: str, *, receiving: bool) -> int:
        ub = self.mpi.Get_attr(MPI.TAG_UB)
        if isinstance(tag, (int, np.integer)) and (
                0 <= tag <= ub or (receiving and tag == MPI.ANY_TAG)):
            return int(tag)
        raise InvalidArgumentError(
            f"tag {tag!r} is outside 0..{ub}", **self._where(call))

    def _checked_send(self, buf, dest, tag, call):
        """``(flat view of buf, dest, tag)``, checked."""
        return self._buffer(buf, call, "buf"), \
            self._peer(dest, call, receiving=False), \
            self._tag(tag, call, receiving=False)

    def _checked_recv(self, buf, source, tag, call):
        """``(flat view of buf, source, tag)``, checked."""
        return self._buffer(buf, call, "buf", writable=True), \
            self._peer(source, call, receiving=True), \
            self._tag(tag, call, receiving=True)

    def _request(self, call: str, request: MPI.Request, keep,
                 finish=None) -> Work:
        return Work(where=self._where(call), request=request, keep=keep,
                    finish=finish)

    # ------------------------------------------------ device buffers
    #
    # A device buffer is handed to MPI once the caller's current stream has
    # finished (its kernels may write or read it): on CUDA-aware MPI as it
    # is, otherwise through a pinned host copy, copied back to the device
    # on the caller's stream after a receive. Point-to-point calls block
    # the host on the caller's stream; collectives do not.

    @staticmethod
    def _outgoing(buf, flat):
        """What MPI sends for ``buf`` (``flat``: its parsed view)."""
        where = placement(flat)
        if where is None:
            return buf
        runtime, device = where
        stream = runtime.current_stream(device)
        if cuda_aware():
            stream.synchronize()
            return buf
        host = runtime.pinned_empty(flat.size, flat.dtype)
        runtime.copy_async(host, flat, stream)
        stream.synchronize()
        return host

    @staticmethod
    def _incoming(buf, flat, *, also_sent=False):
        """What MPI receives into for ``buf`` (``flat``: its parsed view),
        and the copy back to the device to run once it has (None: nothing
        to copy). ``also_sent``: the host copy starts as ``buf``'s data
        (Sendrecv_replace)."""
        where = placement(flat)
        if where is None:
            return buf, None
        runtime, device = where
        stream = runtime.current_stream(device)
        host = None if cuda_aware() else \
            runtime.pinned_empty(flat.size, flat.dtype)
        if host is not None and also_sent:
            runtime.copy_async(host, flat, stream)
        stream.synchronize()
        if host is None:
            return buf, None

        def copy_back():
            stream = runtime.current_stream(device)
            runtime.copy_async(flat, host, stream)
            copied = runtime.new_event(device)
            copied.record(stream)
            hold_until(copied, (host, flat))

        return host, copy_back

    # ---------------------------------------------------- buffer face

    def Send(self, buf, dest, tag=0):
        flat, dest, tag = self._checked_send(buf, dest, tag, "send")
        self.mpi.Send(self._outgoing(buf, flat), dest, tag)

    def Recv(self, buf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=None):
        flat, source, tag = self._checked_recv(buf, source, tag, "recv")
        into, copy_back = self._incoming(buf, flat)
        self.mpi.Recv(into, source, tag, status)
        if copy_back is not None:
            copy_back()

    def Isend(self, buf, dest, tag=0) -> Work:
        flat, dest, tag = self._checked_send(buf, dest, tag, "isend")
        sent = self._outgoing(buf, flat)
        return self._request("isend", self.mpi.Isend(sent, dest, tag),
                             (buf, sent))

    def Irecv(self, buf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG) -> Work:
        flat, source, tag = self._checked_recv(buf, source, tag, "irecv")
        into, copy_back = self._incoming(buf, flat)
        return self._request("irecv", self.mpi.Irecv(into, source, tag),
                             (buf, into), copy_back)

    def Sendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None,
                 source=MPI.ANY_SOURCE, recvtag=MPI.ANY_TAG, status=None):
        sflat, dest, sendtag = self._checked_send(sendbuf, dest, sendtag,
                                                  "sendrecv")
        rflat, source, recvtag = self._checked_recv(recvbuf, source,
                                                    recvtag, "sendrecv")
        into, copy_back = self._incoming(recvbuf, rflat)
        self.mpi.Sendrecv(self._outgoing(sendbuf, sflat), dest, sendtag,
                          into, source, recvtag, status)
        if copy_back is not None:
            copy_back()

    def Sendrecv_replace(self, buf, dest, sendtag=0, source=MPI.ANY_SOURCE,
                         recvtag=MPI.ANY_TAG, status=None):
        _, dest, sendtag = self._checked_send(buf, dest, sendtag,
                                              "sendrecv_replace")
        flat, source, recvtag = self._checked_recv(buf, source, recvtag,
                                                   "sendrecv_replace")
        into, copy_back = self._incoming(buf, flat, also_sent=True)
        self.mpi.Sendrecv_replace(into, dest, sendtag, source, recvtag,
                                  status)
        if copy_back is not None:
            copy_back()

    # --------------------------------------------- array face (torch-style)

    def send(self, x, dst, tag=0) -> None:
        """Send array ``x`` to rank ``dst``."""
        self.Send(self._array(x, "send", "x", writable=False), dst, tag)

    def recv(self, x, src=None, tag=None) -> int:
        """Receive into ``x`` from ``src`` (any rank if None); returns the
        sender's rank, as torch.distributed does."""
        status = MPI.Status()
        self.Recv(self._array(x, "recv", "x"),
                  MPI.ANY_SOURCE if src is None else src,
                  MPI.ANY_TAG if tag is None else tag, status)
        return status.Get_source()

    def isend(self, x, dst, tag=0) -> Work:
        return self.Isend(self._array(x, "isend", "x", writable=False), dst,
                          tag)

    def irecv(self, x, src=None, tag=None) -> Work:
        return self.Irecv(self._array(x, "irecv", "x"),
                          MPI.ANY_SOURCE if src is None else src,
                          MPI.ANY_TAG if tag is None else tag)

    def batch_isend_irecv(self, ops) -> list[Work]:
        """Post every :class:`P2POp` (all checked before any is posted) and
        return their Works, in order."""
        for op in ops:
            if op.op not in ("isend", "irecv"):
                raise InvalidArgumentError(
                    f"P2POp.op must be 'isend' or 'irecv', got {op.op!r}",
                    **self._where("batch_isend_irecv"))
            if op.op == "isend":
                self._checked_send(op.x, op.peer, op.tag, "batch_isend_irecv")
            else:
                self._checked_recv(op.x, op.peer, op.tag, "batch_isend_irecv")
        return [getattr(self, op.op)(op.x, op.peer, op.tag) for op in ops]
