"""Point-to-point on :class:`mpicoll.Comm`: mpi4py's buffer calls, plus
device buffers on an MPI that is not CUDA-aware.

Messages travel on the caller's own communicator, not the library's
private duplicate: a message sent through ``mpicoll.Comm`` matches a
receive posted by plain mpi4py code, and the other way round. A host
buffer goes straight to mpi4py's own call (same checks, same exceptions,
same ``Request``); a device buffer (CuPy, or anything with
``__cuda_array_interface__``) goes to MPI as it is on a CUDA-aware
library, and otherwise through a pinned host copy, copied back to the
device after a receive; its nonblocking calls return a
:class:`~mpicoll.engine.work.Work` that runs that copy when completed.

:class:`PointToPoint` is a mixin of :class:`mpicoll.Comm`.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from mpicoll.device.cuda import cuda_aware, location, runtime_of
from mpicoll.device.rules import hold_until
from mpicoll.args.message import message
from mpicoll.engine.work import Work


def on_device(buf):
    """A flat device view of buffer specification ``buf``, or None when it
    is in host memory (then mpi4py takes it as it is)."""
    obj = buf[0] if type(buf) in (list, tuple) and buf else buf
    if type(obj) is np.ndarray or runtime_of(obj) is None:
        return None
    return message(buf, readonly=True,
                   where={"collective": "point-to-point"}).array


class PointToPoint:
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
        where = location(flat)
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
        where = location(flat)
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
        flat = on_device(buf)
        if flat is None:
            return super().Send(buf, dest, tag)
        return super().Send(self._outgoing(buf, flat), dest, tag)

    def Recv(self, buf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=None):
        flat = on_device(buf)
        if flat is None:
            return super().Recv(buf, source, tag, status)
        into, copy_back = self._incoming(buf, flat)
        super().Recv(into, source, tag, status)
        if copy_back is not None:
            copy_back()
        return None

    def Isend(self, buf, dest, tag=0):
        flat = on_device(buf)
        if flat is None:
            return super().Isend(buf, dest, tag)
        sent = self._outgoing(buf, flat)
        return Work(where={"rank": self.Get_rank(), "collective": "isend"},
                    request=super().Isend(sent, dest, tag), keep=(buf, sent))

    def Irecv(self, buf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG):
        flat = on_device(buf)
        if flat is None:
            return super().Irecv(buf, source, tag)
        into, copy_back = self._incoming(buf, flat)
        return Work(where={"rank": self.Get_rank(), "collective": "irecv"},
                    request=super().Irecv(into, source, tag),
                    keep=(buf, into), finish=copy_back)

    def Sendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None,
                 source=MPI.ANY_SOURCE, recvtag=MPI.ANY_TAG, status=None):
        sflat, rflat = on_device(sendbuf), on_device(recvbuf)
        if sflat is None and rflat is None:
            return super().Sendrecv(sendbuf, dest, sendtag, recvbuf, source,
                                    recvtag, status)
        copy_back = None
        if rflat is not None:
            recvbuf, copy_back = self._incoming(recvbuf, rflat)
        if sflat is not None:
            sendbuf = self._outgoing(sendbuf, sflat)
        super().Sendrecv(sendbuf, dest, sendtag, recvbuf, source, recvtag,
                         status)
        if copy_back is not None:
            copy_back()
        return None

    def Sendrecv_replace(self, buf, dest, sendtag=0, source=MPI.ANY_SOURCE,
                         recvtag=MPI.ANY_TAG, status=None):
        flat = on_device(buf)
        if flat is None:
            return super().Sendrecv_replace(buf, dest, sendtag, source,
                                            recvtag, status)
        into, copy_back = self._incoming(buf, flat, also_sent=True)
        super().Sendrecv_replace(into, dest, sendtag, source, recvtag,
                                 status)
        if copy_back is not None:
            copy_back()
        return None
