"""Tier 2 for point-to-point: mpi4py's calls through mpicoll.Comm, on the
caller's own communicator (so they match plain mpi4py messages), failing
as mpi4py's own do; ProcessGroup's torch-style calls, whose peers and tags
are checked before anything is sent."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll import ProcessGroup as PG
from mpicoll import errors

pytestmark = pytest.mark.mpi


@pytest.fixture(scope="module")
def comm():
    return mpicoll.Comm(MPI.COMM_WORLD)


def ring_peers(comm):
    return (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size


def test_send_recv_match_plain_mpi4py(comm):
    right, left = ring_peers(comm)
    out = np.arange(5, dtype=np.int32) + 10 * comm.rank
    got = np.zeros(5, np.int32)
    # Even ranks send through mpicoll and receive through plain mpi4py;
    # odd ranks the other way round: the messages must still match.
    if comm.rank % 2 == 0:
        req = comm.Isend([out, MPI.INT], right, tag=7)
        MPI.Intracomm(comm).Recv(got, left, tag=7)
    else:
        req = MPI.Intracomm(comm).Isend(out, right, tag=7)
        status = MPI.Status()
        comm.Recv([got, 5, MPI.INT], left, 7, status)
        assert status.Get_source() == left and status.Get_tag() == 7
    assert type(req) is MPI.Request  # host buffers: mpi4py's own request
    req.Wait()
    assert np.array_equal(got, np.arange(5) + 10 * left)


def test_sendrecv_and_replace(comm):
    right, left = ring_peers(comm)
    got = np.zeros(3)
    comm.Sendrecv(np.full(3, comm.rank, float), right, 1, got, left, 1)
    assert np.all(got == left)
    buf = np.full(4, comm.rank, np.int64)
    comm.Sendrecv_replace(buf, right, 2, left, 2)
    assert np.all(buf == left)


def test_array_face_and_batch(comm):
    right, left = ring_peers(comm)
    got = np.zeros((2, 2))
    pg = PG(comm)
    works = pg.batch_isend_irecv([  # op: the method, as torch, or its name
        mpicoll.P2POp(pg.irecv, got, left, tag=3),
        mpicoll.P2POp("isend", np.full((2, 2), comm.rank, float), right,
                      tag=3),
    ])
    mpicoll.waitall(works, timeout=60)
    assert np.all(got == left)
    x = np.full(3, comm.rank, np.int16)
    work = pg.isend(x, right)
    y = np.zeros(3, np.int16)
    assert pg.recv(y) == left  # any source: returns the sender
    work.wait()
    assert np.all(y == left)


def test_bad_arguments_fail_before_any_message(comm):
    # mpicoll.Comm: what mpi4py raises, the very same way
    raw = MPI.Intracomm(comm)
    for call, error_class in ((lambda c: c.Send(np.ones(1), 99), MPI.ERR_RANK),
                              (lambda c: c.Send(np.ones(1), 0, tag=-3),
                               MPI.ERR_TAG),
                              (lambda c: c.Recv(np.ones(1), -7), MPI.ERR_RANK)):
        with pytest.raises(MPI.Exception) as expected:
            call(raw)
        with pytest.raises(MPI.Exception) as got:
            call(comm)
        assert got.value.Get_error_class() == \
            expected.value.Get_error_class() == error_class
    # ProcessGroup: checked first, named
    pg = PG(comm)
    with pytest.raises(errors.InvalidArgumentError, match=r"dst 99"):
        pg.send(np.ones(1), 99)
    with pytest.raises(errors.InvalidArgumentError, match=r"tag -3"):
        pg.send(np.ones(1), 0, tag=-3)
    with pytest.raises(errors.InvalidArgumentError, match=r"src -7"):
        pg.recv(np.ones(1), -7)
    frozen = np.ones(2)
    frozen.flags.writeable = False
    with pytest.raises(errors.BufferSpecError, match="writable") as info:
        pg.recv(frozen)
    assert f"[rank {comm.rank}] recv" in str(info.value)
    with pytest.raises(errors.InvalidArgumentError, match="isend"):
        pg.batch_isend_irecv([mpicoll.P2POp("put", np.ones(1), 0)])
    # batch_isend_irecv checks peers and tags as send and recv do
    with pytest.raises(errors.InvalidArgumentError, match=r"dst 99"):
        pg.batch_isend_irecv([mpicoll.P2POp("isend", np.ones(1), 99)])
    with pytest.raises(errors.InvalidArgumentError, match=r"tag -1"):
        pg.batch_isend_irecv([mpicoll.P2POp(pg.irecv, np.ones(1), 0, -1)])
    comm.Send(np.ones(1), MPI.PROC_NULL)  # a no-op, as in MPI
