"""Tier 2, with PyTorch installed (``pip install 'mpicoll[torch]'``;
skipped otherwise): torch tensors through both faces, zero-copy, against
torch.distributed itself (the gloo backend on the same ranks)."""

from __future__ import annotations

import socket

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

pytestmark = pytest.mark.mpi
WORLD = MPI.COMM_WORLD


@pytest.fixture(scope="module")
def gloo():
    """torch.distributed (gloo) on the same ranks, on a port rank 0 found
    free and told the others."""
    port = None
    if WORLD.rank == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    port = WORLD.bcast(port)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=WORLD.rank, world_size=WORLD.size)
    yield dist
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def pg():
    return mpicoll.ProcessGroup(WORLD)


def tensor(rank, n, dtype=torch.float64):
    return torch.arange(n, dtype=dtype) * 10 + rank + 1


@pytest.mark.parametrize("algorithm", ["auto", *mpicoll.algorithms("allreduce")])
def test_all_reduce_as_gloo(gloo, pg, algorithm):
    r = WORLD.rank
    for op, name in ((dist.ReduceOp.SUM, "SUM"), (dist.ReduceOp.MAX, "MAX")):
        want = tensor(r, 6).reshape(2, 3)
        gloo.all_reduce(want, op=op)
        got = tensor(r, 6).reshape(2, 3)
        pointer = got.data_ptr()
        pg.all_reduce(got, op=getattr(mpicoll.ReduceOp, name),
                      algorithm=algorithm)
        assert got.data_ptr() == pointer  # zero-copy: in the caller's tensor
        assert torch.equal(got, want), (name, algorithm)


def test_rooted_and_gathering_calls_as_gloo(gloo, pg):
    p, r = WORLD.size, WORLD.rank
    for src in range(p):
        want, got = tensor(r, 4), tensor(r, 4)
        gloo.broadcast(want, src=src)
        pg.broadcast(got, src=src)
        assert torch.equal(got, want)
        want, got = tensor(r, 4), tensor(r, 4)
        gloo.reduce(want, dst=src)
        pg.reduce(got, dst=src)
        if r == src:
            assert torch.equal(got, want)
    want = [torch.zeros(3, dtype=torch.int32) for _ in range(p)]
    got = [torch.zeros(3, dtype=torch.int32) for _ in range(p)]
    gloo.all_gather(want, torch.full((3,), r, dtype=torch.int32))
    pg.all_gather(got, torch.full((3,), r, dtype=torch.int32))
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    want = [torch.zeros(2) for _ in range(p)] if r == 0 else None
    got = [torch.zeros(2) for _ in range(p)] if r == 0 else None
    gloo.gather(tensor(r, 2, torch.float32), want, dst=0)
    pg.gather(tensor(r, 2, torch.float32), got, dst=0)
    if r == 0:
        assert all(torch.equal(a, b) for a, b in zip(got, want))
    parts = [tensor(q, 2) for q in range(p)] if r == p - 1 else None
    want, got = torch.zeros(2, dtype=torch.float64), \
        torch.zeros(2, dtype=torch.float64)
    gloo.scatter(want, parts, src=p - 1)
    pg.scatter(got, parts, src=p - 1)
    assert torch.equal(got, want)


def test_all_to_all_single_as_gloo(gloo, pg):
    p, r = WORLD.size, WORLD.rank
    send = torch.arange(2 * p, dtype=torch.int64).reshape(p, 2) + 100 * r
    want, got = torch.zeros_like(send), torch.zeros_like(send)
    gloo.all_to_all_single(want, send)
    pg.all_to_all_single(got, send)
    assert torch.equal(got, want)


def test_mpi4py_face_takes_tensors_as_mpi4py_does(pg):
    """mpi4py 4 takes DLPack objects; mpicoll.Comm the same, in place."""
    comm = pg.comm
    raw = MPI.Intracomm(comm)
    for algorithm in ["auto", *mpicoll.algorithms("allreduce")]:
        want, got = tensor(WORLD.rank, 5), tensor(WORLD.rank, 5)
        raw.Allreduce(MPI.IN_PLACE, want, MPI.SUM)
        pointer = got.data_ptr()
        comm.Allreduce(MPI.IN_PLACE, got, MPI.SUM, algorithm=algorithm)
        assert got.data_ptr() == pointer
        assert torch.equal(got, want), algorithm
    out = torch.zeros(3 * WORLD.size, dtype=torch.int32)
    comm.Allgather(torch.full((3,), WORLD.rank, dtype=torch.int32), out)
    assert np.array_equal(out.numpy(), np.repeat(np.arange(WORLD.size), 3))
