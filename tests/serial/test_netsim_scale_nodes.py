"""``bench/netsim_scale.py --ranks-per-node``: nodes of several ranks.

The bench builds a program once and replays it on every network; with
nodes of several ranks the hierarchical algorithms see the same node map
as ``python -m mpicoll.simulate --ranks-per-node`` gives them, and the
Cartesian ``torus`` allreduce each network's own grid. Both must predict
what :func:`mpicoll.sim.simgrid.run_collective` predicts for the same call.
"""

from __future__ import annotations

import pytest

from mpicoll.bench.specs import SPECS
from mpicoll.sim.simgrid import parse, run_collective
from mpicoll.sim.predict import torus_dims
from tests.scripts import load

NETWORKS = ("torus:2x2x2", "hypercube:3", "fattree:2;4,2;1,4;1,1",
            "ring:8")
GAMMA = 1e-10  # the bench's


def rows(out: str) -> list[dict]:
    head, *lines = out.strip().splitlines()
    return [dict(zip(head.split(), line.split())) for line in lines]


@pytest.mark.parametrize("collective, algorithm", [
    ("allreduce", "hierarchical"), ("allreduce", "torus"),
    ("bcast", "hierarchical"), ("allgather", "hierarchical")])
def test_bench_predicts_what_simulate_does(simgrid, capsys, collective,
                                           algorithm):
    """Four ranks per node, eight nodes, on four networks: the bench's
    predictions equal :func:`~mpicoll.sim.simgrid.run_collective`'s with
    the same node map (and, for the torus allreduce, the network's
    dimensions)."""
    bench = load("netsim_scale")
    args = ["-c", collective, "-a", algorithm, "--ranks", "32",
            "--ranks-per-node", "4", "--size", "64K"]
    for spec in NETWORKS:
        args += ["--network", spec]
    assert bench.main(args) == 0
    got = {r["network"]: float(r["predicted_us"])
           for r in rows(capsys.readouterr().out)}
    assert set(got) == set(NETWORKS)
    count = SPECS[collective].count_for(64 << 10, 32, 4)
    for spec in NETWORKS:
        plat = parse(spec, ranks_per_node=4)
        dims = torus_dims(plat) if algorithm == "torus" else None
        want = run_collective(collective, algorithm, 32, count, plat, gamma=GAMMA,
                        **({"dims": dims} if dims else {})).time
        assert got[spec] == pytest.approx(want * 1e6, abs=0.01), spec


def test_bench_refuses_bad_ranks_per_node(simgrid, capsys):
    bench = load("netsim_scale")
    with pytest.raises(SystemExit):
        bench.main(["--network", "flat:8", "--ranks-per-node", "0"])
    assert "--ranks-per-node must be >= 1" in capsys.readouterr().err


def test_bench_builds_one_node_and_keeps_four_rounds(simgrid, capsys):
    """``--symmetric --keep 4`` on nodes of 4: the hierarchical allgather's
    schedules repeat from node to node (``shift/4``), its cross-node ring
    rounds are cut to 4, and the prediction is the exact run's."""
    bench = load("netsim_scale")
    common = ["-c", "allgather", "-a", "hierarchical", "--ranks", "64",
              "--ranks-per-node", "4", "--size", "64K", "--network",
              "torus:4x4"]
    assert bench.main(common) == 0
    (exact,) = rows(capsys.readouterr().out)
    assert bench.main([*common, "--symmetric", "--keep", "4"]) == 0
    (short,) = rows(capsys.readouterr().out)
    assert (exact["symmetry"], short["symmetry"]) == ("exact", "shift/4")
    assert int(short["flows"]) < int(exact["flows"])
    assert short["predicted_us"] == exact["predicted_us"]


def test_ring_bench_on_nodes_equals_simgrid(simgrid, capsys):
    """``bench/ringflow.py --ranks-per-node 4 --compare``: the closed form
    on ``ring:16`` of 4 ranks per node against SimGrid's exact run, the
    torus allreduce on the ring's grid (16 nodes by 4)."""
    bench = load("ringflow")
    assert bench.main(["-c", "allreduce", "-a", "hierarchical,torus",
                       "--ranks", "64", "--ranks-per-node", "4", "--size",
                       "256K", "--compare"]) == 0
    got = rows(capsys.readouterr().out)
    assert {(r["network"], r["ranks_per_node"]) for r in got} == {
        ("ring:16", "4")}
    assert [(r["algorithm"], r["symmetry"], r["ratio"]) for r in got] == [
        ("hierarchical", "xor/4", "1.000000"),
        ("torus", "shift/4", "1.000000")]
    with pytest.raises(SystemExit):
        bench.main(["--ranks", "64", "--ranks-per-node", "3"])
    assert "must be positive and divide --ranks" in capsys.readouterr().err


def test_ring_bench_on_a_torus_brackets_simgrid(simgrid, capsys):
    """``bench/ringflow.py --network torus:4x4``: the fluid model's
    busiest-link load above SimGrid's exact run, ``--spread even`` below;
    a torus of odd sides equal to it."""
    bench = load("ringflow")
    common = ["-c", "alltoall", "-a", "linear", "--ranks", "16", "--size",
              "1M"]
    assert bench.main([*common, "--network", "torus:4x4", "--compare"]) == 0
    (busiest,) = rows(capsys.readouterr().out)
    assert bench.main([*common, "--network", "torus:4x4", "--spread",
                       "even"]) == 0
    (even,) = rows(capsys.readouterr().out)
    assert float(even["predicted_us"]) < float(busiest["simgrid_us"]) \
        < float(busiest["predicted_us"])
    assert bench.main(["-c", "alltoall", "-a", "linear", "--ranks", "15",
                       "--network", "torus:3x5", "--compare"]) == 0
    (odd,) = rows(capsys.readouterr().out)
    assert odd["ratio"] == "1.000000"
