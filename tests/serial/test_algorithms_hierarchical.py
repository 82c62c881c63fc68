"""Tier 1: the topology-aware (hierarchical, torus) algorithms on many node maps.

``tests/serial/test_schedules.py`` sweeps them too, but without a node map (one
node). Here every algorithm registered with ``topology=True`` runs in the
one-process simulator (deadlock, message lengths, receive overlaps) on
sizes 1..9 with node maps uniform, uneven (``(0, 0, 1, 1, 2)``), one node,
one rank per node, round-robin (``(0, 1, 0, 1)``, nodes not runs of
consecutive ranks), lopsided and random, counts {0, 1, p-1, p, p+1, 1000},
in and out of place, every root; integer SUM checked exactly and, for the
reductions, :data:`~mpicoll.sim.data.STR_CONCAT` (non-commutative) whose
result must spell the fold ``x0 + x1 + ... + x{p-1}``.

Then what makes them hierarchical: which ranks talk across nodes and how
much, the torus layout, the cases where they must reduce to the flat
algorithm they are made of, the node-map plumbing of the registry and the
simulator, and that ``auto`` never picks them.
"""

from __future__ import annotations

import numpy as np
import pytest

from mpicoll.coll import algorithms, lookup
from mpicoll.coll.torus import torus_grid
from mpicoll.collectives import COLLECTIVES
from mpicoll.schedule.core import Schedule, ScheduleBuilder, Span
from mpicoll.schedule.group import Subgroup
from mpicoll.select.policy import Rules, choose
from mpicoll.sim.data import simulate
from mpicoll.topo import (
    canonical_nodes,
    contiguous_runs,
    locate,
    node_groups,
    shared_segments,
    square_grid,
)
from test_schedules import check_case, inplace_modes, int_counts, roots, str_counts

SIZES = range(1, 10)

TOPOLOGY = [(c, n) for c in COLLECTIVES for n in algorithms(c)
            if lookup(c, n).topology]


