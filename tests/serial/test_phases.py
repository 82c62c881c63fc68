"""Algorithms declared as collectives run one after the other (``phases=``),
and the simulation phase by phase (``phases=True``, ``--phases``).

The declaration is checked against the schedule without SimGrid: van de
Geijn's broadcast sends exactly its scatter's messages and then its
allgather's, up to empty rounds. Simulated phase by phase, each phase
starts when the one before has ended everywhere: the same messages, an
approximation of the time that docs/simulation.md measures.
"""

from __future__ import annotations

import json

import pytest

from mpicoll.coll import lookup
from mpicoll.sim.simgrid import run_collective
from mpicoll.sim.simgrid.program import EMPTY, sig
from mpicoll.sim.predict import main


def traffic(schedule):
    return tuple(rnd for rnd in sig(schedule, 4) if rnd != EMPTY)


@pytest.mark.parametrize("allgather", ["ring", "recursive_doubling"])
@pytest.mark.parametrize("size", [2, 3, 5, 8, 12, 16])
@pytest.mark.parametrize("extra", [0, 3, -1])
def test_scatter_allgather_is_its_phases(allgather, size, extra):
    if allgather == "recursive_doubling" and size & (size - 1):
        pytest.skip("recursive doubling needs a power of two")
    bcast = lookup("bcast", "scatter_allgather")
    count = 6 * size + extra
    for root in {0, size // 2, size - 1}:
        parts = bcast.phases_of(size, count, root=root, allgather=allgather)
        assert [p.collective for p in parts] == (
            ["scatter", "allgather"] if count % size == 0
            else ["scatterv", "allgatherv"])
        assert parts[1].algorithm == allgather
        for rank in range(size):
            whole = traffic(bcast.schedule(rank, size, count, root=root,
                                           allgather=allgather))
            joined = sum((traffic(lookup(p.collective, p.algorithm).schedule(
                rank, size, p.count, **p.params)) for p in parts), ())
            assert whole == joined


def test_undeclared_algorithms_have_no_phases():
    assert lookup("bcast", "binomial").phases_of(8, 64) is None
    assert lookup("bcast", "native").phases_of(8, 64) is None


def test_by_phases_sends_the_same_messages(simgrid):
    """Phase by phase: the same flows, two phases, the scatter's time
    before the allgather's, never earlier than the whole schedule."""
    for platform in ("flat:16", "torus:2x2x4"):
        whole = run_collective("bcast", "scatter_allgather", 16, 16 * 256,
                         platform, gamma=0, root=5)
        split = run_collective("bcast", "scatter_allgather", 16, 16 * 256,
                         platform, gamma=0, root=5, phases=True)
        scatter = run_collective("scatter", "binomial", 16, 256, platform,
                           gamma=0, root=5)
        allgather = run_collective("allgather", "ring", 16, 256, platform, gamma=0)
        assert (whole.phases, split.phases) == (1, 2)
        assert split.flows == whole.flows
        assert split.time == pytest.approx(scatter.time + allgather.time)
        assert split.time >= whole.time * (1 - 1e-9)
        assert split.symmetry == "exact+exact"
    binomial = run_collective("bcast", "binomial", 8, 64, "flat:8", gamma=0,
                        phases=True)
    assert binomial.phases == 1  # nothing declared: the whole schedule


def test_symmetric_phases_relabel_the_unrooted_one(simgrid):
    kw = dict(gamma=0, root=3, phases=True)
    plain = run_collective("bcast", "scatter_allgather", 32, 32 * 64,
                     "torus:2x4x4", **kw)
    sym = run_collective("bcast", "scatter_allgather", 32, 32 * 64,
                   "torus:2x4x4", symmetric=True, keep=4, **kw)
    keep = run_collective("bcast", "scatter_allgather", 32, 32 * 64,
                    "torus:2x4x4", keep=4, **kw)
    assert sym.symmetry == "exact+shift"
    assert sym.rounds_cut == keep.rounds_cut == 31 - 4
    assert sym.time == pytest.approx(keep.time)
    assert keep.time == pytest.approx(plain.time, rel=0.01)


def test_cli_option(simgrid, capsys, tmp_path):
    args = ["-c", "bcast", "-a", "scatter_allgather", "--model", "simgrid",
            "--network", "flat:8", "--ranks", "8", "-b", "64K", "-e", "64K"]
    out = tmp_path / "phases.json"
    assert main([*args, "--phases", "--json", str(out)]) == 0
    title = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith("# bcast, 8 ranks")]
    assert title and "by phases" in title[0]
    assert json.loads(out.read_text())["header"]["phases"] is True
    assert main(["-c", "bcast", "--phases"]) == 2
    assert "--phases is for --model simgrid" in capsys.readouterr().err


def test_keep_cuts_the_whole_schedules_ring_once_aligned(simgrid):
    """The leaves of the scatter reach the ring before its root; aligned,
    the ring's rounds line up on every rank and ``keep`` cuts them."""
    kw = dict(gamma=0, root=3)
    exact = run_collective("bcast", "scatter_allgather", 32, 32 * 64,
                     "torus:2x4x4", **kw)
    keep = run_collective("bcast", "scatter_allgather", 32, 32 * 64,
                    "torus:2x4x4", keep=4, **kw)
    assert (exact.rounds_cut, keep.rounds_cut) == (0, 31 - 4)
    assert keep.time == pytest.approx(exact.time, rel=0.01)


def test_keep_leaves_unalignable_rounds_as_they_are(simgrid):
    """A pipeline's rounds cannot be aligned (its root posts every segment
    at once): ``keep`` then cuts what it finds in them as they are."""
    exact = run_collective("bcast", "pipelined", 8, 4096, "flat:8", gamma=0,
                     segment=256)
    keep = run_collective("bcast", "pipelined", 8, 4096, "flat:8", gamma=0,
                    segment=256, keep=4)
    assert keep.time == pytest.approx(exact.time, rel=0.01)
