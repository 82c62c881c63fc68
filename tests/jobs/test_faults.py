"""Faults under a deadline (mpicoll.guard.watchdog), each a whole MPI job run in a
subprocess with a wall-clock limit (tests/faults.py has the scenarios):
what the surviving ranks print, how soon, and the job's exit status.

Rank 1 misbehaves: skips a collective, is SIGKILLed or SIGSTOPped in the
middle, or its user op raises. The deadline is T = 2 s; a surviving rank
must report within T plus the watchdog's grace (T/4) plus a margin for
this 2-core machine running other tests (MARGIN). Not a timing benchmark:
the bound says "it did not hang", with room to spare.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from processes import end_job

HERE = Path(__file__).resolve().parents[1]  # tests/, beside faults.py
MPIEXEC = Path(sys.executable).parent / "mpiexec"
T = 2.0
MARGIN = 15.0  # seconds on top of T for start-up, grace and a busy machine
LIMIT = 60  # the whole job's wall-clock limit: a hang fails the test

pytestmark = pytest.mark.skipif(not MPIEXEC.exists(),
                                reason=f"no mpiexec beside {sys.executable}")


def job(scenario: str, action: str = "raise", ranks: int = 3,
        abort_on_exception: bool = False) -> list[str]:
    """The command running ``scenario`` on ``ranks`` ranks."""
    python = [sys.executable, *(["-m", "mpi4py"] if abort_on_exception
                                else [])]
    return [str(MPIEXEC), "-n", str(ranks), *python,
            str(HERE / "faults.py"), scenario, str(T), action]


def environment() -> dict:
    env = dict(os.environ, MPIR_CVAR_ENABLE_HEAVY_YIELD="1",
               PYTHONPATH=str(HERE.parent))
    env.pop("MPICOLL_CHECK", None)
    env.pop("MPICOLL_TIMEOUT", None)
    return env


def run(scenario: str, **kw) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    done = subprocess.run(job(scenario, **kw), capture_output=True,
                          text=True, timeout=LIMIT, env=environment())
    return done, time.monotonic() - start


def raised(output: str) -> dict[int, tuple[str, float, str]]:
    """``{rank: (exception name, seconds, text)}`` from the ranks' lines."""
    found = {}  # the launcher may run two ranks' lines together
    for m in re.finditer(r"rank (\d+) raised (\w+) after ([\d.]+) s: "
                         r"(.*?)(?=rank \d+ (?:raised|done|pid)|$)",
                         output, re.M):
        found[int(m[1])] = (m[2], float(m[3]), m[4])
    return found


def timed_out_without_rank_1(done, *phrases: str) -> None:
    """Ranks 0 and 2 raised CollectiveTimeoutError after the deadline,
    each text holding every phrase; rank 1 finished its sleep."""
    got = raised(done.stdout)
    assert sorted(got) == [0, 2], done.stdout + done.stderr
    for name, seconds, text in got.values():
        assert name == "CollectiveTimeoutError"
        assert T <= seconds < T + MARGIN, seconds
        for phrase in phrases:
            assert phrase in text
    assert "rank 1 done" in done.stdout


def test_a_skipped_collective_times_out_naming_the_rank():
    done, _ = run("skip")
    timed_out_without_rank_1(done, "call #2 not complete after 2 s",
                             "not arrived: rank 1",
                             "waiting in it: ranks 0, 2")
    assert done.returncode != 0


def test_a_skipped_first_collective_on_a_new_communicator_times_out():
    """The first call makes mpicoll's private duplicate; under the
    deadline too. No peer can be asked yet: the report says that a rank
    has not arrived at the first collective."""
    done, _ = run("first")
    timed_out_without_rank_1(
        done, "first collective: creating mpicoll's private communicator "
        "not complete after 2 s", "a rank of the communicator has not "
        "arrived")


def test_by_default_a_timeout_aborts_the_job():
    done, _ = run("skip", action="abort")
    assert done.returncode != 0
    assert "rank 1 done" not in done.stdout  # ended in its 2T + 3 s sleep
    assert "not arrived: rank 1" in done.stderr
    assert "aborting the job" in done.stderr


def test_a_rank_killed_mid_allreduce_ends_the_job():
    """SIGKILL during large ring allreduces: the launcher or the deadline
    ends every other rank; nobody is left waiting."""
    done, wall = run("kill")
    assert done.returncode != 0, done.stdout
    assert wall < T + MARGIN, wall
    assert "done" not in done.stdout


def test_a_stopped_rank_is_named_then_killed():
    """SIGSTOP: the others raise naming it (it cannot answer), then the
    test kills it and the job ends."""
    proc = subprocess.Popen(job("stop"), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env=environment())
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in
                                     proc.stdout], daemon=True).start()
    pids, output, end = {}, "", time.monotonic() + LIMIT
    try:
        while len(raised(output)) < 2 and time.monotonic() < end:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                continue
            output += line
            m = re.match(r"rank (\d+) pid (\d+)", line)
            if m:
                pids[int(m[1])] = int(m[2])
        got = raised(output)
        assert sorted(got) == [0, 2], output
        for name, seconds, text in got.values():
            assert name == "CollectiveTimeoutError"
            assert seconds < T + MARGIN
            assert "not arrived: rank 1" in text
            assert "still pending here: receive from rank 1" in text
        os.kill(pids[1], signal.SIGKILL)
        assert proc.wait(timeout=LIMIT) != 0
    finally:
        if proc.poll() is None:
            end_job(proc, pids)


@pytest.mark.parametrize("abort_on_exception", [False, True])
def test_an_exception_in_a_user_op_ends_the_job(abort_on_exception):
    """mpi4py aborts on an exception inside a user MPI.Op's function; so
    the job ends, with or without ``python -m mpi4py``."""
    done, _ = run("op", abort_on_exception=abort_on_exception)
    # Within LIMIT (run() raises past it) and non-zero. mpi4py prints the
    # traceback and aborts; the abort may land after the ranks returned
    # from the call, and may cut the traceback short, so neither what they
    # printed nor how far they got is asserted: only that the job ended.
    assert done.returncode != 0


def test_a_fault_on_a_sub_communicator_stays_there():
    """Halves of 4 ranks: rank 1 skips a collective of the odd half (it is
    rank 0 there), whose rank 3 times out naming it; the even half makes
    its 50 allreduces undisturbed."""
    done, _ = run("split", ranks=4)
    got = raised(done.stdout)
    assert sorted(got) == [3], done.stdout + done.stderr
    name, seconds, text = got[3]
    assert name == "CollectiveTimeoutError" and seconds < T + MARGIN
    assert "not arrived: rank 0" in text
    for rank in (0, 1, 2):
        assert f"rank {rank} done" in done.stdout
