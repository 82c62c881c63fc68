"""Tier 1: all-pairs rounds on SimGrid's dragonfly in a fluid model, by
the dragonfly's symmetries (:mod:`mpicoll.sim.simgrid.dragonflyflow`): the
routes are SimGrid's, the orbits are the symmetries', one class per
orbit gives what one class per flow gives, and the linear all-to-all
agrees with SimGrid's own simulation."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from mpicoll.bench.specs import SPECS
from mpicoll.sim.simgrid import parse, run_collective
from mpicoll.sim.simgrid.dragonflyflow import all_pairs, canonical, links, \
    node_coordinates, predict, round_time, route
from mpicoll.sim.simgrid.fluid import TCP_GAMMA, fluid
from mpicoll.sim.simgrid.ringflow import NotClosedForm
from mpicoll.sim.simgrid.torusflow import closed_form

MIB = 1 << 20
SMALL = ["dragonfly:2,3,4,2", "dragonfly:3,2,3,2"]  # R > G, and R == G

ROUTES = """
import json, sys, tempfile
import simgrid
from mpicoll.sim.simgrid import parse
plat = parse(sys.argv[1])
with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
    f.write(plat.xml())
engine = simgrid.Engine(["routes", "--log=root.thres:critical"])
engine.load_platform(f.name)
hosts = {h.name: h for h in engine.all_hosts}
print(json.dumps([[a, b, [link.name for link in
                          hosts[f"node{a}"].route_to(hosts[f"node{b}"])[0]]]
                  for a in range(plat.nodes) for b in range(plat.nodes)
                  if a != b]))
"""


def linear_alltoall(spec: str):
    plat = parse(spec)
    return plat, SPECS["alltoall"].count_for(MIB, plat.nodes, 4)


@pytest.mark.parametrize("spec", SMALL)
def test_the_routes_are_simgrids(simgrid, spec):
    """Every pair's route crosses SimGrid's links in SimGrid's order: one
    link name per link of :func:`route` and back, over all pairs."""
    proc = subprocess.run([sys.executable, "-c", ROUTES, spec],
                          capture_output=True, text=True, timeout=120,
                          check=True)
    shape = parse(spec).shape
    names: dict = {}
    mine: dict = {}
    for a, b, theirs in json.loads(proc.stdout):
        ours = route(node_coordinates(a, shape), node_coordinates(b, shape))
        assert len(ours) == len(theirs), (a, b, ours, theirs)
        for link, name in zip(ours, theirs):
            assert names.setdefault(name, link) == link
            assert mine.setdefault(link, name) == name
    assert set(mine) <= set(links(shape))


def test_a_symmetry_keeps_the_name_and_nothing_else_does():
    """On dragonfly:3,2,4,2, swapping groups 0 and 1 together with routers
    0 and 1 moves a flow to one of the same name, while putting router 2
    (which holds a global link) for router 3 (which holds none) does not;
    router 0 of group 0 and router 1 are not alike, a node of a high
    router in chassis 1 is alike in every group."""
    groups = 3
    flow = ("flow", (0, 1, 0, 1), (1, 0, 3, 0))
    swapped = ("flow", (1, 1, 1, 1), (0, 0, 3, 0))
    high = ("flow", (1, 1, 1, 0), (0, 0, 2, 1))  # 3 <-> 2 is not a symmetry
    assert canonical(flow, groups) == canonical(swapped, groups)
    assert canonical(flow, groups) != canonical(high, groups)
    assert canonical(("up", 0, 0, 0, 0), groups) != \
        canonical(("up", 0, 0, 1, 0), groups)
    assert canonical(("up", 0, 1, 3, 0), 3) == canonical(("up", 2, 1, 3, 1), 3)


@pytest.mark.parametrize("spec", [*SMALL, "dragonfly:4,4,4,4"])
def test_the_classes_hold_every_flow_and_whole_flows_per_link(spec):
    """The classes' counts add up to P (P - 1) flows, and every link of a
    kind carries a whole number of each class's flows."""
    plat = parse(spec)
    flows, load, crossed = all_pairs(plat.shape)
    assert flows.sum() == plat.nodes * (plat.nodes - 1)
    assert np.allclose(load, np.round(load))
    assert crossed.min() >= 2


@pytest.mark.parametrize("spec", SMALL)
def test_one_class_per_orbit_is_one_class_per_flow(spec):
    """The fluid model with every flow a class of its own and every link a
    kind of its own gives the same time as with one per orbit."""
    plat = parse(spec)
    shape, nodes = plat.shape, plat.nodes
    column = {link: i for i, link in enumerate(links(shape))}
    pairs = [(a, b) for a in range(nodes) for b in range(nodes) if a != b]
    load = np.zeros((len(pairs), len(column)))
    for i, (a, b) in enumerate(pairs):
        for link in route(node_coordinates(a, shape),
                          node_coordinates(b, shape)):
            load[i, column[link]] += 1
    start = load.sum(axis=1) * plat.latency
    nbytes = 21844.0
    every = fluid(start, TCP_GAMMA / (2 * start), np.full(len(pairs), nbytes),
                  load, plat.bandwidth)
    assert every == pytest.approx(round_time(nbytes, shape, plat.bandwidth,
                                             plat.latency), rel=1e-12)


@pytest.mark.parametrize("spec", SMALL)
def test_the_linear_alltoall_agrees_with_simgrid(simgrid, spec):
    """SimGrid's run of all the flows: the same within 1e-4 (measured
    2e-6 and 2e-5; SimGrid's max-min solver works to 1e-5,
    ``maxmin/precision``)."""
    plat, count = linear_alltoall(spec)
    priced = closed_form("alltoall", "linear", plat.nodes, count, 4, plat, 0)
    exact = run_collective("alltoall", "linear", plat.nodes, count, plat,
                     itemsize=4, gamma=0)
    assert priced.time == pytest.approx(exact.time, rel=1e-4)
    assert (priced.rounds, priced.distinct, priced.symmetry) == \
        (1, 1, "all-pairs")


def test_rounds_that_are_not_all_pairs_are_refused():
    plat, count = linear_alltoall(SMALL[0])
    with pytest.raises(NotClosedForm, match="every other rank"):
        predict("alltoall", "pairwise", plat.nodes, count, 4, plat, 0)
    with pytest.raises(ValueError, match="one rank on each"):
        predict("alltoall", "linear", 2 * plat.nodes, count, 4,
                parse(SMALL[0], ranks_per_node=2), 0)
    with pytest.raises(ValueError, match="dragonfly"):
        predict("alltoall", "linear", 16, count, 4, parse("torus:4x4"), 0)


def test_the_simulate_command_prices_a_dragonfly(capsys):
    from mpicoll.sim.predict import main

    assert main(["--model", "closed-form", "--network", SMALL[0],
                 "--ranks", "48", "-c", "alltoall", "-a", "linear,pairwise",
                 "-b", "1M", "-e", "1M"]) == 0
    out, err = capsys.readouterr()
    assert "closed-form model, dragonfly:2,3,4,2" in out
    assert "pairwise skipped" in err
    assert "1008.49" in out
