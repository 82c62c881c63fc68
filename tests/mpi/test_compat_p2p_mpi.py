"""Tier 2: point-to-point calls on ``mpicoll.Comm`` behave as mpi4py's.

mpi4py's point-to-point calls, objects and buffers (blocking, nonblocking,
synchronous, buffered, ready, persistent, probes, statuses, every buffer
form), on a ring, compared with the raw communicator (tests/compatcases.py
says how); and messages crossing between the wrapped and the raw
communicator.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from compat import SELFTEST
from compatcases import FORMS, DLPackOnly, buffer, full, ids, readonly

pytestmark = [pytest.mark.mpi, pytest.mark.interface]


def test_point_to_point(h):
    """mpi4py's point-to-point calls, objects and buffers, on a ring."""
    def ring(c):
        return (c.rank + 1) % c.size, (c.rank - 1) % c.size

    def status_of(st):
        return (st.Get_source(), st.Get_tag(), st.Get_error(),
                st.Get_count(MPI.BYTE))

    def send_recv(c):
        dest, source = ring(c)
        req = c.comm.isend({"from": c.rank}, dest=dest, tag=5)
        got = c.comm.recv(source=source, tag=5)
        req.wait()
        return got

    def blocking_send(c):  # even ranks send first; small messages
        dest, source = ring(c)
        if c.size == 1:
            return "needs 2 ranks"
        if c.rank % 2 == 0:
            c.comm.send([c.rank] * 3, dest=dest, tag=1)
            got = c.comm.recv(source=source, tag=1)
        else:
            got = c.comm.recv(source=source, tag=1)
            c.comm.send([c.rank] * 3, dest=dest, tag=1)
        return got

    def isend_irecv(c):
        dest, source = ring(c)
        r = c.comm.irecv(source=source, tag=3)
        s = c.comm.isend(("x", c.rank), dest=dest, tag=3)
        s.wait()
        return r.wait(), isinstance(r, MPI.Request)

    def recv_status(c):
        dest, _ = ring(c)
        req = c.comm.isend("payload", dest=dest, tag=9)
        st = MPI.Status()
        got = c.comm.recv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st)
        req.wait()
        return got, st.Get_source(), st.Get_tag()

    def sendrecv(c):
        dest, source = ring(c)
        return c.comm.sendrecv(("sr", c.rank), dest=dest, sendtag=4,
                               source=source, recvtag=4)

    def ssend_issend(c):
        dest, source = ring(c)
        req = c.comm.issend(c.rank, dest=dest, tag=6)
        got = c.comm.recv(source=source, tag=6)
        req.wait()
        return got

    def probe(c):
        dest, source = ring(c)
        req = c.comm.isend("probed", dest=dest, tag=8)
        st = MPI.Status()
        found = c.comm.probe(source=source, tag=8, status=st)
        got = c.comm.recv(source=source, tag=8)
        req.wait()
        return found, st.Get_source(), st.Get_tag(), got

    def iprobe_mprobe(c):
        dest, source = ring(c)
        req = c.comm.isend([1, 2, 3], dest=dest, tag=12)
        msg = c.comm.mprobe(source=source, tag=12)
        got = msg.recv()
        req.wait()
        c.comm.Barrier()  # mpi4py's own on both sides
        nothing = c.comm.iprobe(source=source, tag=12)
        return got, nothing

    def improbe(c):
        dest, source = ring(c)
        req = c.comm.isend("m", dest=dest, tag=13)
        msg = None
        while msg is None:
            msg = c.comm.improbe(source=source, tag=13)
        got = msg.recv()
        req.wait()
        return got

    def bsend(c):
        dest, source = ring(c)
        buf = bytearray(1 << 16)
        MPI.Attach_buffer(buf)
        try:
            c.comm.bsend(("b", c.rank), dest=dest, tag=14)
            got = c.comm.recv(source=source, tag=14)
            req = c.comm.ibsend(("ib", c.rank), dest=dest, tag=15)
            got2 = c.comm.recv(source=source, tag=15)
            req.wait()
        finally:
            MPI.Detach_buffer()
        return got, got2

    def Send_Recv_status(c):
        dest, _ = ring(c)
        s, r = ids(c.rank, 5), full(8)
        req = MPI.Comm.Isend(c.comm, s, dest, 20)  # mpi4py's own
        st = MPI.Status()
        c.comm.Recv(r, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st)
        req.Wait()
        return r, status_of(st), st.Get_count(MPI.INT), st.Get_elements(
            MPI.INT)

    def Send_forms(c):
        dest, source = ring(c)
        out = []
        for i, f in enumerate(FORMS):
            _, sspec = buffer(f, 3, 1, "i", ids(c.rank, 3))
            r, rspec = buffer(f, 3, 1, "i")
            req = c.comm.Irecv(rspec, source, 30 + i)
            if c.rank % 2 == 0:
                c.comm.Send(sspec, dest, 30 + i)
            else:
                c.comm.Ssend(sspec, dest, 30 + i)
            req.Wait()
            out.append(r)
        return out

    def Isend_Irecv_Waitall(c):
        dest, source = ring(c)
        s, r = ids(c.rank, 4), full(4)
        reqs = [c.comm.Irecv([r, MPI.INT], source, 21),
                c.comm.Isend([s, MPI.INT], dest, 21)]
        statuses = [MPI.Status(), MPI.Status()]
        MPI.Request.Waitall(reqs, statuses)
        return r, status_of(statuses[0]), [isinstance(q, MPI.Request)
                                           for q in reqs]

    def Issend_Testall(c):
        dest, source = ring(c)
        s, r = ids(c.rank, 4), full(4)
        reqs = [c.comm.Irecv(r, source, 22), c.comm.Issend(s, dest, 22)]
        while not MPI.Request.Testall(reqs):
            pass
        return r

    def Sendrecv(c):
        dest, source = ring(c)
        s, r = ids(c.rank, 4), full(4)
        st = MPI.Status()
        c.comm.Sendrecv(s, dest, 23, r, source, 23, st)
        return r, status_of(st)

    def Sendrecv_replace(c):
        dest, source = ring(c)
        b = ids(c.rank, 4)
        c.comm.Sendrecv_replace([b, MPI.INT], dest, 24, source, 24)
        return b

    def Sendrecv_proc_null(c):
        s, r = ids(c.rank, 4), full(4)
        st = MPI.Status()
        c.comm.Sendrecv(s, MPI.PROC_NULL, 0, r, MPI.PROC_NULL, 0, st)
        c.comm.Send(s, MPI.PROC_NULL)
        c.comm.Recv(r, MPI.PROC_NULL)
        return r, st.Get_source(), st.Get_tag()

    def Probe_Recv(c):
        dest, source = ring(c)
        s = ids(c.rank, 6)
        req = c.comm.Isend(s, dest, 25)
        st = MPI.Status()
        c.comm.Probe(source, 25, st)
        r = full(st.Get_count(MPI.INT))
        c.comm.Recv(r, source, 25)
        req.Wait()
        return r, status_of(st)

    def persistent(c):
        dest, source = ring(c)
        s, r = ids(c.rank, 4), full(4)
        reqs = [c.comm.Recv_init(r, source, 26),
                c.comm.Send_init(s, dest, 26)]
        out = []
        for k in range(2):
            s[:] += k
            MPI.Prequest.Startall(reqs)
            MPI.Request.Waitall(reqs)
            out.append(r.copy())
        for q in reqs:
            q.Free()
        return out

    def Rsend(c):
        dest, source = ring(c)
        s, r = ids(c.rank, 4), full(4)
        req = c.comm.Irecv(r, source, 27)
        MPI.Comm.Barrier(c.comm)
        c.comm.Rsend(s, dest, 27)
        req.Wait()
        return r

    def Send_derived(c):
        dest, source = ring(c)
        t = MPI.Datatype.Create_struct([1, 1], [0, 8],
                                       [MPI.INT, MPI.DOUBLE]).Commit()
        try:
            s = ids(c.rank, 8)
            r = full(8)
            req = c.comm.Irecv([r, 2, t], source, 28)
            c.comm.Send([s, 2, t], dest, 28)
            req.Wait()
            return r
        finally:
            t.Free()

    def Send_dlpack(c):
        dest, source = ring(c)
        s, r = DLPackOnly(ids(c.rank, 4)), DLPackOnly(full(4))
        req = c.comm.Irecv(r, source, 29)
        c.comm.Send(s, dest, 29)
        req.Wait()
        return r.array

    def Recv_readonly(c):  # every rank (mpi4py raises before posting)
        req = c.comm.Irecv(readonly(full(4)), c.rank, 98)
        req.Cancel()  # reached only where the buffer was accepted
        req.Wait()
        return "accepted"

    def Send_noncontiguous(c):  # every rank, to itself
        req = c.comm.Isend(ids(c.rank, 8)[::2], c.rank, 97)
        MPI.Comm.Recv(c.comm, full(4), c.rank, 97)  # where accepted
        req.Wait()
        return "accepted"

    def proc_null_unparsed(c):  # mpi4py does not look at the buffer
        c.comm.Recv(readonly(full(4)), MPI.PROC_NULL)
        c.comm.Send(ids(c.rank, 8)[::2], MPI.PROC_NULL)
        c.comm.Send("not a buffer", MPI.PROC_NULL)
        return "accepted"

    cases = {
        "isend/recv objects": send_recv, "send/recv objects": blocking_send,
        "isend/irecv + wait": isend_irecv,
        "recv ANY_SOURCE with status": recv_status,
        "sendrecv objects": sendrecv, "issend/recv": ssend_issend,
        "probe with status": probe, "mprobe/iprobe": iprobe_mprobe,
        "improbe": improbe, "bsend/ibsend with attached buffer": bsend,
        "Recv with status": Send_Recv_status,
        "Send/Ssend/Irecv every buffer form": Send_forms,
        "Isend/Irecv + Request.Waitall(statuses)": Isend_Irecv_Waitall,
        "Issend/Irecv + Request.Testall": Issend_Testall,
        "Sendrecv with status": Sendrecv,
        "Sendrecv_replace": Sendrecv_replace,
        "Sendrecv/Send/Recv PROC_NULL": Sendrecv_proc_null,
        "Probe then Recv": Probe_Recv,
        "Send_init/Recv_init persistent": persistent,
        "Rsend": Rsend,
        "Send/Irecv struct datatype": Send_derived,
        "Send/Irecv DLPack-only buffers": Send_dlpack,
        "Irecv read-only buffer (rejected)": Recv_readonly,
        "Isend non-contiguous buffer (rejected)": Send_noncontiguous,
        "Send/Recv PROC_NULL: buffer not parsed": proc_null_unparsed,
    }
    for label, case in cases.items():
        h.check(label, case)
    h.finish()


def test_messages_cross_faces(h):
    """Messages sent through the wrapped communicator are received by
    mpi4py code holding the raw one, and the other way round."""
    if SELFTEST:
        pytest.skip("raw vs raw")
    raw, wrapped = h.raw, h.wrapped
    rank, size = raw.Get_rank(), raw.Get_size()
    dest, source = (rank + 1) % size, (rank - 1) % size
    req = wrapped.isend(("w", rank), dest=dest, tag=40)
    got = raw.recv(source=source, tag=40)
    req.wait()
    s, r = ids(rank, 3), full(3)
    req = raw.Isend(s, dest, 41)
    wrapped.Recv(r, source, 41)
    req.Wait()
    problems = []
    if got != ("w", source):
        problems.append(f"wrapped isend -> raw recv gave {got!r}")
    if not np.array_equal(r, ids(source, 3)):
        problems.append(f"raw Isend -> wrapped Recv gave {r}")
    h.problems += [("messages across faces", "-", p) for p in problems]
    h.finish()
