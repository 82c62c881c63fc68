"""Point-to-point: mpi4py's buffer calls, checked, and torch-style arrays.

Unlike collectives, point-to-point messages travel on the caller's own
communicator, not the library's private duplicate: a message sent through
``mpicoll.Comm`` must match a receive posted by plain mpi4py code, and the
other way round. Arguments are checked first (peer, tag, buffer), then the
call goes to the MPI library with the caller's own buffer specification,
so datatypes and ``status`` behave exactly as in mpi4py. Messages above
2**31-1 elements rely on mpi4py 4's MPI-4 large-count calls.

:class:`PointToPoint` is a mixin of :class:`mpicoll.Comm`; it expects
``self.mpi``, ``self.rank``, ``self.size``, ``self._buffer`` and
``self._where``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from mpi4py import MPI

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
        self._buffer(buf, call, "buf")
        return self._peer(dest, call, receiving=False), \
            self._tag(tag, call, receiving=False)

    def _checked_recv(self, buf, source, tag, call):
        self._buffer(buf, call, "buf", writable=True)
        return self._peer(source, call, receiving=True), \
            self._tag(tag, call, receiving=True)

    def _request(self, call: str, request: MPI.Request, keep) -> Work:
        return Work(where=self._where(call), request=request, keep=keep)

    # ---------------------------------------------------- buffer face

    def Send(self, buf, dest, tag=0):
        dest, tag = self._checked_send(buf, dest, tag, "send")
        self.mpi.Send(buf, dest, tag)

    def Recv(self, buf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=None):
        source, tag = self._checked_recv(buf, source, tag, "recv")
        self.mpi.Recv(buf, source, tag, status)

    def Isend(self, buf, dest, tag=0) -> Work:
        dest, tag = self._checked_send(buf, dest, tag, "isend")
        return self._request("isend", self.mpi.Isend(buf, dest, tag), (buf,))

    def Irecv(self, buf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG) -> Work:
        source, tag = self._checked_recv(buf, source, tag, "irecv")
        return self._request("irecv", self.mpi.Irecv(buf, source, tag),
                             (buf,))

    def Sendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None,
                 source=MPI.ANY_SOURCE, recvtag=MPI.ANY_TAG, status=None):
        dest, sendtag = self._checked_send(sendbuf, dest, sendtag,
                                           "sendrecv")
        source, recvtag = self._checked_recv(recvbuf, source, recvtag,
                                             "sendrecv")
        self.mpi.Sendrecv(sendbuf, dest, sendtag, recvbuf, source, recvtag,
                          status)

    def Sendrecv_replace(self, buf, dest, sendtag=0, source=MPI.ANY_SOURCE,
                         recvtag=MPI.ANY_TAG, status=None):
        dest, sendtag = self._checked_send(buf, dest, sendtag,
                                           "sendrecv_replace")
        source, recvtag = self._checked_recv(buf, source, recvtag,
                                             "sendrecv_replace")
        self.mpi.Sendrecv_replace(buf, dest, sendtag, source, recvtag,
                                  status)

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
