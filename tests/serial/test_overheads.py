"""The SimGrid model's per-message overheads (``--send-overhead``,
``--recv-overhead``).

Each send costs its sender o seconds before it enters the network, one send
after another (LogP's o; SMPI sleeps ``smpi/ois`` before each ``MPI_Isend``
posts): a rank's i-th send of a round (i = 0, 1, ...) leaves ``(i + 1)·o``
after the round starts. Each message that has arrived costs its receiver
o_r, one after another in the order they arrive. Checked exactly on a flat
network, on both SimGrid APIs where SimGrid 4.1's build is there, and the
send overhead against SMPI's own all-to-alls run with the same o
(``bench/smpi_crosscheck.py --send-overhead``; skips without
``smpicc``/``smpirun``).
"""

from __future__ import annotations

import json
import shutil

import pytest

from mpicoll.bench.specs import SPECS
from mpicoll.sim.simgrid import parse, run_collective
from mpicoll.sim.simgrid.driver import run_program
from mpicoll.sim.simgrid.program import Sig, build
from mpicoll.sim.predict import main
from scripts import load

crosscheck = load("smpi_crosscheck")


def our_seconds(collective: str, algorithm: str, spec: str, p: int,
                nbytes: int, overhead: float) -> float:
    """mpicoll.sim.simgrid's seconds (float32, no reduction time), ``nbytes``
    as the benchmark counts them."""
    count = SPECS[collective].count_for(nbytes, p, 4)
    return run_collective(collective, algorithm, p, count, spec, gamma=0.0,
                    send_overhead=overhead, timeout=600).time


def fan_out(k: int, nbytes: int):
    """Rank 0 sends ``nbytes`` to each of ranks 1..k in one round."""
    return build([(Sig(tuple((j, nbytes) for j in range(1, k + 1)), (), 0),)]
                 + [(Sig((), ((0, nbytes),), 0),) for _ in range(k)])


@pytest.mark.parametrize("api", ["3.32", "4.1"])
def test_sends_leave_one_after_another(simgrid, request, api):
    """One rank sending to k peers on ``flat``: with o larger than a
    message's transfer time the messages never share the sender's link, so
    the i-th ends exactly ``(i + 1)·o`` after a lone message would (and the
    last k·o after it); with o = 0 they all start at once and share it.
    Both SimGrid APIs (4.1 where scripts/simgrid41.sh built it)."""
    folder = request.getfixturevalue("simgrid41") if api == "4.1" else None
    k, nbytes, o = 5, 1000, 0.5e-6
    plat = parse(f"flat:{k + 1}")
    alpha, beta = 2 * plat.latency, 1 / plat.bandwidth
    assert beta * nbytes < o
    lone = alpha + beta * nbytes
    at_once = run_program(fan_out(k, nbytes), plat, gamma=0.0,
                          simgrid=folder)
    assert at_once.finish == pytest.approx([alpha + k * beta * nbytes]
                                           * (k + 1), rel=1e-12)
    one_by_one = run_program(fan_out(k, nbytes), plat, gamma=0.0,
                             send_overhead=o, simgrid=folder)
    ends = [i * o + lone for i in range(1, k + 1)]
    assert one_by_one.finish == pytest.approx([ends[-1], *ends], rel=1e-12)
    assert one_by_one.time - lone == pytest.approx(k * o, rel=1e-12)


def fan_in(k: int, nbytes: int):
    """Ranks 1..k each send ``nbytes`` to rank 0 in one round."""
    return build([(Sig((), tuple((j, nbytes) for j in range(1, k + 1)), 0),)]
                 + [(Sig(((0, nbytes),), (), 0),) for _ in range(k)])


@pytest.mark.parametrize("api", ["3.32", "4.1"])
def test_received_messages_are_handled_one_after_another(simgrid, request,
                                                         api):
    """k ranks sending to one on ``flat``: the k messages share the
    receiver's link and end together; with a receive overhead o_r the
    receiver is done k·o_r later (one after another), the senders when
    their messages end; with a send overhead as well, each sender's one
    send leaves o after the round starts; a rank whose messages arrive
    while it still injects its own sends handles them after those (one
    CPU); with a time quantum q the
    receiver sees the ends up to q late and then handles them as
    before."""
    folder = request.getfixturevalue("simgrid41") if api == "4.1" else None
    k, nbytes, o_r, o = 5, 1000, 0.5e-6, 0.2e-6
    plat = parse(f"flat:{k + 1}")
    alpha, beta = 2 * plat.latency, 1 / plat.bandwidth
    end = alpha + k * beta * nbytes
    free = run_program(fan_in(k, nbytes), plat, gamma=0.0, simgrid=folder)
    assert free.finish == pytest.approx([end] * (k + 1), rel=1e-12)
    handled = run_program(fan_in(k, nbytes), plat, gamma=0.0,
                          recv_overhead=o_r, simgrid=folder)
    assert handled.finish == pytest.approx([end + k * o_r, *[end] * k],
                                           rel=1e-12)
    both = run_program(fan_in(k, nbytes), plat, gamma=0.0, send_overhead=o,
                       recv_overhead=o_r, simgrid=folder)
    assert both.finish == pytest.approx([o + end + k * o_r, *[o + end] * k],
                                        rel=1e-12)
    # rank 0 sends k messages and receives k: its k sends take its CPU
    # until k·o, after the messages to it have ended (each sender's one
    # send leaves at o), so it handles those from k·o on; its last send
    # ends before it is done with them
    o_long = 2e-6
    assert o_long * k > 2 * (alpha + 2 * k * beta * nbytes)
    swap = build([(Sig(tuple((j, nbytes) for j in range(1, k + 1)),
                       tuple((j, nbytes) for j in range(1, k + 1)), 0),)]
                 + [(Sig(((0, nbytes),), ((0, nbytes),), 0),)
                    for _ in range(k)])
    cpu = run_program(swap, plat, gamma=0.0, send_overhead=o_long,
                      recv_overhead=o_r, simgrid=folder)
    assert cpu.finish[0] == pytest.approx(k * o_long + k * o_r, rel=1e-12)
    q = 1e-7  # ends seen up to q late, the handling then exact
    late = run_program(fan_in(k, nbytes), plat, gamma=0.0, quantum=q,
                       recv_overhead=o_r, simgrid=folder).finish[0]
    assert end + k * o_r - 1e-15 <= late <= end + q + k * o_r + 1e-15


