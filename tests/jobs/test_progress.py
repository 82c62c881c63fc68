"""The progress thread at process exit and its environment switch, in
whole ``mpiexec -n 2 python -m mpi4py`` jobs run from plain pytest: a job
that leaves collectives in flight, completed or not, exits promptly (the
thread is stopped before mpi4py finalizes MPI), and
``MPICOLL_PROGRESS_THREAD=0`` brings back progress only in test/wait."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

MPIEXEC = Path(sys.executable).parent / "mpiexec"

SCRIPT = textwrap.dedent("""
    import sys, time
    import numpy as np
    from mpi4py import MPI
    import mpicoll
    from mpicoll import ProcessGroup as PG

    comm = mpicoll.Comm()
    mode = sys.argv[1]
    x = np.ones(1 << 16)
    work = PG(comm).all_reduce(x, algorithm="ring", async_op=True)
    deadline = time.monotonic() + 1.0
    while not work._execution.done and time.monotonic() < deadline:
        sum(range(1000))
    print(f"rank {comm.rank}: thread {mpicoll.engine.progress.enabled()}, "
          f"done {work._execution.done}", flush=True)
    if mode == "wait":
        work.wait()
        assert np.all(x == comm.size)
    PG(comm).all_reduce(np.ones(1 << 16), algorithm="ring", async_op=True)
    comm.Ibarrier(algorithm="dissemination")
""")


def _reports(stdout: str) -> list[tuple[str, str, str]]:
    """(rank, thread, done) of each rank's line (mpiexec may interleave
    the ranks' output within a line)."""
    return sorted(re.findall(r"rank (\d): thread (True|False), done (True|False)",
                             stdout))


def _job(tmp_path, mode, env=None):
    if not MPIEXEC.exists():
        pytest.skip(f"no mpiexec next to {sys.executable}")
    script = tmp_path / "exit.py"
    script.write_text(SCRIPT)
    env = {**os.environ, **(env or {})}
    return subprocess.run(
        [str(MPIEXEC), "-n", "2", sys.executable, "-m", "mpi4py",
         str(script), mode],
        capture_output=True, text=True, timeout=60, env=env, check=False)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", ["wait", "nowait"])
def test_exits_promptly_with_collectives_in_flight(tmp_path, mode):
    job = _job(tmp_path, mode)
    assert job.returncode == 0, job.stderr
    assert _reports(job.stdout) == [("0", "True", "True"),
                                    ("1", "True", "True")], job.stdout


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", ["wait", "nowait"])
def test_environment_turns_the_thread_off(tmp_path, mode):
    job = _job(tmp_path, mode, {"MPICOLL_PROGRESS_THREAD": "0"})
    assert job.returncode == 0, job.stderr
    assert _reports(job.stdout) == [("0", "False", "False"),
                                    ("1", "False", "False")], job.stdout
