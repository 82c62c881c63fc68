"""mpi4py's nonblocking collectives on :class:`mpicoll.Comm`.

Each ``IX`` has mpi4py's signature plus ``algorithm=`` and returns a
:class:`~mpicoll.engine.work.Work`. Through
:meth:`~mpicoll.api.calls.CallBuilder._replay_or_parse`, a repeat on the
very same objects is relaunched without parsing; any other call is parsed
by the same parser as ``X`` and ``X_init``.

A mixin of :class:`mpicoll.Comm`: it expects the ``_call_x`` parsers of
:mod:`mpicoll.api.comm` (the v-forms' ``IX`` are in :mod:`mpicoll.api.vector_calls`).
"""

from __future__ import annotations

from mpi4py import MPI

from mpicoll.engine.work import Work


class NonblockingCalls:
    """``Iallreduce`` and the rest (a mixin; see the module docstring)."""

    def Iallreduce(self, sendbuf, recvbuf, op=MPI.SUM, *,
                   algorithm="auto") -> Work:
        return self._replay_or_parse(
            ("Iallreduce", algorithm, recvbuf, sendbuf, op, None), True,
            self._call_allreduce, sendbuf, recvbuf, op, algorithm)

    def Ireduce(self, sendbuf, recvbuf, op=MPI.SUM, root=0, *,
                algorithm="auto") -> Work:
        return self._replay_or_parse(
            ("Ireduce", algorithm, recvbuf, sendbuf, op, root), True,
            self._call_reduce, sendbuf, recvbuf, op, root, algorithm)

    def Ibcast(self, buf, root=0, *, algorithm="auto") -> Work:
        return self._replay_or_parse(
            ("Ibcast", algorithm, buf, root, None, None), True,
            self._call_bcast, buf, root, algorithm)

    def Iallgather(self, sendbuf, recvbuf, *, algorithm="auto") -> Work:
        return self._replay_or_parse(
            ("Iallgather", algorithm, recvbuf, sendbuf, None, None), True,
            self._call_allgather, sendbuf, recvbuf, algorithm)

    def Igather(self, sendbuf, recvbuf, root=0, *, algorithm="auto") -> Work:
        return self._replay_or_parse(
            ("Igather", algorithm, recvbuf, sendbuf, root, None), True,
            self._call_gather, sendbuf, recvbuf, root, algorithm)

    def Iscatter(self, sendbuf, recvbuf, root=0, *,
                 algorithm="auto") -> Work:
        return self._replay_or_parse(
            ("Iscatter", algorithm, recvbuf, sendbuf, root, None), True,
            self._call_scatter, sendbuf, recvbuf, root, algorithm)

    def Ialltoall(self, sendbuf, recvbuf, *, algorithm="auto") -> Work:
        return self._replay_or_parse(
            ("Ialltoall", algorithm, recvbuf, sendbuf, None, None), True,
            self._call_alltoall, sendbuf, recvbuf, algorithm)

    def Iscan(self, sendbuf, recvbuf, op=MPI.SUM, *, algorithm="auto") -> Work:
        return self._replay_or_parse(
            ("Iscan", algorithm, recvbuf, sendbuf, op, None), True,
            self._call_scan, "scan", sendbuf, recvbuf, op, algorithm)

    def Iexscan(self, sendbuf, recvbuf, op=MPI.SUM, *,
                algorithm="auto") -> Work:
        return self._replay_or_parse(
            ("Iexscan", algorithm, recvbuf, sendbuf, op, None), True,
            self._call_scan, "exscan", sendbuf, recvbuf, op, algorithm)

    def Ireduce_scatter_block(self, sendbuf, recvbuf, op=MPI.SUM, *,
                              algorithm="auto") -> Work:
        return self._replay_or_parse(
            ("Ireduce_scatter_block", algorithm, recvbuf, sendbuf, op, None),
            True, self._call_reduce_scatter_block, sendbuf, recvbuf, op,
            algorithm)

    def Ibarrier(self, *, algorithm="auto") -> Work:
        return self._replay_or_parse(
            ("Ibarrier", algorithm, None, None, None, None), True,
            self._barrier, algorithm)
