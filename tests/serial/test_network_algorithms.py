"""Tier 1: the algorithms that follow the network, in the one-process simulator.

The n-dimensional torus allreduce (``torus``) on grids of one to four
dimensions given as ``dims=`` (what a Cartesian communicator passes), in
and out of place, integer sums and the non-commutative string fold;
every message going to a neighbour along one dimension of the grid; the
rounds, bytes and scratch its docstring claims (:func:`mpicoll.model.cost.profile`);
and dims that do not hold the communicator, refused by every rank's
builder before any message. Then the hierarchical all-to-all: which ranks
cross nodes and with how many messages, its rounds, bytes and scratch,
and the flat pairwise exchange it becomes with one rank per node.
(``tests/serial/test_algorithms_hierarchical.py`` runs both on every node
map.)
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mpicoll.coll import lookup
from mpicoll.coll.torus import torus_grid
from mpicoll.parallel.mesh import Layout
from mpicoll.model.cost import profile
from mpicoll.sim.simgrid.networks import parse
from mpicoll.sim.data import simulate
from mpicoll.sim.predict import main, torus_dims
from test_schedules import check_case, str_counts

GRIDS = [(1,), (5,), (2, 2), (2, 3), (3, 2), (1, 4), (4, 1), (3, 3),
         (2, 2, 2), (2, 3, 2), (3, 1, 2), (2, 2, 2, 2)]


@pytest.mark.parametrize("dims", GRIDS, ids=lambda d: "x".join(map(str, d)))
def test_torus_on_given_dims(dims):
    p = math.prod(dims)
    for kind in ("int", "str"):
        for count in str_counts(p):
            for inplace in (False, True):
                check_case("allreduce", "torus", p, count, inplace=inplace,
                           kind=kind, dims=dims)


def test_torus_dims_win_over_the_node_map():
    # Nodes of 2 would make a 3 x 2 grid; dims (2, 3) make rows of 3.
    nodes = (0, 0, 1, 1, 2, 2)
    assert torus_grid(6, nodes, (2, 3), True) == ((2, 3), tuple(range(6)))
    first = lookup("allreduce", "torus").schedule(0, 6, 12, nodes=nodes,
                                                  dims=(2, 3))
    assert {s.peer for rnd in first.rounds for s in rnd.sends} == {1, 3}


def test_dims_reach_cartesian_builders_only():
    ring = lookup("allreduce", "ring")
    assert ring.schedule(1, 6, 12, dims=(2, 3)) == ring.schedule(1, 6, 12)


def coords(rank, dims):
    return Layout(dims, tuple(f"d{i}" for i in range(len(dims))),
                  (True,) * len(dims)).coords(rank)


@pytest.mark.parametrize("dims", [(4, 4), (2, 3, 4), (3, 3, 3)])
@pytest.mark.parametrize("commutative", [True, False])
def test_torus_talks_to_torus_neighbours_only(dims, commutative):
    """Every message goes along one dimension of the grid; one step (with
    wraparound), on a torus network of these dimensions one link, for a
    commutative op (rings); anywhere in the line for a non-commutative
    one (pairwise reduce-scatter, then the rings' allgather)."""
    p = math.prod(dims)
    alg = lookup("allreduce", "torus")
    for r in range(p):
        sched = alg.schedule(r, p, 1000, commutative=commutative, dims=dims)
        for rnd in sched.rounds:
            for peer in [s.peer for s in rnd.sends] + [q.peer for q in rnd.recvs]:
                a, b = coords(r, dims), coords(peer, dims)
                moved = [i for i in range(len(dims)) if a[i] != b[i]]
                assert len(moved) == 1, (r, peer)
                i = moved[0]
                if commutative:
                    assert (a[i] - b[i]) % dims[i] in (1, dims[i] - 1), \
                        (r, peer)


def test_torus_lines_are_the_mesh_groups():
    """The ranks a line reduces with are the mesh's group along that
    dimension (``Layout.group``, what ``mesh[name]`` spans)."""
    layout = Layout.resolve(24, (2, 3, 4), ("dp", "pp", "tp"))
    alg = lookup("allreduce", "torus")
    for r in range(24):
        sched = alg.schedule(r, 24, 240, dims=layout.shape)
        peers = {s.peer for rnd in sched.rounds for s in rnd.sends}
        line_peers = set()
        for name in layout.names:
            line = layout.group(r, (name,))
            line_peers.add(line[(line.index(r) + 1) % len(line)])
        assert peers == line_peers, r


@pytest.mark.parametrize("dims", [(4, 4), (2, 3, 4), (4, 4, 4), (8, 2, 2, 2)])
@pytest.mark.parametrize("commutative", [True, False])
def test_torus_rounds_bytes_and_scratch(dims, commutative):
    p = math.prod(dims)
    count = 7 * p * 5  # every segment divides evenly
    itemsize = 4
    n = count * itemsize
    for r in profile("allreduce", "torus", p, count, itemsize,
                     commutative=commutative, dims=dims):
        assert r.rounds == r.messages == 2 * sum(d - 1 for d in dims)
        assert r.bytes_sent == r.bytes_received == 2 * n * (p - 1) // p
        assert r.bytes_reduced == n * (p - 1) // p
    tmp = max(lookup("allreduce", "torus").schedule(
        r, p, count, commutative=commutative, dims=dims).tmp
        for r in range(p))
    seg, blocks = count, 0  # one block of each dimension's segment
    for d in reversed(dims):
        seg //= d
        blocks += seg
    assert blocks < 2 * count // dims[-1]
    if commutative:
        assert tmp == blocks
    else:  # pairwise of 2 needs no landing block
        assert blocks < tmp <= 3 * blocks


@pytest.mark.parametrize("dims, p", [((3, 3), 8), ((2, 4), 4), ((0, 8), 8),
                                     ((2, -4), 8), ((), 1)])
def test_torus_refuses_dims_that_do_not_hold_the_ranks(dims, p):
    alg = lookup("allreduce", "torus")
    for r in range(p):  # every rank's builder, before any message
        with pytest.raises(ValueError, match="torus: dims"):
            alg.schedule(r, p, 10, dims=dims)
    with pytest.raises(ValueError, match="torus: dims"):
        simulate("allreduce", "torus", [np.arange(10)] * p, dims=dims)


def test_the_simulator_runs_torus_on_the_networks_dims(tmp_path, capsys):
    """SimGrid numbers a torus's hosts with the first dimension fastest,
    MPI the last: ``torus:AxBxC`` is the Cartesian grid ``(C, B, A)``,
    ranks of one node a last dimension of their own."""
    assert torus_dims(parse("torus:4x2x3")) == (3, 2, 4)
    assert torus_dims(parse("torus:4x2", ranks_per_node=2)) == (2, 4, 2)
    assert torus_dims(parse("ring:5")) == (5,)
    assert torus_dims(parse("hypercube:3")) == (2, 2, 2)
    assert torus_dims(parse("flat:8")) is None
    assert torus_dims(parse("dragonfly:2,2,2,2")) is None
    out = tmp_path / "t.json"
    assert main(["-a", "torus", "--network", "torus:4x2", "--ranks", "8,4",
                 "-b", "1K", "-e", "1K", "--json", str(out)]) == 0
    # 8 ranks fill the torus; 4 do not: skipped, saying why
    assert "torus skipped: torus: dims (2, 4) hold 8 ranks, the " \
        "communicator has 4" in capsys.readouterr().err
    records = json.loads(out.read_text())["records"]
    assert [r["nranks"] for r in records] == [8]


# --- hierarchical all-to-all ------------------------------------------------

def cross(sched, rank, nodes):
    """(messages, elements) ``rank`` sends to other nodes."""
    sends = [s for rnd in sched.rounds for s in rnd.sends
             if nodes[s.peer] != nodes[rank]]
    return len(sends), sum(len(s.span) for s in sends)


@pytest.mark.parametrize("m, L", [(1, 2), (2, 2), (3, 4), (4, 3), (5, 1)])
def test_alltoall_crosses_nodes_from_leaders_only(m, L):
    p, count = m * L, 3
    nodes = tuple(r // L for r in range(p))
    n = p * count
    alg = lookup("alltoall", "hierarchical")
    for r in range(p):
        sched = alg.schedule(r, p, count, nodes=nodes)
        messages, elements = cross(sched, r, nodes)
        if r % L:
            assert (messages, elements) == (0, 0), r
            assert sched.tmp == 0
        else:
            assert messages == m - 1, r
            assert elements == L * n * (m - 1) // m, r
            assert sched.tmp == (0 if L == 1 else (4 * L - 2) * n), r


@pytest.mark.parametrize("m, L", [(2, 2), (3, 4), (4, 2)])
def test_alltoall_rounds_and_bytes(m, L):
    p, count, itemsize = m * L, 5, 8
    n = p * count * itemsize
    nodes = tuple(r // L for r in range(p))
    for r in profile("alltoall", "hierarchical", p, count, itemsize,
                     nodes=nodes):
        if r.rank % L:
            assert (r.rounds, r.bytes_sent, r.bytes_received) == (2, n, n)
        else:
            assert r.rounds == m + 1
            assert r.bytes_sent == L * n * (m - 1) // m + (L - 1) * n


@pytest.mark.parametrize("p", [1, 2, 3, 5, 8])
def test_alltoall_one_rank_per_node_is_the_pairwise_exchange(p):
    hier = lookup("alltoall", "hierarchical")
    flat = lookup("alltoall", "pairwise")
    for r in range(p):
        assert hier.schedule(r, p, 4, nodes=tuple(range(p))) == \
            flat.schedule(r, p, 4)


def test_alltoallv_uneven_nodes_and_blocks():
    rng = np.random.default_rng(7)
    nodes = (0, 1, 0, 2, 2, 2, 1)  # uneven, not runs of consecutive ranks
    p = len(nodes)
    matrix = tuple(tuple(int(x) for x in rng.integers(0, 4, p))
                   for _ in range(p))
    check_case("alltoallv", "hierarchical", p, matrix, nodes=nodes)


@pytest.mark.parametrize("m, L", [(2, 2), (3, 4), (4, 2), (2, 1)])
def test_alltoall_2d_every_rank_crosses_with_node_sized_messages(m, L):
    """hierarchical_2d: every rank sends m-1 messages across nodes, each
    its node's L blocks for one rank, and L-1 inside its node; the bytes
    are the flat exchange's, and the schedule has m rounds (m-1 with one
    rank per node)."""
    p, count, itemsize = m * L, 5, 8
    n = p * count * itemsize  # one rank's send buffer, bytes
    nodes = tuple(r // L for r in range(p))
    alg = lookup("alltoall", "hierarchical_2d")
    for r in range(p):
        messages, elements = cross(alg.schedule(r, p, count, nodes=nodes),
                                   r, nodes)
        assert (messages, elements) == (m - 1, L * count * (m - 1)), r
    for r in profile("alltoall", "hierarchical_2d", p, count, itemsize,
                     nodes=nodes):
        assert r.rounds == (m if L > 1 else m - 1)
        assert r.messages == (L - 1) + (m - 1)
        assert r.bytes_sent == n * (L - 1) // L + n * (m - 1) // m


def test_alltoall_2d_on_uneven_nodes_is_the_pairwise_exchange():
    nodes, p = (0, 0, 0, 1, 1), 5
    matrix = tuple(tuple(3 for _ in range(p)) for _ in range(p))
    two_d = lookup("alltoallv", "hierarchical_2d")
    flat = lookup("alltoallv", "pairwise")
    for r in range(p):
        assert two_d.schedule(r, p, matrix, nodes=nodes) == \
            flat.schedule(r, p, matrix)
    check_case("alltoallv", "hierarchical_2d", p, matrix, nodes=nodes)
