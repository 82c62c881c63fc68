"""mpi4py's v-collectives on :class:`mpicoll.Comm`: per-rank counts.

``Allgatherv``, ``Gatherv``, ``Scatterv``, ``Alltoallv`` and
``Reduce_scatter`` take mpi4py's vector specifications (``[buf, counts]``,
``[buf, counts, TYPE]``, ``[buf, (counts, displs), TYPE]``, ``[buf, counts,
displs, TYPE]``). Unpacked displacements are staged through a packed copy
(:class:`~mpicoll.args.vectors.VectorBuffer`). Where the schedule needs every
rank's counts, and where a count one rank holds must match another's, one
small allgather on the private communicator agrees on them first, so a
mismatch raises the same error on every rank.

:class:`VectorCalls` is a mixin of :class:`mpicoll.Comm`; it expects what
:class:`~mpicoll.api.calls.CallBuilder` provides.
"""

from __future__ import annotations

from functools import partial

from mpi4py import MPI

from mpicoll.args.vectors import packed_displs, vector_buffer
from mpicoll.device.cuda import copyto
from mpicoll.args.checks import (
    check_alias,
    check_op,
    check_reduce_scatter,
    check_root,
)
from mpicoll.args.datatypes import pack, repack, unpack
from mpicoll.args.message import is_in_place, message, vector_message
from mpicoll.api.calls import owners_of
from mpicoll.engine.engine import Call
from mpicoll.errors import (
    BufferSpecError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
)
from mpicoll.schedule.layout import inplace_send
from mpicoll.engine.requests import REQUEST
from mpicoll.engine.work import then

IN_PLACE = MPI.IN_PLACE