def node_maps(p: int) -> dict[str, tuple[int, ...]]:
    """Named node maps for ``p`` ranks (duplicates dropped)."""
    rng = np.random.default_rng(p)
    maps = {
        "pairs": tuple(r // 2 for r in range(p)),  # uneven for odd p
        "triples": tuple(r // 3 for r in range(p)),
        "one-node": (0,) * p,
        "one-per-node": tuple(range(p)),
        "round-robin": tuple(r % 2 for r in range(p)),
        "lopsided": tuple(min(r, 1) for r in range(p)),  # sizes 1, p-1
        "random": tuple(int(x) for x in rng.integers(0, 3, p)),
    }
    seen, out = set(), {}
    for name, nodes in maps.items():
        key = canonical_nodes(nodes, p)
        if key not in seen:
            seen.add(key)
            out[name] = nodes
    return out


def test_the_maps_cover_the_hard_cases():
    assert node_maps(5)["pairs"] == (0, 0, 1, 1, 2)
    assert node_maps(4)["round-robin"] == (0, 1, 0, 1)
    assert TOPOLOGY == [("allreduce", "hierarchical"),
                        ("allreduce", "hierarchical_reduce_bcast"),
                        ("allreduce", "torus"), ("bcast", "hierarchical"),
                        ("allgather", "hierarchical"),
                        ("alltoall", "hierarchical"),
                        ("alltoall", "hierarchical_2d"),
                        ("alltoallv", "hierarchical"),
                        ("alltoallv", "hierarchical_2d")]


CASES = [pytest.param(c, n, p, id=f"{c}-{n}-p{p}")
         for c, n in TOPOLOGY for p in SIZES]


@pytest.mark.parametrize(("collective", "name", "p"), CASES)
def test_every_node_map(collective, name, p):
    kinds = [("int", int_counts(p))]
    if COLLECTIVES[collective].reducing:
        kinds.append(("str", str_counts(p)))
    for nodes in node_maps(p).values():
        for kind, counts in kinds:
            for count in counts:
                if collective == "alltoallv":
                    count = ((count,) * p,) * p
                for root in roots(collective, p):
                    for inplace in inplace_modes(collective):
                        check_case(collective, name, p, count, root=root,
                                   inplace=inplace, kind=kind, nodes=nodes)


# --- what crosses nodes ------------------------------------------------------

def schedules(collective, name, p, count, nodes, **kw) -> list[Schedule]:
    alg = lookup(collective, name)
    return [alg.schedule(r, p, count, nodes=nodes, **kw) for r in range(p)]


def cross_node(sched: Schedule, rank: int, nodes) -> dict[int, int]:
    """Elements ``rank`` sends to each peer on another node."""
    out: dict[int, int] = {}
    for rnd in sched.rounds:
        for s in rnd.sends:
            if nodes[s.peer] != nodes[rank]:
                out[s.peer] = out.get(s.peer, 0) + len(s.span)
    return out


def local_rank(rank, nodes):
    return nodes[:rank].count(nodes[rank])


UNIFORM = (0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3)  # 4 nodes of 3


def test_allreduce_crosses_nodes_with_same_local_rank_peers_only():
    n = 1200
    for name in ("hierarchical", "torus"):
        for commutative in (True, False):
            scheds = schedules("allreduce", name, 12, n, UNIFORM,
                               commutative=commutative)
            for r, s in enumerate(scheds):
                sent = cross_node(s, r, UNIFORM)
                assert {local_rank(q, UNIFORM) for q in sent} == {
                    local_rank(r, UNIFORM)}, (name, r)
                # Rabenseifner, and torus's rings, on 4 nodes: 2 (n/L)(m-1)/m;
                # recursive doubling: (n/L) log2 m.
                want = 2 * 400 * 3 // 4 if commutative or name == "torus" \
                    else 400 * 2
                assert sum(sent.values()) == want, (name, commutative, r)


def test_reduce_bcast_crosses_nodes_from_leaders_only():
    n = 100
    scheds = schedules("allreduce", "hierarchical_reduce_bcast", 12, n,
                       UNIFORM)
    for r, s in enumerate(scheds):
        sent = cross_node(s, r, UNIFORM)
        if local_rank(r, UNIFORM):
            assert not sent, r
        else:
            assert sum(sent.values()) == n * 2  # recursive doubling, m=4


def test_bcast_sends_each_node_the_data_once():
    n = 50
    nodes = (0, 0, 1, 1, 1, 2, 0, 2)
    for root in range(8):
        into = {}
        for r, s in enumerate(schedules("bcast", "hierarchical", 8, n, nodes,
                                        root=root)):
            for q, k in cross_node(s, r, nodes).items():
                into[nodes[q]] = into.get(nodes[q], 0) + k
        assert into == {node: n for node in {0, 1, 2} - {nodes[root]}}, root


def test_allgather_crosses_nodes_with_same_local_rank_peers_only():
    count = 10
    for r, s in enumerate(schedules("allgather", "hierarchical", 12, count,
                                    UNIFORM)):
        sent = cross_node(s, r, UNIFORM)
        assert {local_rank(q, UNIFORM) for q in sent} == {
            local_rank(r, UNIFORM)}
        assert sum(sent.values()) == 3 * count  # its class, m-1 blocks
    # Uneven: the lone rank of node 2 is local rank 0 and stands in for
    # local rank 1: 2 blocks round class 0's ring, 1 round class 1's.
    nodes = (0, 0, 1, 1, 2)
    sent = cross_node(schedules("allgather", "hierarchical", 5, count,
                                nodes)[4], 4, nodes)
    assert sent == {0: 2 * count, 1: count}


def test_uneven_node_splits_its_block_across_pieces():
    # Nodes of 3 and 2: pieces at n/3, n/2, 2n/3; rank 3 (local 0 of the
    # node of 2) meets ranks 0 and 1 across nodes, one allreduce each.
    nodes = (0, 0, 0, 1, 1)
    s = schedules("allreduce", "hierarchical", 5, 60, nodes)[3]
    assert set(cross_node(s, 3, nodes)) == {0, 1}


# --- layouts and degenerate cases --------------------------------------------

def test_torus_grid_without_dims():
    def grid(nodes, commutative=True):
        return torus_grid(len(nodes), nodes, None, commutative)

    assert grid((0, 0, 1, 1, 2, 2)) == ((3, 2), (0, 1, 2, 3, 4, 5))
    assert grid((0, 1, 0, 1)) == ((2, 2), (0, 2, 1, 3))  # nodes as rows
    # Round-robin nodes would reorder a non-commutative fold: rank order.
    assert grid((0, 1, 0, 1), False) == ((2, 2), (0, 1, 2, 3))
    assert grid((0,) * 6) == ((2, 3), tuple(range(6)))  # square as can be
    assert grid(tuple(range(8))) == ((2, 4), tuple(range(8)))
    assert grid((0, 0, 1, 1, 2)) == ((1, 5), tuple(range(5)))  # a prime
    assert grid((0, 0, 0, 1, 1, 1, 1, 1, 1)) == ((3, 3), tuple(range(9)))


@pytest.mark.parametrize("p", [2, 3, 5, 7, 11, 13])
def test_torus_at_prime_size_is_the_ring(p):
    ring = schedules("allreduce", "ring", p, 100, None)
    assert schedules("allreduce", "torus", p, 100, (0,) * p) == ring


def test_hierarchical_reduces_to_its_flat_parts():
    for p in (1, 2, 3, 5, 8):
        one_node, own_nodes = (0,) * p, tuple(range(p))
        assert schedules("allreduce", "hierarchical", p, 100, one_node) == \
            schedules("allreduce", "ring", p, 100, None)
        assert schedules("allreduce", "hierarchical", p, 100, own_nodes) == \
            schedules("allreduce", "rabenseifner", p, 100, None)
        flat = schedules("allreduce", "recursive_doubling", p, 100, None,
                         commutative=False)
        for nodes in (own_nodes, tuple(r % 2 for r in range(p))):
            assert schedules("allreduce", "hierarchical", p, 100, nodes,
                             commutative=False) == flat
        assert schedules("allreduce", "hierarchical_reduce_bcast", p, 100,
                         one_node) == schedules("allreduce", "reduce_bcast",
                                                p, 100, None)
        for root in range(p):
            assert schedules("bcast", "hierarchical", p, 100, one_node,
                             root=root) == schedules("bcast", "binomial", p,
                                                     100, None, root=root)
        for nodes in (one_node, own_nodes):
            assert schedules("allgather", "hierarchical", p, 10, nodes) == \
                schedules("allgather", "ring", p, 10, None)


def test_allgather_scratch_only_when_layout_is_not_rank_order():
    tmp = [s.tmp for s in schedules("allgather", "hierarchical", 4, 10,
                                    (0, 0, 1, 1))]
    assert tmp == [40] * 4
    tmp = [s.tmp for s in schedules("allgather", "hierarchical", 4, 10,
                                    (0, 1, 0, 1))]
    assert tmp == [0] * 4


# --- topology helpers ---------------------------------------------------------

def test_node_groups_runs_and_canonical_maps():
    nodes = (0, 0, 1, 0, 2, 2, 1)
    assert node_groups(nodes) == ((0, 1, 3), (2, 6), (4, 5))
    assert contiguous_runs(nodes) == ((0, 1), (2,), (3,), (4, 5), (6,))
    assert canonical_nodes(("b", "b", "a", "c", "a"), 5) == (0, 0, 1, 2, 1)
    assert canonical_nodes(None, 3) == (0, 0, 0)
    with pytest.raises(ValueError, match="3 ranks"):
        canonical_nodes((0, 0, 1), 4)


def test_answers_kept_per_map_are_the_same_for_lists_and_tuples():
    """The helpers keep their last answers per map (every rank's builder
    asks for the same): a list asks for what its tuple does, an answer
    comes back unchanged, and errors are raised every time."""
    nodes = [0, 0, 1, 0, 2, 2, 1]
    assert node_groups(nodes) == node_groups(tuple(nodes))
    assert canonical_nodes(nodes, 7) is canonical_nodes(tuple(nodes), 7)
    groups = node_groups(nodes)
    assert [locate(r, groups) for r in range(7)] == [
        (0, 0), (0, 1), (1, 0), (0, 2), (2, 0), (2, 1), (1, 1)]
    assert locate(3, [[1, 3], [3]]) == (0, 1)  # the first group holding it
    for _ in range(2):
        with pytest.raises(ValueError, match="rank 7 is in no group"):
            locate(7, groups)
        with pytest.raises(ValueError, match="hold 8 ranks"):
            torus_grid(6, None, [2, 4], True)
    assert torus_grid(8, None, [2, 4], True) == ((2, 4), tuple(range(8)))


def test_shared_segments():
    assert shared_segments(12, (2, 3)) == (
        (0, 4, (0, 0)), (4, 6, (0, 1)), (6, 8, (1, 1)), (8, 12, (1, 2)))
    assert shared_segments(6, (3, 3)) == (
        (0, 2, (0, 0)), (2, 4, (1, 1)), (4, 6, (2, 2)))
    # Fewer elements than ranks: empty blocks own nothing.
    assert shared_segments(2, (4, 1)) == ((0, 1, (0, 0)), (1, 2, (1, 0)))
    assert shared_segments(0, (2, 2)) == ()


def test_square_grid():
    assert [square_grid(p) for p in (1, 2, 4, 6, 7, 12, 16, 18)] == [
        (1, 1), (1, 2), (2, 2), (2, 3), (1, 7), (3, 4), (4, 4), (3, 6)]


def test_subgroup_translates_peers_and_checks_spans():
    b = ScheduleBuilder()
    group = Subgroup(b, (5, 2))
    inner = ScheduleBuilder()
    inner.exchange(sends=[(1, Span("send", 0, 3))],
                   recvs=[(1, Span("recv", 0, 3))])
    group.embed(inner.build(), send=Span("recv", 10, 13),
                recv=Span("tmp", 0, 3))
    (rnd,) = b.build().rounds
    assert [(s.peer, s.span) for s in rnd.sends] == [(2, Span("recv", 10, 13))]
    assert [(r.peer, r.span) for r in rnd.recvs] == [(2, Span("tmp", 0, 3))]
    with pytest.raises(ValueError, match="outside"):
        group.embed(inner.build(), send=Span("send", 0, 2),
                    recv=Span("recv", 0, 3))


# --- registry, simulator and selection plumbing -------------------------------

def test_nodes_reach_topology_builders_only():
    ring = lookup("allreduce", "ring")
    assert not ring.topology
    assert ring.schedule(0, 4, 10, nodes=(0, 0, 1, 1)) is ring.schedule(0, 4, 10)
    hier = lookup("allreduce", "hierarchical")
    # Labels are renumbered, so equal machines share one cached schedule.
    assert hier.schedule(0, 4, 10, nodes=(7, 7, 3, 3)) is \
        hier.schedule(0, 4, 10, nodes=(0, 0, 1, 1))
    assert hier.schedule(0, 4, 10, nodes=(0, 0, 1, 1)) != \
        hier.schedule(0, 4, 10)
    with pytest.raises(ValueError, match="ranks"):
        hier.schedule(0, 4, 10, nodes=(0, 1))


def test_simulate_takes_nodes():
    xs = [np.arange(6) * (r + 1) for r in range(5)]
    for nodes in (None, (0, 0, 1, 1, 2)):
        for name in ("ring", "hierarchical"):
            outs = simulate("allreduce", name, xs, nodes=nodes)
            assert all(np.array_equal(o, np.arange(6) * 15) for o in outs)


def test_auto_never_picks_topology_algorithms():
    for c in ("allreduce", "bcast", "allgather", "alltoall", "alltoallv"):
        for size in (2, 3, 4, 8, 64):
            for nbytes in (0, 1 << 10, 1 << 16, 1 << 20, 1 << 26):
                for commutative in (True, False):
                    alg = choose(c, "auto", size=size, nbytes=nbytes,
                                 commutative=commutative, overrides={},
                                 where={}).algorithm
                    assert not alg.topology, (c, size, nbytes)


def test_reachable_by_name_environment_and_rules():
    where = {"rank": 0, "collective": "allreduce"}
    for name in ("hierarchical", "hierarchical_reduce_bcast", "torus"):
        kw = {"size": 4, "nbytes": 1 << 20, "commutative": False,
              "where": where}
        assert choose("allreduce", name, overrides={}, **kw).algorithm.name \
            == name
        assert choose("allreduce", "auto", overrides={"allreduce": name},
                      **kw).algorithm.name == name
        rules = Rules("r.json", 4, {"allreduce": [(None, name)]})
        assert choose("allreduce", "auto", overrides={}, rules=rules,
                      **kw).algorithm.name == name
