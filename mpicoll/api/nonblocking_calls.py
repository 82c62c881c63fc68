"""mpi4py's nonblocking collectives on :class:`mpicoll.Comm`.

Each ``IX`` has mpi4py's signature plus ``algorithm=`` and returns an
``MPI.Request`` (:mod:`mpicoll.engine.requests`) that mpi4py's
``MPI.Request.Waitall`` and friends take beside their own. A repeat on
the very same objects is relaunched without parsing
(:meth:`~mpicoll.engine.replay.Replays.restarted`); any other call is
parsed by the same parser as ``X`` and ``X_init``.

A mixin of :class:`mpicoll.Comm`: it expects the ``_call_x`` parsers of
:mod:`mpicoll.api.comm` (the v-forms' ``IX`` are in :mod:`mpicoll.api.vector_calls`).
"""

from __future__ import annotations

from mpi4py import MPI

from mpicoll.engine.requests import REQUEST


class NonblockingCalls:
    """``Iallreduce`` and the rest (a mixin; see the module docstring)."""

    def Iallreduce(self, sendbuf, recvbuf, op=MPI.SUM, *,
                   algorithm="auto") -> MPI.Request:
        return self._restarted(
            "Iallreduce", algorithm, recvbuf, sendbuf, op) or \
            self._call_allreduce(sendbuf, recvbuf, op, algorithm, REQUEST,
                                 "Iallreduce")

    def Ireduce(self, sendbuf, recvbuf, op=MPI.SUM, root=0, *,
                algorithm="auto") -> MPI.Request:
        return self._restarted(
            "Ireduce", algorithm, recvbuf, sendbuf, op, root) or \
            self._call_reduce(sendbuf, recvbuf, op, root, algorithm, REQUEST,
                              "Ireduce")

    def Ibcast(self, buf, root=0, *, algorithm="auto") -> MPI.Request:
        return self._restarted("Ibcast", algorithm, buf, root) or \
            self._call_bcast(buf, root, algorithm, REQUEST, "Ibcast")

    def Iallgather(self, sendbuf, recvbuf, *, algorithm="auto") -> MPI.Request:
        return self._restarted("Iallgather", algorithm, recvbuf, sendbuf) or \
            self._call_allgather(sendbuf, recvbuf, algorithm, REQUEST,
                                 "Iallgather")

    def Igather(self, sendbuf, recvbuf, root=0, *, algorithm="auto") -> MPI.Request:
        return self._restarted(
            "Igather", algorithm, recvbuf, sendbuf, root) or \
            self._call_gather(sendbuf, recvbuf, root, algorithm, REQUEST,
                              "Igather")

    def Iscatter(self, sendbuf, recvbuf, root=0, *,
                 algorithm="auto") -> MPI.Request:
        return self._restarted(
            "Iscatter", algorithm, recvbuf, sendbuf, root) or \
            self._call_scatter(sendbuf, recvbuf, root, algorithm, REQUEST,
                               "Iscatter")

    def Ialltoall(self, sendbuf, recvbuf, *, algorithm="auto") -> MPI.Request:
        return self._restarted("Ialltoall", algorithm, recvbuf, sendbuf) or \
            self._call_alltoall(sendbuf, recvbuf, algorithm, REQUEST,
                                "Ialltoall")

    def Iscan(self, sendbuf, recvbuf, op=MPI.SUM, *, algorithm="auto") -> MPI.Request:
        return self._restarted("Iscan", algorithm, recvbuf, sendbuf, op) or \
            self._call_scan("scan", sendbuf, recvbuf, op, algorithm, REQUEST,
                            "Iscan")

    def Iexscan(self, sendbuf, recvbuf, op=MPI.SUM, *,
                algorithm="auto") -> MPI.Request:
        return self._restarted("Iexscan", algorithm, recvbuf, sendbuf, op) \
            or self._call_scan("exscan", sendbuf, recvbuf, op, algorithm,
                               REQUEST, "Iexscan")

    def Ireduce_scatter_block(self, sendbuf, recvbuf, op=MPI.SUM, *,
                              algorithm="auto") -> MPI.Request:
        return self._restarted(
            "Ireduce_scatter_block", algorithm, recvbuf, sendbuf, op) or \
            self._call_reduce_scatter_block(sendbuf, recvbuf, op, algorithm,
                                            REQUEST, "Ireduce_scatter_block")

    def Ibarrier(self, *, algorithm="auto") -> MPI.Request:
        return self._restarted("Ibarrier", algorithm, None) or \
            self._barrier(algorithm, REQUEST,
                          ("Ibarrier", algorithm, None, None, None, None))