def test_one_message_each_way_per_round_costs_both_overheads(simgrid):
    """The ring allreduce sends and receives one message per round: the
    two overheads add o + o_r to each of its 2(p-1) rounds."""
    p, o, o_r = 8, 0.25e-6, 0.4e-6
    base, slow = (run_collective("allreduce", "ring", p, 4096, f"flat:{p}",
                           gamma=0.0, send_overhead=x, recv_overhead=y).time
                  for x, y in ((0, 0), (o, o_r)))
    assert slow - base == pytest.approx(2 * (p - 1) * (o + o_r), rel=1e-9)


def test_one_send_per_round_costs_o_per_round(simgrid):
    """The ring allreduce sends one message per round: o adds o to each of
    its 2(p-1) rounds; receives cost nothing."""
    p, o = 8, 0.25e-6
    base, slow = (run_collective("allreduce", "ring", p, 4096, f"flat:{p}",
                           gamma=0.0, send_overhead=x).time for x in (0, o))
    assert slow - base == pytest.approx(2 * (p - 1) * o, rel=1e-9)


@pytest.mark.parametrize("side", ["send", "recv"])
def test_cli_option(simgrid, capsys, tmp_path, side):
    """``--send-overhead`` and ``--recv-overhead`` reach the simulation and
    the JSON header; refused for the analytic model, when negative or not
    finite, and with ``--sample-peers``."""
    option, field = f"--{side}-overhead", f"{side}_overhead"
    args = ["-c", "alltoall", "-a", "linear", "--model", "simgrid",
            "--network", "flat:8", "--ranks", "8", "-b", "8K", "-e", "8K",
            "--gamma", "0", "--quiet"]
    runs = {}
    for o in ("0", "1e-6"):
        out = tmp_path / f"{o}.json"
        assert main([*args, option, o, "--json", str(out)]) == 0
        runs[o] = json.loads(out.read_text())
    assert runs["1e-6"]["header"][field] == 1e-6
    assert runs["0"]["header"][field] == 0
    slow, fast = (runs[o]["records"][0]["time_us"]["avg"]
                  for o in ("1e-6", "0"))
    assert slow > fast + 6  # 7 messages of 1 KiB, 1 µs each, one rank
    assert main(["-c", "alltoall", option, "1e-6"]) == 2
    err = capsys.readouterr().err
    assert f"{option} is for --model simgrid" in err
    for bad in ("-1e-6", "nan", "inf"):
        assert main([*args, f"{option}={bad}"]) == 2
        err = capsys.readouterr().err
        assert f"{option} must be a finite number >= 0" in err
    assert main([*args, option, "1e-6", "--sample-peers", "2"]) == 2
    assert f"whose {option} would not be charged" in capsys.readouterr().err


@pytest.fixture
def smpi(simgrid):
    """SMPI, or a skip."""
    missing = [t for t in ("smpicc", "smpirun") if not shutil.which(t)]
    if missing:
        pytest.skip(f"{', '.join(missing)} missing: scripts/simgrid.sh")


def test_linear_alltoall_agrees_with_smpi(smpi, tmp_path):
    """16 ranks on ``flat``, 16 KiB (1 KiB per message), o = 1 µs on both
    sides: our linear and pairwise all-to-all take what SMPI's
    ``basic_linear`` (15 ``MPI_Isend`` at once) and ``ring`` take, within
    0.2% (SMPI adds a 16-byte envelope per message); without o the linear
    one is 7 times faster than with it."""
    exe = crosscheck.compile_program(str(tmp_path))
    p, nbytes, o = 16, 16384, 1e-6
    rows = crosscheck.compare("alltoall", "flat", p, ("16K", "16K", "2"),
                              exe, str(tmp_path), overhead=o)
    assert {r["algorithm"] for r in rows} == {"linear", "pairwise"}
    for r in rows:
        assert abs(r["diff_pct"]) < 0.2, r
    free = our_seconds("alltoall", "linear", f"flat:{p}", p, nbytes, 0.0)
    assert our_seconds("alltoall", "linear", f"flat:{p}", p, nbytes,
                       o) > 7 * free
