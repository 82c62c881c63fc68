"""Tier 2: the topology-aware algorithms on real MPI, on several node maps.

A single machine is one node (``Split_type(COMM_TYPE_SHARED)``), so the
maps come from ``MPICOLL_RANKS_PER_NODE``: unset (one node), 2 and 3 (at
5 ranks: nodes of 2, 2, 1 and of 3, 2; uneven on purpose). The variable is
read when a communicator's context is made, so each test wraps a fresh
``Dup`` of the world after setting it. The checks are
``test_collectives_mpi``'s (bitwise agreement with native MPI and with a
NumPy fold, in and out of place, every root, a non-commutative op),
run here for the topology-aware algorithms only.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.coll import lookup, registry
from mpidata import values
from test_collectives_mpi import test_allgather as check_allgather
from test_collectives_mpi import test_allreduce as check_allreduce
from test_collectives_mpi import test_bcast as check_bcast

pytestmark = pytest.mark.mpi


def topology(collective):
    return [n for n in mpicoll.algorithms(collective)
            if lookup(collective, n).topology]


def wrap_world(monkeypatch, ranks_per_node, **env) -> mpicoll.Comm:
    """A Comm on a fresh Dup of the world, made under these settings."""
    if ranks_per_node is None:
        monkeypatch.delenv("MPICOLL_RANKS_PER_NODE", raising=False)
    else:
        monkeypatch.setenv("MPICOLL_RANKS_PER_NODE", str(ranks_per_node))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return mpicoll.Comm(MPI.COMM_WORLD.Dup())


def free(comm: mpicoll.Comm) -> None:
    comm.Free()  # the private duplicate, then the communicator


@pytest.fixture(params=[2, 3], ids=["nodes-of-2", "nodes-of-3"])
def comm(request, monkeypatch):
    """Nodes of MPICOLL_RANKS_PER_NODE ranks (one node: the world, Dup and
    Split communicators of test_collectives_mpi already run these
    algorithms there)."""
    comm = wrap_world(monkeypatch, request.param)
    yield comm
    free(comm)


@pytest.fixture(params=[None, 2, 3], ids=["one-node", "nodes-of-2",
                                          "nodes-of-3"])
def any_comm(request, monkeypatch):
    """``(ranks per node, Comm)``, also without MPICOLL_RANKS_PER_NODE:
    nodes then come from Split_type, a collective the first
    topology-aware call makes."""
    comm = wrap_world(monkeypatch, request.param)
    yield request.param, comm
    free(comm)


def test_node_map(any_comm):
    k, comm = any_comm
    k = k or comm.size  # one machine: one node
    assert comm._engine.ctx.nodes == tuple(
        r // k for r in range(comm.size))


def spy_on_builder(monkeypatch, collective: str, name: str,
                   keyword: str) -> list:
    """Wrap the registered builder of ``collective``'s ``name`` for this
    test: the list it returns collects the ``keyword`` argument (the node
    map, the Cartesian dims) of every schedule built."""
    real = lookup(collective, name)
    seen = []

    def spy(*args, **kwargs):
        seen.append(kwargs[keyword])
        return real.build(*args, **kwargs)

    monkeypatch.setitem(registry._REGISTRY[collective], name,
                        dataclasses.replace(real, build=spy))
    return seen


def test_plans_get_the_node_map(any_comm, monkeypatch):
    """Context.plan hands the node map to topology-aware builders."""
    _, comm = any_comm
    seen = spy_on_builder(monkeypatch, "allreduce", "hierarchical", "nodes")
    x = np.ones(10)
    comm.Allreduce(MPI.IN_PLACE, x, MPI.SUM, algorithm="hierarchical")
    assert np.all(x == comm.size)
    assert seen == [comm._engine.ctx.nodes]


@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
@pytest.mark.parametrize("op_name", ["sum", "affine"])
@pytest.mark.parametrize("algorithm", topology("allreduce"))
def test_allreduce(comm, algorithm, op_name, inplace):
    check_allreduce(comm, algorithm, op_name, inplace)


@pytest.mark.parametrize("algorithm", topology("bcast"))
def test_bcast(comm, algorithm):
    check_bcast(comm, algorithm)


@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
@pytest.mark.parametrize("algorithm", topology("allgather"))
def test_allgather(comm, algorithm, inplace):
    check_allgather(comm, algorithm, inplace)


def test_nonblocking_in_flight_together(any_comm):
    """The first call plans (and, with no map set, finds the nodes)
    while the others are posted; all complete with the right results."""
    _, comm = any_comm
    p, r = comm.size, comm.rank
    x = values(r, 37, "int64")
    total = sum(values(q, 37, "int64") for q in range(p))
    outs = [np.zeros(37, np.int64) for _ in topology("allreduce")]
    root = p - 1
    data = values(root, 11, "int64") if r == root else np.zeros(11, np.int64)
    gathered = np.zeros(5 * p, np.int64)
    works = [comm.Iallreduce(x, out, MPI.SUM, algorithm=name)
             for name, out in zip(topology("allreduce"), outs)]
    works.append(comm.Ibcast(data, root=root, algorithm="hierarchical"))
    works.append(comm.Iallgather(x[:5], gathered, algorithm="hierarchical"))
    mpicoll.waitall(works)
    for out in outs:
        assert np.array_equal(out, total)
    assert np.array_equal(data, values(root, 11, "int64"))
    assert np.array_equal(gathered, np.concatenate(
        [values(q, 5, "int64") for q in range(p)]))


@pytest.mark.parametrize("name", topology("allreduce"))
def test_chosen_through_the_environment(monkeypatch, name):
    comm = wrap_world(monkeypatch, 2, MPICOLL_ALLREDUCE_ALGORITHM=name)
    try:
        assert comm.explain("allreduce", count=1 << 20).algorithm.name == name
        x = values(comm.rank, 1000, "float64")
        comm.Allreduce(MPI.IN_PLACE, x, MPI.SUM)
        assert np.array_equal(x, sum(values(q, 1000, "float64")
                                     for q in range(comm.size)))
    finally:
        free(comm)
