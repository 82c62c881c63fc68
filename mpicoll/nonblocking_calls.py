"""mpi4py's nonblocking collectives on :class:`mpicoll.Comm`.

Each ``IX`` has mpi4py's signature plus ``algorithm=`` and returns a
:class:`~mpicoll.work.Work`. It first offers its memo to
:meth:`~mpicoll.replay.Replays.restarted` (a repeat on the very same
objects is relaunched without parsing), else parses its arguments with
the same parser as ``X`` and ``X_init``.

A mixin of :class:`mpicoll.Comm`: it expects the ``_call_x`` parsers of
:mod:`mpicoll.comm` (the v-forms' ``IX`` are in :mod:`mpicoll.vector_calls`).
"""

from __future__ import annotations

from mpi4py import MPI

from mpicoll.work import Work


class NonblockingCalls:
    """``Iallreduce`` and the rest (a mixin; see the module docstring)."""

    def Iallreduce(self, sendbuf, recvbuf, op=MPI.SUM, *,
                   algorithm="auto") -> Work:
        memo = ("Iallreduce", algorithm, recvbuf, sendbuf, op, None)
        return self._engine.restarted(*memo) or self._call_allreduce(
            sendbuf, recvbuf, op, algorithm, True, memo)

    def Ireduce(self, sendbuf, recvbuf, op=MPI.SUM, root=0, *,
                algorithm="auto") -> Work:
        memo = ("Ireduce", algorithm, recvbuf, sendbuf, op, root)
        return self._engine.restarted(*memo) or self._call_reduce(
            sendbuf, recvbuf, op, root, algorithm, True, memo)

    def Ibcast(self, buf, root=0, *, algorithm="auto") -> Work:
        memo = ("Ibcast", algorithm, buf, root, None, None)
        return self._engine.restarted(*memo) or self._call_bcast(
            buf, root, algorithm, True, memo)

    def Iallgather(self, sendbuf, recvbuf, *, algorithm="auto") -> Work:
        memo = ("Iallgather", algorithm, recvbuf, sendbuf, None, None)
        return self._engine.restarted(*memo) or self._call_allgather(
            sendbuf, recvbuf, algorithm, True, memo)

    def Igather(self, sendbuf, recvbuf, root=0, *, algorithm="auto") -> Work:
        memo = ("Igather", algorithm, recvbuf, sendbuf, root, None)
        return self._engine.restarted(*memo) or self._call_gather(
            sendbuf, recvbuf, root, algorithm, True, memo)

    def Iscatter(self, sendbuf, recvbuf, root=0, *,
                 algorithm="auto") -> Work:
        memo = ("Iscatter", algorithm, recvbuf, sendbuf, root, None)
        return self._engine.restarted(*memo) or self._call_scatter(
            sendbuf, recvbuf, root, algorithm, True, memo)

    def Ialltoall(self, sendbuf, recvbuf, *, algorithm="auto") -> Work:
        memo = ("Ialltoall", algorithm, recvbuf, sendbuf, None, None)
        return self._engine.restarted(*memo) or self._call_alltoall(
            sendbuf, recvbuf, algorithm, True, memo)

    def Iscan(self, sendbuf, recvbuf, op=MPI.SUM, *, algorithm="auto") -> Work:
        memo = ("Iscan", algorithm, recvbuf, sendbuf, op, None)
        return self._engine.restarted(*memo) or self._call_scan(
            "scan", sendbuf, recvbuf, op, algorithm, True, memo)

    def Iexscan(self, sendbuf, recvbuf, op=MPI.SUM, *,
                algorithm="auto") -> Work:
        memo = ("Iexscan", algorithm, recvbuf, sendbuf, op, None)
        return self._engine.restarted(*memo) or self._call_scan(
            "exscan", sendbuf, recvbuf, op, algorithm, True, memo)

    def Ireduce_scatter_block(self, sendbuf, recvbuf, op=MPI.SUM, *,
                              algorithm="auto") -> Work:
        memo = ("Ireduce_scatter_block", algorithm, recvbuf, sendbuf, op,
                None)
        return self._engine.restarted(*memo) or \
            self._call_reduce_scatter_block(sendbuf, recvbuf, op, algorithm,
                                            True, memo)

    def Ibarrier(self, *, algorithm="auto") -> Work:
        memo = ("Ibarrier", algorithm, None, None, None, None)
        return self._engine.restarted(*memo) or self._barrier(
            algorithm, True, memo)
