"""The default guards, as a program that only wraps its communicators gets
them: each scenario of tests/faults.py run as a whole MPI job (ACTION
``default``: no keyword; only ``MPICOLL_TIMEOUT`` set short, for the
test's sake, and ``MPICOLL_TRACE_DIR``), with a wall-clock limit.

The job must end with a report naming the rank at fault, and leave trace
files that ``python -m mpicoll.trace`` turns into the same verdict; a slow
rank must show up as the straggler. Not a timing benchmark: LIMIT says
"it did not hang".
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from processes import end_job

HERE = Path(__file__).resolve().parents[1]  # tests/, beside faults.py
MPIEXEC = Path(sys.executable).parent / "mpiexec"
T = 3.0  # MPICOLL_TIMEOUT
LIMIT = 90  # the whole job's wall-clock limit: a hang fails the test

pytestmark = pytest.mark.skipif(not MPIEXEC.exists(),
                                reason=f"no mpiexec beside {sys.executable}")


def job(scenario: str, traces: Path, ranks: int = 3, timeout: float = T):
    """The command and environment running ``scenario`` with the
    defaults, a ``timeout`` s deadline and traces written to ``traces``."""
    env = dict(os.environ, MPIR_CVAR_ENABLE_HEAVY_YIELD="1",
               PYTHONPATH=str(HERE.parent), MPICOLL_TIMEOUT=str(timeout),
               MPICOLL_TRACE_DIR=str(traces))
    for name in ("MPICOLL_CHECK", "MPICOLL_ON_TIMEOUT",
                 "MPICOLL_TRACE_BUFFER", "MPICOLL_TRACE_SIGNAL"):
        env.pop(name, None)
    return [str(MPIEXEC), "-n", str(ranks), sys.executable,
            str(HERE / "faults.py"), scenario, str(timeout), "default"], env


def run(scenario: str, traces: Path, ranks: int = 3):
    command, env = job(scenario, traces, ranks)
    return subprocess.run(command, capture_output=True, text=True,
                          timeout=LIMIT, env=env)


def trace_verdict(traces: Path) -> tuple[int, dict]:
    done = subprocess.run(
        [sys.executable, "-m", "mpicoll.trace", str(traces), "--json"],
        capture_output=True, text=True, timeout=60, cwd=HERE.parent)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def world(verdict: dict) -> dict:
    """The verdict on MPI_COMM_WORLD (the first communicator: largest)."""
    return verdict["communicators"][0]


def test_a_skipped_collective_aborts_naming_the_rank(tmp_path):
    done = run("skip", tmp_path)
    assert done.returncode != 0
    assert "rank 1 done" not in done.stdout
    assert "not arrived: rank 1 (in no collective, its last call #1 " \
           "allreduce)" in done.stderr, done.stderr
    assert "aborting the job" in done.stderr
    code, verdict = trace_verdict(tmp_path)
    assert code == 1
    first = world(verdict)["first_divergent"]
    assert first["seq"] == 2 and first["collective"] == "allreduce"
    assert [m["rank"] for m in first["never_joined"]] == [1]
    assert {m["rank"] for m in first["waiting"]} <= {0, 2}
    assert first["waiting"]


def test_a_stopped_rank_is_named_and_the_job_ends(tmp_path):
    done = run("stop", tmp_path)
    assert done.returncode != 0
    assert "not arrived: rank 1 (no answer: unresponsive, stopped or " \
           "dead)" in done.stderr, done.stderr
    code, verdict = trace_verdict(tmp_path)
    assert code == 1
    first = world(verdict)["first_divergent"]
    assert first["seq"] == 2
    assert [m["rank"] for m in first["never_joined"]] == [1]
    assert "no trace file" in first["never_joined"][0]["where"]
    # a hand-built call (recursive doubling): the round and peer waited on
    assert all(m["round"] is not None and m["peer"] is not None
               for m in first["waiting"]), first["waiting"]


def test_a_rank_that_raises_before_a_collective_is_named(tmp_path):
    """An uncaught exception on rank 1: its trace is written on the way
    out; the others' deadline names it (it no longer answers)."""
    done = run("raise", tmp_path)
    assert done.returncode != 0
    assert "RuntimeError: rank 1 gives up" in done.stderr
    assert "not arrived: rank 1 (no answer" in done.stderr, done.stderr
    code, verdict = trace_verdict(tmp_path)
    assert code == 1 and "exception" in verdict["reasons"]
    first = world(verdict)["first_divergent"]
    assert first["seq"] == 2
    assert [m["rank"] for m in first["never_joined"]] == [1]
    assert "last call #1 allreduce" in first["never_joined"][0]["where"]


