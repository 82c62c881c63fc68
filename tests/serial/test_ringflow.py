"""Tier 1: symmetric schedules on ``ring:P`` in closed form
(:mod:`mpicoll.sim.simgrid.ringflow`): SimGrid's routes, the checks that keep
the closed form to rounds where it is exact, and equality with SimGrid's
own simulation where both run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mpicoll.bench.specs import SPECS
from mpicoll.sim.simgrid import parse, run_collective
from mpicoll.sim.simgrid.ringflow import NotClosedForm, predict, round_time, \
    routes

B, L = 12.5e9, 0.5e-6  # the platforms' default link


@pytest.mark.parametrize("src, dst, clockwise, hops", [
    (0, 3, True, 3), (1, 6, False, 3), (6, 1, True, 3),  # the short way
    (0, 4, True, 4), (5, 1, True, 4), (7, 3, True, 4),   # P/2: clockwise,
    (4, 0, False, 4),                                    # but from P/2
])
def test_routes_as_simgrids_torus(src, dst, clockwise, hops):
    way, n = routes(np.array([src]), np.array([dst]), 8)
    assert (bool(way[0]), int(n[0])) == (clockwise, hops)


def test_a_shift_round_shares_each_link_among_its_flows():
    """Every rank sends 2 links ahead: each link carries 2 flows."""
    ranks = np.arange(16)
    assert round_time(ranks, (ranks + 2) % 16, 1000, 16, B, L) == \
        pytest.approx(2 * L + 1000 * 2 / B)
    assert round_time(ranks, (ranks + 1) % 16, 1000, 16, B, L) == \
        pytest.approx(L + 1000 / B)


def test_an_xor_round_peaks_mid_block():
    """r <-> r xor 4 on 16 nodes: 4 links each way, 4 flows on a block's
    middle link in each direction."""
    ranks = np.arange(16)
    assert round_time(ranks, ranks ^ 4, 1000, 16, B, L) == \
        pytest.approx(4 * L + 1000 * 4 / B)


def test_rounds_outside_the_closed_form_are_refused():
    with pytest.raises(NotClosedForm, match="cross 1 to 3 links"):
        round_time(np.array([0, 1]), np.array([1, 4]), 10, 16, B, L)
    with pytest.raises(NotClosedForm, match="own node"):
        round_time(np.array([0, 1]), np.array([0, 1]), 10, 16, B, L)
    # link 1 carries 0->2 and 1->3 twice (3 flows), link 2 four flows: the
    # flow 0->2 would get more than a third of link 1 (max-min: a half)
    with pytest.raises(NotClosedForm, match="saturates"):
        round_time(np.array([0, 1, 1, 2, 2]), np.array([2, 3, 3, 4, 4]),
                   10, 16, B, L)


def test_a_rounds_messages_are_priced_together():
    """The linear all-to-all's one round sends to every distance at once:
    its flows share links, and do not start together, so it is refused,
    not priced message by message."""
    with pytest.raises(NotClosedForm, match="cross 1 to 8 links"):
        predict("alltoall", "linear", 16, 16 * 64, 4, parse("ring:16"),
                1e-10)


def test_only_symmetric_schedules_on_a_ring():
    with pytest.raises(ValueError, match="ring:P"):
        predict("allreduce", "ring", 16, 256, 4, parse("torus:4x4"), 1e-10)
    with pytest.raises(ValueError, match="not symmetric"):
        predict("bcast", "binomial", 16, 256, 4, parse("ring:16"), 1e-10)


CASES = [("allreduce", "ring"), ("allreduce", "recursive_doubling"),
         ("allreduce", "rabenseifner"), ("allgather", "bruck"),
         ("allgather", "recursive_doubling"),
         ("reduce_scatter_block", "recursive_halving"),
         ("alltoall", "pairwise")]


@pytest.mark.parametrize("collective, algorithm", CASES)
@pytest.mark.parametrize("size", [16, 64])
def test_closed_form_equals_simgrid(simgrid, collective, algorithm, size):
    """The exact SimGrid simulation of the same schedules agrees (to
    rounding) where both run; docs/simulation.md shows it at 1,024."""
    count = SPECS[collective].count_for(1 << 20, size, 4)
    plat = parse(f"ring:{size}")
    priced = predict(collective, algorithm, size, count, 4, plat, 1e-10)
    exact = run_collective(collective, algorithm, size, count, plat, itemsize=4,
                     gamma=1e-10)
    assert priced.time == pytest.approx(exact.time, rel=1e-9)
    assert priced.rounds >= priced.distinct >= 1
    assert priced.symmetry in ("shift", "xor")


NODE_CASES = [("allgather", "hierarchical", "shift/4"),
              ("allreduce", "hierarchical", "xor/4"),
              ("allreduce", "torus", "shift/4"),
              ("allreduce", "rabenseifner", "xor"),
              ("alltoall", "hierarchical_2d", "shift/4")]


@pytest.mark.parametrize("collective, algorithm, symmetry", NODE_CASES)
def test_closed_form_on_nodes_equals_simgrid(simgrid, collective, algorithm,
                                              symmetry):
    """``ring:16`` with 4 ranks per node: rounds inside the nodes take the
    loopback, rounds across them the ring, and schedules that repeat from
    node to node give every rank's flows from one node's ranks."""
    from mpicoll.sim.predict import torus_dims

    count = SPECS[collective].count_for(1 << 18, 64, 4)
    plat = parse("ring:16", ranks_per_node=4)
    dims = torus_dims(plat)
    priced = predict(collective, algorithm, 64, count, 4, plat, 1e-10,
                     dims=dims)
    exact = run_collective(collective, algorithm, 64, count, plat, itemsize=4,
                     gamma=1e-10, dims=dims)
    assert priced.symmetry == symmetry
    assert priced.time == pytest.approx(exact.time, rel=1e-9)


@pytest.mark.parametrize("collective, algorithm, match", [
    ("allgather", "ring", "inside nodes and across"),  # ranks 3 -> 4 ...
    ("allreduce", "hierarchical_reduce_bcast", "2 to 8 rounds"),  # leaders
])
def test_node_rounds_outside_the_closed_form_are_refused(collective,
                                                          algorithm, match):
    count = SPECS[collective].count_for(1 << 18, 64, 4)
    with pytest.raises(NotClosedForm, match=match):
        predict(collective, algorithm, 64, count, 4,
                parse("ring:16", ranks_per_node=4), 1e-10)


def test_merged_messages_price_the_merged_program(simgrid):
    """Bruck's all-to-all is symmetric only with its first round's two
    messages per pair merged: the closed form prices that program, as
    SimGrid's ``symmetric`` run does, and both say so (a warning, and the
    symmetry's name)."""
    count = SPECS["alltoall"].count_for(1 << 20, 64, 4)
    plat = parse("ring:64")
    with pytest.warns(UserWarning, match="merged: an approximation"):
        priced = predict("alltoall", "bruck", 64, count, 4, plat, 1e-10)
    with pytest.warns(UserWarning, match="merged: an approximation"):
        merged = run_collective("alltoall", "bruck", 64, count, plat, itemsize=4,
                          gamma=1e-10, symmetric=True)
    assert priced.symmetry == merged.symmetry == "shift+merged"
    assert priced.time == pytest.approx(merged.time, rel=1e-9)


