"""Sampled peers (``peers=``, ``--sample-peers``): a few messages of the
linear algorithms' one round stand for all of them.

What is kept is checked without SimGrid: each rank's bytes are the same,
sender and receiver agree, a shift carries a sampled schedule to a sampled
one. On ``flat`` every rank's messages share its one link to the switch,
so the time depends on its bytes only and the sampled run is the exact
one (checked with SimGrid); elsewhere it is an approximation that
docs/simulation.md measures.
"""

from __future__ import annotations

import json

import pytest

from mpicoll.coll import lookup
from mpicoll.sim.simgrid import run_collective
from mpicoll.sim.simgrid.peer_sample import peer_offsets, sample_peers
from mpicoll.sim.simgrid.program import build, network_sigs, sig
from mpicoll.sim.predict import main


def sigs_of(collective, algorithm, size, count, **params):
    alg = lookup(collective, algorithm)
    return [sig(alg.schedule(r, size, count, **params), 4)
            for r in range(size)]


@pytest.mark.parametrize("size, n", [(16, 4), (17, 5), (1000, 16), (9, 3)])
def test_offsets_one_per_stratum_weighted_by_its_width(size, n):
    weight = peer_offsets(size, n)
    assert len(weight) == n and sum(weight.values()) == size - 1
    edges = [1 + (size - 1) * i // n for i in range(n + 1)]
    for (lo, hi), (offset, w) in zip(zip(edges, edges[1:]),
                                     sorted(weight.items())):
        assert lo <= offset < hi and w == hi - lo
    assert peer_offsets(size, n) == weight  # seeded
    assert peer_offsets(size, n, seed=1) != weight or size - 1 == n


def test_every_offset_when_n_covers_them():
    assert peer_offsets(8, 7) == peer_offsets(8, 100) == \
        {d: 1 for d in range(1, 8)}
    with pytest.raises(ValueError, match="must be >= 1"):
        peer_offsets(8, 0)


def test_linear_alltoall_keeps_every_ranks_bytes():
    size, n = 16, 4
    full = sigs_of("alltoall", "linear", size, 16 * size * 8)
    short = sample_peers(full, size, n)
    offsets = set(peer_offsets(size, n))
    for rank, (before, after) in enumerate(zip(full, short)):
        (rnd,), (kept,) = before, after
        assert len(kept.sends) == len(kept.recvs) == n
        assert {(q - rank) % size for q, _ in kept.sends} == offsets
        assert {(rank - q) % size for q, _ in kept.recvs} == offsets
        for field in ("sends", "recvs"):
            assert sum(b for _, b in getattr(kept, field)) == \
                sum(b for _, b in getattr(rnd, field))
        assert kept.reduce_bytes == rnd.reduce_bytes
    prog = build(short)  # every kept send meets its receive
    assert len(prog.src) == size * n
    assert sample_peers(full, size, size - 1) == full


def test_linear_bcast_root_sends_the_same_bytes():
    size, n = 32, 6
    full = sigs_of("bcast", "linear", size, 1 << 12, root=0)
    short = sample_peers(full, size, n)
    (root,), = short[0:1]
    assert len(root.sends) == n
    assert sum(b for _, b in root.sends) == (size - 1) * (1 << 14)
    receivers = [r for r in range(1, size) if short[r][0].recvs]
    assert receivers == sorted(peer_offsets(size, n))
    build(short)


def test_schedules_of_several_rounds_are_refused():
    with pytest.raises(ValueError, match="rank 0 has messages in 3 rounds"):
        sample_peers(sigs_of("allgather", "ring", 4, 16), 4, 2)


def test_the_sample_commutes_with_the_shift():
    """Sampling rank 0's rounds and relabelling gives every rank's sampled
    rounds: what ``symmetric=True`` builds."""
    size, n = 24, 5
    alg = lookup("alltoall", "linear")

    def rank_sig(rank):
        return sig(alg.schedule(rank, size, size * 4), 4)

    exact = network_sigs(rank_sig, size, peers=n)
    sym = network_sigs(rank_sig, size, peers=n, symmetric=True)
    assert sym[3] == "shift" and sym[0] == exact[0]


def test_flat_sampled_is_exact(simgrid):
    for collective, algorithm, params in [("alltoall", "linear", {}),
                                          ("bcast", "linear", {"root": 3})]:
        exact = run_collective(collective, algorithm, 16, 4096, "flat:16",
                         gamma=0, **params)
        short = run_collective(collective, algorithm, 16, 4096, "flat:16",
                         gamma=0, peers=3, **params)
        assert short.flows < exact.flows
        assert short.time == pytest.approx(exact.time, rel=1e-9)


@pytest.mark.parametrize("side", ["send_overhead", "recv_overhead"])
def test_not_with_a_message_overhead(side):
    with pytest.raises(ValueError, match="overheads would not be charged"):
        run_collective("alltoall", "linear", 8, 64, "flat:8", peers=2,
                 **{side: 1e-6})


def test_cli_option(simgrid, capsys, tmp_path):
    """``--sample-peers`` reaches the simulation, the table title and the
    JSON header; refused below 1, with ``--send-overhead`` (and
    ``--recv-overhead``: tests/serial/test_overheads.py), and for the analytic
    model."""
    args = ["-c", "alltoall", "-a", "linear", "--model", "simgrid",
            "--network", "torus:2x2x4", "--ranks", "16", "-b", "64K",
            "-e", "64K"]
    out = tmp_path / "peers.json"
    assert main([*args, "--sample-peers", "4", "--json", str(out)]) == 0
    title = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith("# alltoall, 16 ranks")]
    assert title and "4 sampled peers" in title[0]
    run = json.loads(out.read_text())
    assert run["header"]["sample_peers"] == 4
    assert run["records"][0]["time_us"]["avg"] > 0
    for extra, message in [(["--sample-peers", "0"], "must be >= 1"),
                           (["--sample-peers", "2", "--send-overhead", "1e-6"],
                            "use one"),
                           (["--sample-peers", "2", "--model", "analytic"],
                            "--sample-peers is for --model simgrid")]:
        assert main([*args, *extra]) == 2
        err = capsys.readouterr().err
        assert "usage" in err and message in err