def test_a_killed_rank_ends_the_job(tmp_path):
    """SIGKILL during large ring allreduces: the launcher or the others'
    deadline ends the job; nobody is left waiting."""
    done = run("kill", tmp_path)
    assert done.returncode != 0
    assert "done" not in done.stdout


def test_a_skipped_first_call_on_a_new_communicator_aborts(tmp_path):
    done = run("first", tmp_path)
    assert done.returncode != 0
    assert "creating mpicoll's private communicator not complete after" \
        in done.stderr, done.stderr
    assert "aborting the job" in done.stderr


def test_a_fault_on_a_split_half_is_traced_there(tmp_path):
    """Rank 1 skips the first collective of its half (ranks 1, 3): the
    half was given its private duplicate by the split, so rank 3 can ask
    it where it is; the trace names it on that communicator."""
    done = run("split", tmp_path, ranks=4)
    assert done.returncode != 0
    assert "not arrived: rank 0 (in no collective, none made yet)" \
        in done.stderr, done.stderr
    code, verdict = trace_verdict(tmp_path)
    assert code == 1
    half = [c for c in verdict["communicators"] if c["ranks"] == [1, 3]]
    assert len(half) == 1, verdict
    first = half[0]["first_divergent"]
    assert first["seq"] == 1
    assert [m["rank"] for m in first["never_joined"]] == [1]
    assert [m["rank"] for m in first["waiting"]] == [3]


def test_a_skipped_setup_exchange_is_named(tmp_path):
    """mpicoll's own exchanges (here the agreement on split's arguments)
    are under the deadline too, and named in the report."""
    done = run("agree", tmp_path)
    assert done.returncode != 0
    assert "(agreeing on the arguments of split)" in done.stderr, done.stderr
    assert "not arrived: rank 1" in done.stderr


def test_sigusr1_traces_a_hang_before_the_deadline(tmp_path):
    """Ranks 0 and 2 wait inside MPI's allreduce (a 60 s deadline, far
    off) while rank 1 sleeps: SIGUSR1 to every rank writes every trace
    file at once (the waiting ranks' from their watch threads), and the
    trace command says who is missing."""
    command, env = job("skip", tmp_path, timeout=60)
    proc = subprocess.Popen(command, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    pids: dict[int, int] = {}
    try:
        while len(pids) < 3:
            line = proc.stdout.readline()
            assert line, "the job ended before every rank started"
            m = re.match(r"rank (\d+) pid (\d+)", line)
            if m:
                pids[int(m[1])] = int(m[2])
        time.sleep(3)  # ranks 0 and 2 are in their second allreduce
        for pid in pids.values():
            os.kill(pid, signal.SIGUSR1)
        files = [tmp_path / f"mpicoll-trace-rank{r}.json" for r in pids]
        end = time.monotonic() + 30
        while not all(f.exists() for f in files) and \
                time.monotonic() < end:
            time.sleep(0.1)
        assert all(f.exists() for f in files), list(tmp_path.iterdir())
        assert {json.loads(f.read_text())["reason"] for f in files} == \
            {"signal"}
    finally:
        end_job(proc, pids)
    code, verdict = trace_verdict(tmp_path)
    assert code == 1
    first = world(verdict)["first_divergent"]
    assert first["seq"] == 2
    assert [m["rank"] for m in first["never_joined"]] == [1]
    assert sorted(m["rank"] for m in first["waiting"]) == [0, 2]


def test_a_slow_rank_is_named_the_straggler(tmp_path):
    done = run("straggle", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    code, verdict = trace_verdict(tmp_path)
    assert code == 0
    assert world(verdict)["straggler"] == 1
