"""The SimGrid controller's time quantum (``quantum=``, ``--quantum``).

With q > 0 the controller looks for ended messages only at multiples of q
(and at reduction and injection instants), so a rank's next round starts
at most q after its messages end. Without contention every flow takes as
long as it would alone, so nothing can start earlier than in the exact,
event-driven run and each round adds at most q: exact ≤ quantized ≤ exact
+ rounds·q, per rank (checked on ``flat``, where one send and one receive
per rank and round share no link). With contention a flow started later
changes the others' shares, and a rank can then finish earlier than in
the exact run (checked below). q = 0 is the exact run.
"""

from __future__ import annotations

import json

import pytest

from mpicoll.sim.simgrid import parse, run_collective, run_program
from mpicoll.sim.simgrid.program import Sig, build
from mpicoll.sim.predict import main
from tests.scripts import load

GAMMA = 2e-10  # s/byte, so reductions run on timers


@pytest.fixture(params=["3.32", "4.1"])
def folder(simgrid, request):
    """The SimGrid build to run: the venv's, then 4.1 (skips without
    scripts/simgrid41.sh's build)."""
    return request.getfixturevalue("simgrid41") if request.param == "4.1" \
        else None


def test_zero_quantum_is_the_event_driven_run(simgrid):
    """q = 0 is today's controller: α-β-γ exactly on ``flat``, and the same
    times to the last bit as without the argument on a contended torus."""
    plat = parse("flat:8")
    alpha, beta = 2 * plat.latency, 1 / plat.bandwidth
    nbytes = 4 * 4096
    res = run_collective("allreduce", "recursive_doubling", 8, 4096, plat,
                   gamma=GAMMA, quantum=0)
    assert res.quantum == 0
    assert res.time == pytest.approx(3 * (alpha + nbytes * (beta + GAMMA)),
                                     rel=1e-9)
    for args in (("allreduce", "recursive_doubling", 16, 1 << 14),
                 ("alltoall", "pairwise", 16, 16 * 256)):
        default = run_collective(*args, "torus:4x4", gamma=GAMMA)
        zero = run_collective(*args, "torus:4x4", gamma=GAMMA, quantum=0.0)
        assert (zero.time, zero.finish) == (default.time, default.finish)


@pytest.mark.parametrize("algorithm, rounds, overhead", [
    ("ring", 14, 0.0), ("recursive_doubling", 3, 0.0),
    ("ring", 14, 0.25e-6)])
@pytest.mark.parametrize("q", [0.3e-6, 2e-6])
def test_within_rounds_times_quantum_without_contention(folder, algorithm,
                                                        rounds, overhead, q):
    """On ``flat`` (no link shared: one send and one receive per rank and
    round) every rank finishes no earlier than in the exact run and at most
    rounds·q later, with reductions (timers) and send overheads
    (injections), on both SimGrid APIs."""
    kw = dict(gamma=GAMMA, send_overhead=overhead, simgrid=folder)
    exact = run_collective("allreduce", algorithm, 8, 3 * 4096, "flat:8", **kw)
    coarse = run_collective("allreduce", algorithm, 8, 3 * 4096, "flat:8",
                      quantum=q, **kw)
    assert coarse.quantum == q
    for e, c in zip(exact.finish, coarse.finish):
        assert e - 1e-15 <= c <= e + rounds * q + 1e-15
    assert coarse.time > exact.time  # round ends fall between ticks here


def test_contention_can_make_a_rank_earlier(folder):
    """Rank 0 sends 100 kB to rank 1 and to rank 2 in one round; rank 2
    posts its receive after a small message from rank 3 (about 1 µs). The
    exact run starts 0→2 then, and it halves 0→1's bandwidth; with q = 10
    µs rank 2 sees its message at 10 µs, 0→1 runs alone, ends before that
    tick, and rank 1 finishes earlier than in the exact run, while the
    collective as a whole ends later."""
    big = 100_000
    prog = build([(Sig(((1, big), (2, big)), (), 0),),
                  (Sig((), ((0, big),), 0),),
                  (Sig((), ((3, 8),), 0), Sig((), ((0, big),), 0)),
                  (Sig(((2, 8),), (), 0),)])
    plat = parse("flat:4")
    exact = run_program(prog, plat, gamma=0.0, simgrid=folder)
    coarse = run_program(prog, plat, gamma=0.0, quantum=10e-6,
                         simgrid=folder)
    assert coarse.finish[1] < exact.finish[1]
    assert coarse.time > exact.time


def test_bad_quantum_is_refused(simgrid):
    with pytest.raises(ValueError, match="quantum must be a finite number"):
        run_collective("allreduce", "ring", 4, 64, "flat:4", quantum=-1e-6)


def test_cli_option(simgrid, capsys, tmp_path):
    """``--quantum`` reaches the simulation, the table title and the JSON
    header; refused when negative or not finite, and for the analytic
    model."""
    args = ["-c", "allreduce", "-a", "ring", "--model", "simgrid",
            "--network", "flat:8", "--ranks", "8", "-b", "64K", "-e", "64K"]
    runs = {}
    for q in ("0", "1e-6"):
        out = tmp_path / f"{q}.json"
        assert main([*args, "--quantum", q, "--json", str(out)]) == 0
        runs[q] = json.loads(out.read_text())
        title = [line for line in capsys.readouterr().out.splitlines()
                 if line.startswith("# allreduce, 8 ranks")]
        assert title and ("quantum 1e-06 s" in title[0]) == (q != "0")
    assert runs["0"]["header"]["quantum"] == 0
    assert runs["1e-6"]["header"]["quantum"] == 1e-6
    exact, coarse = (runs[q]["records"][0]["time_us"]["avg"]
                     for q in ("0", "1e-6"))
    assert exact < coarse <= exact + 14 * 1.0  # 14 rounds, 1 µs each
    for bad in ("-1e-6", "nan", "inf"):
        assert main([*args, f"--quantum={bad}"]) == 2
        err = capsys.readouterr().err
        assert "usage" in err and "--quantum must be a finite number >= 0" \
            in err
    assert main(["--quantum", "1e-6"]) == 2
    assert "--quantum is for --model simgrid" in capsys.readouterr().err


def test_bench_prints_the_quantum(simgrid, capsys):
    """``bench/netsim_scale.py --quantum`` runs with it and prints it;
    a negative one is a usage error."""
    bench = load("netsim_scale")
    assert bench.main(["-c", "allgather", "-a", "ring", "--ranks", "8",
                       "--size", "8K", "--network", "flat:8",
                       "--quantum", "5e-7"]) == 0
    head, row = capsys.readouterr().out.split("\n")[:2]
    assert dict(zip(head.split(), row.split()))["quantum_s"] == "5e-07"
    with pytest.raises(SystemExit):
        bench.main(["--network", "flat:8", "--quantum", "-1"])
    assert "--quantum must be a finite number >= 0" in capsys.readouterr().err
