"""Tier 2: the algorithms that follow the network, on real MPI.

The torus allreduce on Cartesian communicators of every shape
``MPI.Compute_dims`` gives the world in one to three dimensions (and a
lopsided one), and on an ``mpicoll.Mesh``: the context reads the
dimensions with ``Get_topo`` and the builder gets them; results agree
bitwise with native MPI and a NumPy fold, in and out of place, for a
commutative and a non-commutative op (``test_collectives_mpi``'s
checks). Then the hierarchical all-to-all(v) on node maps from
``MPICOLL_RANKS_PER_NODE`` (2 and 3: uneven at most world sizes),
checked by ``test_primitives_mpi``'s comparisons with native MPI.
"""

from __future__ import annotations


import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpidata import values
from test_collectives_mpi import test_allreduce as check_allreduce
from test_hierarchical_mpi import spy_on_builder
from test_primitives_mpi import test_alltoall as check_alltoall
from test_primitives_mpi import test_alltoallv as check_alltoallv

pytestmark = pytest.mark.mpi


def shapes(size: int) -> list[tuple[int, ...]]:
    out = [tuple(MPI.Compute_dims(size, k)) for k in (1, 2, 3)]
    out.append((1, size))  # a dimension of 1 is skipped
    return list(dict.fromkeys(out))


@pytest.fixture(params=shapes(MPI.COMM_WORLD.Get_size()),
                ids=lambda d: "x".join(map(str, d)))
def cart(request):
    comm = mpicoll.Comm(MPI.COMM_WORLD.Create_cart(request.param))
    yield request.param, comm
    comm.Free()


def test_the_context_reads_the_cartesian_dims(cart):
    dims, comm = cart
    assert isinstance(comm, MPI.Cartcomm)
    assert comm._engine.ctx.dims == dims
    assert mpicoll.Comm(MPI.COMM_WORLD)._engine.ctx.dims is None


@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
@pytest.mark.parametrize("op_name", ["sum", "affine"])
def test_torus_on_a_cartcomm(cart, op_name, inplace):
    _, comm = cart
    check_allreduce(comm, "torus", op_name, inplace)


def test_the_builder_gets_the_dims(cart, monkeypatch):
    dims, comm = cart
    seen = spy_on_builder(monkeypatch, "allreduce", "torus", "dims")
    x = values(comm.rank, 100, "float64")
    comm.Allreduce(MPI.IN_PLACE, x, MPI.SUM, algorithm="torus")
    assert seen == [dims]
    assert np.array_equal(x, sum(values(q, 100, "float64")
                                 for q in range(comm.size)))


def test_torus_on_a_mesh():
    p = MPI.COMM_WORLD.Get_size()
    shape = tuple(MPI.Compute_dims(p, 3))
    mesh = mpicoll.Mesh(shape=shape, names=("dp", "pp", "tp"))
    try:
        assert mesh.comm._engine.ctx.dims == shape
        x = values(mesh.comm.rank, 1001, "float64")
        got, native = np.empty_like(x), np.empty_like(x)
        mesh.comm.Allreduce(x, got, MPI.SUM, algorithm="torus")
        MPI.COMM_WORLD.Allreduce(x, native, MPI.SUM)
        assert np.array_equal(got, native)
        # the torch face of the same mesh
        y = x.copy()
        mesh.get_group(("dp", "pp", "tp")).all_reduce(y, algorithm="torus")
        assert np.array_equal(y, native)
    finally:
        mesh.free()


@pytest.fixture(params=[None, 2, 3], ids=["one-node", "nodes-of-2",
                                          "nodes-of-3"])
def nodes_comm(request, monkeypatch):
    if request.param is None:
        monkeypatch.delenv("MPICOLL_RANKS_PER_NODE", raising=False)
    else:
        monkeypatch.setenv("MPICOLL_RANKS_PER_NODE", str(request.param))
    comm = mpicoll.Comm(MPI.COMM_WORLD.Dup())
    yield comm
    comm.Free()


@pytest.mark.parametrize("algorithm", ["hierarchical", "hierarchical_2d"])
@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
def test_hierarchical_alltoall(nodes_comm, algorithm, inplace):
    check_alltoall(nodes_comm, algorithm, inplace)


@pytest.mark.parametrize("algorithm", ["hierarchical", "hierarchical_2d"])
@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
def test_hierarchical_alltoallv(nodes_comm, algorithm, inplace):
    check_alltoallv(nodes_comm, algorithm, inplace)