class VectorCalls:
    """The v-collectives of :class:`mpicoll.Comm` (a mixin)."""

    def Allgatherv(self, sendbuf, recvbuf, *, algorithm="auto"):
        if not self._replayed("Allgatherv", algorithm, recvbuf, sendbuf):
            self._call_allgatherv(sendbuf, recvbuf, algorithm, False,
                                  "Allgatherv")

    def Iallgatherv(self, sendbuf, recvbuf, *, algorithm="auto") -> MPI.Request:
        return self._restarted("Iallgatherv", algorithm, recvbuf, sendbuf) \
            or self._call_allgatherv(sendbuf, recvbuf, algorithm, REQUEST,
                                     "Iallgatherv")

    def _call_allgatherv(self, sendbuf, recvbuf, algorithm, async_op,
                         name=None):
        """``recvbuf`` is ``[buf, counts]``, ``[buf, counts, TYPE]``,
        ``[buf, (counts, displs), TYPE]`` or ``[buf, counts, displs, TYPE]``
        as in mpi4py. Unpacked displacements are staged through a packed
        copy (:class:`~mpicoll.args.vectors.VectorBuffer`), and such calls are
        not replayed."""
        memo = name and (name, algorithm, recvbuf, sendbuf, None, None)
        c = "allgatherv"
        v, rspec = self._vector(recvbuf, c, "recvbuf", receiving=True)
        counts, recv = v.counts, v.array
        if v.staged:
            memo = None
        if is_in_place(sendbuf):
            send = inplace_send(
                    c, recv, self._engine.rank, self._engine.size, counts)
            v.pack([self._engine.rank])
            restage = partial(v.pack, [self._engine.rank]) if v.staged \
                else None
        else:
            send, restage = self._simple(sendbuf, c)
            self._same_type(send, recv, c)
            if send.size != counts[self._engine.rank]:
                raise BufferSpecError(
                    f"sendbuf holds {send.size} elements, recvcounts says "
                    f"{counts[self._engine.rank]}", **self._where(c))
        return self._gathering(c, send, recv, counts, 0, algorithm,
                               (*owners_of(sendbuf, rspec), recv), async_op,
                               inplace=is_in_place(sendbuf), memo=memo,
                               unstage=v.unpack if v.staged else None,
                               stage=restage,
                               given=("Allgatherv", (sendbuf, recvbuf)))

    def _vector(self, spec, collective, what, *, receiving):
        """``(VectorBuffer, buffer object)`` of an mpi4py vector
        specification (parsed as mpi4py parses it); a derived datatype's
        blocks are packed with MPI ``Pack`` (:class:`_PackedBlocks`)."""
        where = self._where(collective)
        v = vector_message(spec, readonly=not receiving,
                           blocks=self._engine.size, where=where)
        if v.derived:
            return _PackedBlocks(v), v.obj
        displs = None if v.displs == packed_displs(v.counts) else v.displs
        return vector_buffer(v.array, v.counts, displs, receiving=receiving,
                             what=what, where=where), v.obj

    def _simple(self, spec, collective):
        """``(flat view, restage)`` of a send buffer: a derived datatype
        packed, and ``restage`` packing it again (else None)."""
        where = self._where(collective)
        m = message(spec, readonly=True, where=where)
        send, _, _, restage, _ = self._staged(where, m, None,
                                              reducing=False)
        return send, restage

    def Gatherv(self, sendbuf, recvbuf, root=0, *, algorithm="auto"):
        if not self._replayed("Gatherv", algorithm, recvbuf, sendbuf, root):
            self._call_gatherv(sendbuf, recvbuf, root, algorithm, False,
                               "Gatherv")

    def Igatherv(self, sendbuf, recvbuf, root=0, *,
                 algorithm="auto") -> MPI.Request:
        return self._call_gatherv(sendbuf, recvbuf, root, algorithm, REQUEST)

    def _call_gatherv(self, sendbuf, recvbuf, root, algorithm, async_op,
                      name=None):
        """Gather blocks of per-rank sizes into the root's ``recvbuf``, a
        vector specification (unpacked displacements are staged, as in
        :meth:`Allgatherv`). Every call checks,
        in one small allgather, that each rank sends what the root's
        ``recvcounts`` expects; that is also how every rank learns the
        counts the binomial algorithm needs. A blocking call is kept for
        replay with that allgather (:mod:`mpicoll.engine.agreeing`)."""
        memo = name and (name, algorithm, recvbuf, sendbuf, root, None)
        c = "gatherv"
        root = check_root(root, self._engine.size, where=self._where(c))
        counts = finish = None
        if self._engine.rank == root:
            v, rspec = self._vector(recvbuf, c, "recvbuf", receiving=True)
            counts, recv = v.counts, v.array
            if is_in_place(sendbuf):
                send = inplace_send(
                    c, recv, self._engine.rank, self._engine.size, counts)
                v.pack([self._engine.rank])
                restage = partial(v.pack, [self._engine.rank]) \
                    if v.staged else None
            else:
                send, restage = self._simple(sendbuf, c)
                self._same_type(send, recv, c)
            owners = (*owners_of(sendbuf, rspec), recv)
            finish = v.unpack if v.staged else None
            if v.staged:
                memo = None
        else:
            send, restage = self._simple(sendbuf, c)
            recv, owners = send[:0], owners_of(sendbuf)
        sizes, counts, agreement = self._engine.agree(c, send.size, counts,
                                                      root)
        self._engine.disagree(c, [f"rank {q} sends {n}, recvcounts[{q}] is "
                           f"{counts[q]}" for q, n in enumerate(sizes)
                           if n != counts[q]])
        counts = tuple(counts)

        def native(nonblocking, send, recv):
            s = IN_PLACE if is_in_place(sendbuf) else send
            r = [recv, list(counts)] if self._engine.rank == root else None
            return self._engine.prepared("Gatherv", nonblocking, s, r, root)

        return self._engine.launch(Call(
            c, algorithm, send, recv, counts, None, root, native, owners,
            memo=memo, unstage=finish, stage=restage,
            given=("Gatherv", (sendbuf, recvbuf, root)),
            agreement=agreement), async_op)

    def Scatterv(self, sendbuf, recvbuf, root=0, *, algorithm="auto"):
        if not self._replayed("Scatterv", algorithm, recvbuf, sendbuf, root):
            self._call_scatterv(sendbuf, recvbuf, root, algorithm, False,
                                "Scatterv")

    def Iscatterv(self, sendbuf, recvbuf, root=0, *,
                  algorithm="auto") -> MPI.Request:
        return self._call_scatterv(sendbuf, recvbuf, root, algorithm, REQUEST)

    def _call_scatterv(self, sendbuf, recvbuf, root, algorithm, async_op,
                       name=None):
        """Scatter blocks of per-rank sizes from the root's ``sendbuf``, a
        vector specification (unpacked displacements are staged); counts
        are checked across ranks, and blocking calls kept, as in
        :meth:`Gatherv`."""
        memo = name and (name, algorithm, recvbuf, sendbuf, root, None)
        c = "scatterv"
        root = check_root(root, self._engine.size, where=self._where(c))
        counts = unstage = restage = None
        inplace = is_in_place(recvbuf)
        if self._engine.rank == root:
            v, sspec = self._vector(sendbuf, c, "sendbuf", receiving=False)
            v.pack()
            restage = v.pack if v.staged else None
            counts, send = v.counts, v.array
            if inplace:  # the root's block stays where it is
                start = v.displs[root]
                recv = v.flat[start:start + counts[root]]
            else:
                recv, unstage = self._simple_recv(recvbuf, c)
                self._same_type(send, recv, c)
            owners = (*owners_of(sspec, recvbuf), send)
            if v.staged:
                memo = None
        else:
            recv, unstage = self._simple_recv(recvbuf, c)
            send, owners = recv[:0], owners_of(recvbuf)
        sizes, counts, agreement = self._engine.agree(c, recv.size, counts,
                                                      root)
        self._engine.disagree(c, [f"rank {q} receives {n}, sendcounts[{q}] is "
                           f"{counts[q]}" for q, n in enumerate(sizes)
                           if n < counts[q]])
        counts = tuple(counts)
        recv = recv[:counts[self._engine.rank]]

        def native(nonblocking, send, recv):
            s = [send, list(counts)] if self._engine.rank == root else None
            return self._engine.prepared("Scatterv", nonblocking,
                s, IN_PLACE if inplace else recv, root)

        return self._engine.launch(Call(
            c, algorithm, send, recv, counts, None, root, native, owners,
            memo=memo, unstage=unstage, stage=restage,
            given=("Scatterv", (sendbuf, recvbuf, root)),
            agreement=agreement),
            async_op)

    def Alltoallv(self, sendbuf, recvbuf, *, algorithm="auto"):
        if not self._replayed("Alltoallv", algorithm, recvbuf, sendbuf):
            self._call_alltoallv(sendbuf, recvbuf, algorithm, False,
                                 "Alltoallv")

    def Ialltoallv(self, sendbuf, recvbuf, *, algorithm="auto") -> MPI.Request:
        return self._call_alltoallv(sendbuf, recvbuf, algorithm, REQUEST)

    def _call_alltoallv(self, sendbuf, recvbuf, algorithm, async_op,
                        name=None):
        """Blocks of any sizes between every pair: both buffers are vector
        specifications (unpacked displacements are staged). One small
        allgather of
        every rank's send and receive counts builds the whole count matrix
        the schedules are keyed by, and checks that what ``i`` sends to
        ``j`` is what ``j`` expects from ``i``; a blocking call is kept for
        replay with it, as in :meth:`Gatherv`. In place, the input is
        copied out of ``recvbuf`` first, with the receive counts."""
        memo = name and (name, algorithm, recvbuf, sendbuf, None, None)
        c = "alltoallv"
        rv, rspec = self._vector(recvbuf, c, "recvbuf", receiving=True)
        if is_in_place(sendbuf):
            rv.pack()
            sv, sspec = rv, None
            send = self._engine.ctx.input_copy(rv.array)
            restage = then(rv.pack, partial(copyto, send, rv.array))
        else:
            sv, sspec = self._vector(sendbuf, c, "sendbuf", receiving=False)
            sv.pack()
            send = sv.array
            restage = sv.pack if sv.staged else None
            self._same_type(send, rv.array, c)
        if rv.staged or sv.staged:
            memo = None
        return self._alltoallv(send, rv.array, sv.counts, rv.counts,
                               algorithm,
                               (*owners_of(sspec, rspec), send, rv.array),
                               async_op, memo=memo,
                               unstage=rv.unpack if rv.staged else None,
                               stage=restage,
                               given=("Alltoallv", (sendbuf, recvbuf)))

    def Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=MPI.SUM,
                       *, algorithm="auto"):
        if not self._replayed("Reduce_scatter", algorithm, recvbuf, sendbuf,
                              op, recvcounts):
            self._call_reduce_scatter(sendbuf, recvbuf, recvcounts, op,
                                      algorithm, False, "Reduce_scatter")

    def Ireduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=MPI.SUM,
                        *, algorithm="auto") -> MPI.Request:
        return self._restarted("Ireduce_scatter", algorithm, recvbuf,
                               sendbuf, op, recvcounts) or \
            self._call_reduce_scatter(sendbuf, recvbuf, recvcounts, op,
                                      algorithm, REQUEST, "Ireduce_scatter")

    def _call_reduce_scatter(self, sendbuf, recvbuf, recvcounts, op,
                             algorithm, async_op, name=None):
        """As mpi4py: ``recvcounts=None`` (not in place) allgathers every
        rank's receive count first, every call. Kept for replay only with
        counts in a list or tuple (an array of them could change in place
        unseen; None could count differently the next time)."""
        memo = (name, algorithm, recvbuf, sendbuf, op, recvcounts) \
            if name and type(recvcounts) in (list, tuple) else None
        c = "reduce_scatter"
        where = self._where(c)
        engine = self._engine
        mop, why = self._mpi_op(op, where)
        inplace = is_in_place(sendbuf)
        r = message(recvbuf, readonly=False, where=where)
        s = None if inplace else message(sendbuf, readonly=True, where=where)
        if recvcounts is None and not inplace:
            counts = tuple(engine.agree(c, r.count)[0])
        else:
            counts = _counts(recvcounts, engine.size, where)
        check_reduce_scatter(s, r, counts, engine.rank, where=where)
        check_alias(s, r, where=where)
        check_op(op, r.datatype, where=where)
        send, recv, unstage, restage, staged_why = self._staged(where,
            s, r, reducing=True, read_recv=inplace)
        if inplace:
            send = recv
        given = ("Reduce_scatter", (sendbuf, recvbuf, list(counts), op))
        scale = recv.size // r.count if r.count else 1  # units per element
        counts = tuple(n * scale for n in counts)
        return self._reduce_scatter(
            c, send, recv, counts, counts, mop, algorithm,
            owners_of(sendbuf, recvbuf), async_op, memo, inplace=inplace,
            why_native=why or staged_why, unstage=unstage, stage=restage,
            given=given)

    def _simple_recv(self, spec, collective):
        """``(flat view, unstage)`` of a receive buffer (a derived
        datatype's through packed scratch, unpacked by ``unstage``)."""
        m = message(spec, readonly=False, where=self._where(collective))
        if not m.derived:
            return m.array, None
        scratch = pack(m)
        return scratch, partial(unpack, m, scratch)


def _counts(counts, size: int, where: dict) -> tuple:
    """``recvcounts`` checked as mpi4py's ``chkarray`` checks it."""
    try:
        values = tuple(int(n) for n in counts)
    except TypeError as exc:
        raise InvalidArgumentTypeError(f"recvcounts: {exc}", **where) from None
    if len(values) != size:
        raise InvalidArgumentError(f"expecting {size} items, got "
                                   f"{len(values)}", **where)
    return values


class _PackedBlocks:
    """A derived datatype's vector message as schedules see it: every
    block packed (MPI ``Pack``) back to back in scratch of the datatype's
    basic type (bytes when mixed), counts scaled to that type; ``unpack``
    puts the result back in place (MPI ``Unpack``)."""

    staged = True

    def __init__(self, v) -> None:
        self.message = v
        self.array = self.flat = pack(v)
        scale = self.array.size // max(sum(v.counts), 1)
        self.counts = tuple(n * scale for n in v.counts)
        self.displs = packed_displs(self.counts)

    def pack(self, ranks=None) -> None:
        """Pack every block again (packed when made; the caller's buffer
        may hold new values since)."""
        repack(self.message, self.array)

    def unpack(self) -> None:
        unpack(self.message, self.array)

