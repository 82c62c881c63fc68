"""mpi4py's persistent collectives on :class:`mpicoll.Comm` (MPI-4).

Each ``X_init`` has mpi4py's signature plus ``algorithm=``, parses its
arguments with the same parser as ``X`` and ``IX``, and returns a
:class:`~mpicoll.engine.persistent.Persistent` (``Start``, ``Wait``, ``Test``,
``Free``; :func:`mpicoll.startall`, :func:`mpicoll.waitall`). ``info`` is
accepted as mpi4py accepts it and not passed on: the library's
persistent request is made without hints.

A mixin of :class:`mpicoll.Comm`: it expects the ``_call_x`` parsers of
:mod:`mpicoll.api.comm` and :mod:`mpicoll.api.vector_calls`.
"""

from __future__ import annotations

from mpi4py import MPI

from mpicoll.engine.persistent import PERSISTENT, Persistent

P = PERSISTENT
INFO_NULL = MPI.INFO_NULL


class PersistentCalls:
    """``Allreduce_init`` and the rest (a mixin; see the module docstring)."""

    def Allreduce_init(self, sendbuf, recvbuf, op=MPI.SUM, info=INFO_NULL,
                       *, algorithm="auto") -> Persistent:
        return self._call_allreduce(sendbuf, recvbuf, op, algorithm, P)

    def Reduce_init(self, sendbuf, recvbuf, op=MPI.SUM, root=0,
                    info=INFO_NULL, *, algorithm="auto") -> Persistent:
        return self._call_reduce(sendbuf, recvbuf, op, root, algorithm, P)

    def Bcast_init(self, buf, root=0, info=INFO_NULL, *,
                   algorithm="auto") -> Persistent:
        return self._call_bcast(buf, root, algorithm, P)

    def Allgather_init(self, sendbuf, recvbuf, info=INFO_NULL, *,
                       algorithm="auto") -> Persistent:
        return self._call_allgather(sendbuf, recvbuf, algorithm, P)

    def Allgatherv_init(self, sendbuf, recvbuf, info=INFO_NULL, *,
                        algorithm="auto") -> Persistent:
        return self._call_allgatherv(sendbuf, recvbuf, algorithm, P)

    def Gather_init(self, sendbuf, recvbuf, root=0, info=INFO_NULL, *,
                    algorithm="auto") -> Persistent:
        return self._call_gather(sendbuf, recvbuf, root, algorithm, P)

    def Gatherv_init(self, sendbuf, recvbuf, root=0, info=INFO_NULL, *,
                     algorithm="auto") -> Persistent:
        return self._call_gatherv(sendbuf, recvbuf, root, algorithm, P)

    def Scatter_init(self, sendbuf, recvbuf, root=0, info=INFO_NULL, *,
                     algorithm="auto") -> Persistent:
        return self._call_scatter(sendbuf, recvbuf, root, algorithm, P)

    def Scatterv_init(self, sendbuf, recvbuf, root=0, info=INFO_NULL, *,
                      algorithm="auto") -> Persistent:
        return self._call_scatterv(sendbuf, recvbuf, root, algorithm, P)

    def Alltoall_init(self, sendbuf, recvbuf, info=INFO_NULL, *,
                      algorithm="auto") -> Persistent:
        return self._call_alltoall(sendbuf, recvbuf, algorithm, P)

    def Alltoallv_init(self, sendbuf, recvbuf, info=INFO_NULL, *,
                       algorithm="auto") -> Persistent:
        return self._call_alltoallv(sendbuf, recvbuf, algorithm, P)

    def Reduce_scatter_block_init(self, sendbuf, recvbuf, op=MPI.SUM,
                                  info=INFO_NULL, *,
                                  algorithm="auto") -> Persistent:
        return self._call_reduce_scatter_block(sendbuf, recvbuf, op,
                                               algorithm, P)

    def Reduce_scatter_init(self, sendbuf, recvbuf, recvcounts=None,
                            op=MPI.SUM, info=INFO_NULL, *,
                            algorithm="auto") -> Persistent:
        return self._call_reduce_scatter(sendbuf, recvbuf, recvcounts, op,
                                         algorithm, P)

    def Scan_init(self, sendbuf, recvbuf, op=MPI.SUM, info=INFO_NULL, *,
                  algorithm="auto") -> Persistent:
        return self._call_scan("scan", sendbuf, recvbuf, op, algorithm, P)

    def Exscan_init(self, sendbuf, recvbuf, op=MPI.SUM, info=INFO_NULL, *,
                    algorithm="auto") -> Persistent:
        return self._call_scan("exscan", sendbuf, recvbuf, op, algorithm, P)

    def Barrier_init(self, info=INFO_NULL, *,
                     algorithm="auto") -> Persistent:
        return self._barrier(algorithm, P)
