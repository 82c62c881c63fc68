"""bench/gpu_check.sh, the prepared GPU run, from plain pytest: without a
GPU it refuses to start, saying why, and its dry run (every step on the
host model of CUDA) runs every step to a right result: what keeps the
script working between the rare runs on a GPU."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "gpu_check.sh"
STEPS = ["tests-n2", "latency", "small-n2", "model-n2", "alltoall16m-n2",
         "overlap-n2", "overlap-n2-big", "bench-n2", "probe-n2"]


def _library() -> str:
    """The MPI library's version string, asked in a process of its own
    (MPI is not initialized in this one)."""
    return subprocess.run(
        [sys.executable, "-c", "import mpi4py; mpi4py.rc.initialize = False;"
         " from mpi4py import MPI; print(MPI.Get_library_version())"],
        capture_output=True, text=True, timeout=60).stdout


def _run(*args: str, timeout: float) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHON=sys.executable,
               MPIEXEC=str(Path(sys.executable).parent / "mpiexec"))
    env.pop("MPICOLL_MODEL_LATENCIES", None)
    return subprocess.run(["bash", str(SCRIPT), *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_without_a_gpu_it_refuses_to_start(tmp_path):
    out = tmp_path / "out"
    run = _run(str(out), timeout=120)
    if run.returncode != 2 and "nvidia" in run.stdout.lower():
        pytest.skip("this machine has a GPU")
    assert run.returncode == 2, run.stdout + run.stderr
    assert "no GPU to check here" in run.stderr
    assert "--dry-run" in run.stderr
    assert not out.exists()


@pytest.mark.skipif("Open MPI" in _library(),
                    reason="the MPICH leg runs it (the GPU runs use MPICH)")
@pytest.mark.timeout(420)
def test_dry_run_runs_every_step(tmp_path):
    out, archive = tmp_path / "out", tmp_path / "out.tgz"
    run = _run("--dry-run", "--archive", str(archive), str(out), "2",
               timeout=400)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-4000:]
    steps = re.findall(r"^== (\S+): exit (\d+) after", run.stdout, re.M)
    assert steps == [(name, "0") for name in STEPS], log[-4000:]
    with tarfile.open(archive) as packed:
        kept = {Path(m.name).name for m in packed.getmembers() if m.isfile()}
    assert kept == {p.name for p in out.iterdir()}
    assert {f"{name}.txt" for name in STEPS} | {"machine.txt"} <= kept
    text = {name: (out / f"{name}.txt").read_text() for name in STEPS}
    assert re.search(r"\d+ passed", text["tests-n2"])
    assert "failed" not in text["tests-n2"]
    for name in ("small-n2", "alltoall16m-n2", "bench-n2"):
        verdicts = re.findall(r"^# \w+: (all results right|\d+ wrong "
                              r"elements)$", text[name], re.M)
        assert verdicts and set(verdicts) == {"all results right"}, name
    for name in ("overlap-n2", "overlap-n2-big"):
        assert "host model of CUDA" in text[name]
        assert re.search(r"max relative difference .*: OK", text[name])
    assert "Allreduce native" in text["model-n2"]
    assert "MPI Barrier" in text["latency"]
