"""Tier 1: translation-invariant rounds on rings, tori and hypercubes in
a fluid model of SimGrid's sharing (:mod:`mpicoll.sim.simgrid.torusflow`):
the classes of flows, equality with SimGrid's own simulation where the
links' loads are even, the bracket where they are not, and the checks
that keep the model to the rounds it can price."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mpicoll.bench.specs import SPECS
from mpicoll.sim.simgrid import parse, ringflow, run_collective
from mpicoll.sim.simgrid.ringflow import NotClosedForm
from mpicoll.sim.simgrid.torusflow import classes, closed_form, coordinates, \
    predict

MIB = 1 << 20


def linear_alltoall(spec: str, nbytes: int = MIB, **speeds):
    plat = parse(spec, **speeds)
    count = SPECS["alltoall"].count_for(nbytes, plat.nodes, 4)
    return plat, count


def test_coordinates_as_simgrid_numbers_nodes():
    """The first dimension varies fastest: node 7 of 3x5 is (1, 2)."""
    assert coordinates(np.array([0, 1, 3, 7]), (3, 5)).tolist() == \
        [[0, 0], [1, 0], [0, 1], [1, 2]]


def test_classes_split_the_half_way_flows():
    """On a ring of 8, offset 4 goes clockwise except from node 4: two
    classes of 4 links each way; offsets 3 and 5 one class each. The
    busiest links carry what every other source puts on them clockwise
    and one flow anticlockwise (twice the even spread's 1/2)."""
    shifts = np.array([[3], [4], [5]])
    for busiest, cw, ccw in [(True, 1, 2 / 8), (False, 7 / 8, 1 / 8)]:
        weight, hops, nbytes = classes(shifts, np.array([1, 2, 3]), (8,),
                                       busiest)
        assert weight.tolist() == [1, cw, 1, ccw]
        assert hops.tolist() == [[3, 0], [4, 0], [0, 3], [0, 4]]
        assert nbytes.tolist() == [1, 2, 3, 2]


def test_a_hypercube_dimension_is_one_kind_of_link():
    """On dimensions of 2, half the flows go each way on links that carry
    the same: one kind of link, no split."""
    shifts = coordinates(np.arange(1, 8), (2, 2, 2))
    weight, hops, _ = classes(shifts, np.ones(7), (2, 2, 2))
    assert weight.tolist() == [1] * 7
    assert hops[:, 1::2].sum() == 0
    assert hops.sum(axis=1).tolist() == [1, 1, 2, 1, 2, 2, 3]


@pytest.mark.parametrize("spec", ["ring:15", "ring:16", "torus:3x5",
                                  "hypercube:4"])
def test_the_linear_alltoall_equals_simgrid(simgrid, spec):
    """Odd dimensions, the hypercube and a ring (whose busiest links
    decide): SimGrid's exact simulation of all the flows agrees."""
    plat, count = linear_alltoall(spec)
    priced = predict("alltoall", "linear", plat.nodes, count, 4, plat, 0)
    exact = run_collective("alltoall", "linear", plat.nodes, count, plat,
                     itemsize=4, gamma=0)
    assert priced.time == pytest.approx(exact.time, rel=1e-9)
    assert (priced.rounds, priced.distinct) == (1, 1)


def test_even_tori_are_bracketed(simgrid):
    """torus:4x4: the half-way flows' loads spread evenly and as on the
    busiest links bracket SimGrid's time (docs/simulation.md gives the
    gap as it shrinks with the torus)."""
    plat, count = linear_alltoall("torus:4x4")
    even = predict("alltoall", "linear", 16, count, 4, plat, 0,
                   busiest=False).time
    busiest = predict("alltoall", "linear", 16, count, 4, plat, 0).time
    exact = run_collective("alltoall", "linear", 16, count, plat, itemsize=4,
                     gamma=0).time
    assert even < exact < busiest


def test_the_tcp_window_bound_holds(simgrid):
    """With links of 10 TB/s and 100 µs, the flows' fair shares are above
    their TCP window bounds (4 MiB / (2 × path latency)): the bounds
    decide, in SimGrid and here."""
    plat, count = linear_alltoall("ring:31", 64 * MIB, bandwidth=1e13,
                                  latency=1e-4)
    priced = predict("alltoall", "linear", 31, count, 4, plat, 0).time
    exact = run_collective("alltoall", "linear", 31, count, plat, itemsize=4,
                     gamma=0).time
    assert priced == pytest.approx(exact, rel=1e-9)
    uncapped = parse("ring:31", bandwidth=1e13, latency=1e-6)
    assert priced > 50 * predict("alltoall", "linear", 31, count, 4,
                                 uncapped, 0).time


@pytest.mark.parametrize("collective, algorithm, spec", [
    ("allreduce", "recursive_doubling", "hypercube:4"),  # xor rounds
    ("allgather", "ring", "ring:15"),  # shift rounds
    ("allgather", "recursive_doubling", "hypercube:3"),
    ("alltoall", "pairwise", "ring:9"),
])
def test_several_rounds_equal_simgrid(simgrid, collective, algorithm, spec):
    plat = parse(spec)
    count = SPECS[collective].count_for(MIB, plat.nodes, 4)
    priced = predict(collective, algorithm, plat.nodes, count, 4, plat,
                     1e-10)
    exact = run_collective(collective, algorithm, plat.nodes, count, plat,
                     itemsize=4, gamma=1e-10)
    assert priced.time == pytest.approx(exact.time, rel=1e-9)


@pytest.mark.parametrize("collective", ["bcast", "gather", "scatter"])
def test_a_fan_on_a_ring_equals_simgrid(simgrid, collective):
    """The linear broadcast (scatter, gather): every flow leaves (reaches)
    the root, whose two links set the shares; SimGrid agrees within 10⁻⁵
    (docs/simulation.md: 2·10⁻⁶ at 1,024 ranks)."""
    plat = parse("ring:64")
    count = SPECS[collective].count_for(MIB, 64, 4)
    priced = predict(collective, "linear", 64, count, 4, plat, 0)
    exact = run_collective(collective, "linear", 64, count, plat, itemsize=4,
                     gamma=0)
    assert priced.symmetry == "rooted"
    assert priced.time == pytest.approx(exact.time, rel=1e-5)


def test_a_fan_held_by_the_tcp_window_equals_simgrid(simgrid):
    """Links of 10 TB/s and 100 µs: every flow of the broadcast runs at
    its own TCP window bound, the farther the slower, in SimGrid and
    here; a schedule of several rounds with a root is refused."""
    plat = parse("ring:31", bandwidth=1e13, latency=1e-4)
    count = SPECS["bcast"].count_for(64 * MIB, 31, 4)
    priced = predict("bcast", "linear", 31, count, 4, plat, 0).time
    exact = run_collective("bcast", "linear", 31, count, plat, itemsize=4,
                     gamma=0).time
    assert priced == pytest.approx(exact, rel=1e-5)
    farthest = 15 * plat.latency  # 15 links, then 64 MiB at its bound
    assert priced == pytest.approx(
        farthest + 64 * MIB / (4 * MIB / (2 * farthest)), rel=1e-6)
    with pytest.raises(NotClosedForm, match="several rounds"):
        predict("bcast", "binomial", 64, count, 4, parse("ring:64"), 0)


def test_rounds_that_differ_from_node_to_node_are_refused():
    """The ring allgather's shift by one rank is not a translation of a
    3x5 torus (rank 2's next is on the next row)."""
    plat = parse("torus:3x5")
    count = SPECS["allgather"].count_for(MIB, 15, 4)
    with pytest.raises(NotClosedForm, match="differ from node to node"):
        predict("allgather", "ring", 15, count, 4, plat, 0)


def test_only_one_rank_on_each_node_of_a_torus():
    with pytest.raises(ValueError, match="ring:P, torus"):
        predict("alltoall", "linear", 16, 16, 4,
                parse("fattree:2;4,4;1,2;1,1"), 0)
    with pytest.raises(ValueError, match="one rank on each of its 8"):
        predict("alltoall", "linear", 16, 16, 4,
                parse("ring:8", ranks_per_node=2), 0)


def test_closed_form_takes_the_ring_form_first():
    """On a ring, rounds whose flows cross as many links go to ringflow
    (which also takes nodes); the linear all-to-all's to this module."""
    plat, count = linear_alltoall("ring:16")
    assert closed_form("alltoall", "linear", 16, count, 4, plat,
                       0).time == predict("alltoall", "linear", 16, count,
                                          4, plat, 0).time
    nodes = parse("ring:8", ranks_per_node=2)  # the ring form's alone
    count = SPECS["allreduce"].count_for(MIB, 16, 4)
    assert closed_form("allreduce", "rabenseifner", 16, count, 4, nodes,
                       0) == ringflow.predict("allreduce", "rabenseifner",
                                              16, count, 4, nodes, 0)
    with pytest.raises(NotClosedForm):  # nodes: the ring form or nothing
        closed_form("alltoall", "linear", 32, count, 4,
                    parse("ring:16", ranks_per_node=2), 0)


def test_the_simulate_command_prices_a_torus(tmp_path, capsys):
    from mpicoll.sim.predict import main

    assert main(["-c", "alltoall", "-a", "linear", "--model", "closed-form",
                 "--network", "torus:4x4", "--ranks", "16", "-b", "1M",
                 "-e", "1M"]) == 0
    assert "closed-form model, even sides as their busiest links, " \
        "torus:4x4" in capsys.readouterr().out
    assert main(["-c", "alltoall", "-a", "linear", "--model", "closed-form",
                 "--network", "torus:3x5", "--ranks", "15", "-b", "1M",
                 "-e", "1M"]) == 0
    assert "closed-form model, torus:3x5" in capsys.readouterr().out  # exact

    out = tmp_path / "p.json"
    assert main(["-c", "alltoall", "-a", "linear", "--model", "closed-form",
                 "--network", "torus:3x5", "--ranks", "15", "-b", "1M",
                 "-e", "1M", "--quiet", "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["records"]
    plat, count = linear_alltoall("torus:3x5")
    want = predict("alltoall", "linear", 15, count, 4, plat, 1e-10).time
    assert row["time_us"]["avg"] == pytest.approx(want * 1e6)