def test_the_simulate_command_takes_the_closed_form(tmp_path, capsys):
    from mpicoll.sim.predict import main

    out = tmp_path / "p.json"
    assert main(["-c", "allreduce", "-a", "rabenseifner,reduce_bcast",
                 "--model", "closed-form", "--network", "ring:64",
                 "--ranks", "64", "-b", "1M", "-e", "1M", "--quiet",
                 "--json", str(out)]) == 0
    assert "reduce_bcast skipped" in capsys.readouterr().err  # a root
    data = json.loads(out.read_text())
    assert data["header"]["model"] == "closed-form"
    (row,) = data["records"]
    want = predict("allreduce", "rabenseifner", 64, 1 << 18, 4,
                   parse("ring:64"), 1e-10).time
    assert row["time_us"]["avg"] == pytest.approx(want * 1e6)
    assert main(["--model", "closed-form", "--network",
                 "fattree:2;4,4;1,2;1,1", "--ranks", "16"]) == 2
    assert "closed-form is for --network ring:P, torus" in \
        capsys.readouterr().err


def test_the_simulate_command_takes_nodes_in_closed_form(tmp_path):
    from mpicoll.sim.predict import main

    out = tmp_path / "p.json"
    assert main(["-c", "allgather", "-a", "hierarchical", "--model",
                 "closed-form", "--network", "ring:16", "--ranks-per-node",
                 "4", "--ranks", "64", "-b", "64K", "-e", "64K", "--quiet",
                 "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["records"]
    want = predict("allgather", "hierarchical", 64, 256, 4,
                   parse("ring:16", ranks_per_node=4), 1e-10).time
    assert row["time_us"]["avg"] == pytest.approx(want * 1e6)
