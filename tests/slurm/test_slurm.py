"""The Slurm batch scripts (slurm/*.sbatch) on a real Slurm.

Marked ``slurm``: a real Slurm on this machine (slurm/local-cluster.sh:
munged, slurmctld and two slurmd, "node1" and "node2"), every script
submitted with small sizes, each job waited for and its state, log and
files checked; a job whose program raises on one rank must end FAILED
in seconds, and srun without a PMI the MPI speaks must fail the launch
check. These run only with ``MPICOLL_TEST_SLURM=1`` (tests/run-all.sh
sets it), as root, where Slurm is installed or apt-get can install it.
The launch check itself: tests/serial/test_launch.py (its logic, tier 1)
and tests/mpi/test_launch_mpi.py (under mpiexec, tier 2).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import mpicoll

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
SLURM = ROOT / "slurm"
HELLO = str(SLURM / "examples" / "hello_allreduce.py")


# -- the batch scripts on a real Slurm ---------------------------------------

def _cannot_run_slurm() -> str | None:
    """Why the Slurm tests cannot run here, or None."""
    if os.environ.get("MPICOLL_TEST_SLURM") != "1":
        return "set MPICOLL_TEST_SLURM=1 to run (tests/run-all.sh does)"
    if os.geteuid() != 0:
        return "needs root: slurmd runs the jobs"
    if not shutil.which("sbatch") and not shutil.which("apt-get"):
        return "Slurm is not installed and there is no apt-get to install it"
    return None


ACTIVE = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING")


@pytest.fixture(scope="module")
def cluster():
    """The environment for sbatch: the local cluster's SLURM_CONF (and the
    MPICH netmod it asks for), no Slurm variables of an enclosing job, and
    the checkout and venv the scripts should use. Brought up once for the
    module (in its own directory and ports, so it never meets a cluster
    started by hand), and down at the end."""
    reason = _cannot_run_slurm()
    if reason:
        pytest.skip(reason)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.setdefault("MPICOLL_SLURM_DIR", "/tmp/mpicoll-slurm-test")
    env.setdefault("MPICOLL_SLURM_PORT", "16917")
    script = str(SLURM / "local-cluster.sh")
    up = subprocess.run(["bash", script, "up"], env=env, capture_output=True,
                        text=True, timeout=110)  # apt-get install included
    assert up.returncode == 0, up.stderr
    # up prints: export SLURM_CONF=... MPIR_CVAR_CH4_NETMOD=ofi
    env.update(dict(kv.split("=", 1) for kv in
                    up.stdout.strip().splitlines()[-1].split()[1:]))
    env["MPICOLL_ROOT"] = str(ROOT)
    if sys.prefix != sys.base_prefix:
        env["MPICOLL_VENV"] = sys.prefix
    yield env
    subprocess.run(["bash", script, "down"], env=env, capture_output=True,
                   timeout=120, check=True)


def submit(env, where: Path, script: str, *args: str, options=(),
           **variables: str) -> str:
    """Submit slurm/SCRIPT from ``where`` (its log and results go there)
    with extra environment ``variables``; the job id."""
    out = subprocess.run(["sbatch", "--parsable", *options,
                          str(SLURM / script), *args],
                         env={**env, **variables}, cwd=where, check=True,
                         capture_output=True, text=True, timeout=30)
    return out.stdout.strip().split(";")[0]


def finish(env, job: str, limit: float = 100) -> dict:
    """Wait for ``job`` to end (cancel it after ``limit`` seconds); its
    ``scontrol show job`` fields, RunTime in seconds as ``seconds``."""
    deadline = time.monotonic() + limit
    while True:
        out = subprocess.run(["scontrol", "show", "job", "-o", job], env=env,
                             check=True, capture_output=True, text=True).stdout
        fields = dict(re.findall(r"(\w+)=(\S*)", out))
        if fields["JobState"] not in ACTIVE:
            h, m, s = fields["RunTime"].split(":")
            fields["seconds"] = int(h) * 3600 + int(m) * 60 + int(s)
            return fields
        if time.monotonic() > deadline:
            subprocess.run(["scancel", job], env=env)
            pytest.fail(f"job {job} still {fields['JobState']} after {limit} s")
        time.sleep(0.5)


def log(where: Path, job: str) -> str:
    """The job's output file, named %x-%j.out by every script."""
    (path,) = where.glob(f"*-{job}.out")
    return path.read_text()


def run_job(env, where, script, *args, options=(), **variables):
    """Submit, wait; (job id, fields, log)."""
    job = submit(env, where, script, *args, options=options, **variables)
    fields = finish(env, job)
    return job, fields, log(where, job)


def completed(fields: dict, text: str) -> None:
    assert (fields["JobState"], fields["ExitCode"]) == ("COMPLETED", "0:0"), text


def read_bench(where: Path, job: str) -> dict:
    """The job's bench.json, checked: every row right, a PNG beside it."""
    results = where / "results" / job
    data = json.loads((results / "bench.json").read_text())
    assert data["records"]
    assert all(r["wrong"] == 0 for r in data["records"])
    assert (results / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return data


@pytest.mark.slurm
def test_bench_one_node(cluster, tmp_path):
    job, fields, text = run_job(
        cluster, tmp_path, "bench.sbatch",
        MPICOLL_BENCH_ARGS="-c allreduce,bcast -b 8 -e 64K -f 8 "
                           "--time-budget 2")
    completed(fields, text)
    assert "mpicoll.launch: 2 ranks on 1 node (node1: 2)" in text
    data = read_bench(tmp_path, job)
    assert data["header"]["nranks"] == 2
    for name in ("allreduce", "bcast"):
        assert {r["algorithm"] for r in data["records"]
                if r["collective"] == name} == {*mpicoll.algorithms(name),
                                                "auto"}
    assert {r["nbytes"] for r in data["records"]} == {8, 64, 512, 4096,
                                                      32768}


@pytest.mark.slurm
def test_bench_multinode(cluster, tmp_path):
    job, fields, text = run_job(
        cluster, tmp_path, "bench-multinode.sbatch",
        options=["--ntasks-per-node=2"],
        MPICOLL_BENCH_ARGS="-c allreduce -b 1K -e 64K -f 8 --time-budget 3")
    completed(fields, text)
    assert "mpicoll.launch: 4 ranks on 2 nodes (node1: 2, node2: 2)" in text
    data = read_bench(tmp_path, job)
    assert data["header"]["nranks"] == 4
    # -a all: every registered algorithm, hierarchical ones included.
    assert {r["algorithm"] for r in data["records"]} == {
        *mpicoll.algorithms("allreduce"), "auto"}
    rules = json.loads((tmp_path / "results" / job / "rules.json").read_text())
    assert rules["nranks"] == 4
    assert rules["rules"]["allreduce"][-1]["max_bytes"] is None
    # Explain mode: each rank says which algorithm auto ran and why (on
    # 4 ranks, above 16 KiB: the cost model, mpicoll.select.policy.BEYOND_PAIR).
    for rank in range(4):
        assert re.search(rf"^\[rank {rank}\] allreduce 65536 B: \w+ "
                         r"\(cost model \(mpicoll's default", text, re.M), text


@pytest.mark.slurm
def test_calibrate_both_links(cluster, tmp_path):
    """slurm/calibrate.sbatch measures two ranks on one node and one rank
    on each of two nodes; the two files then feed the simulator."""
    from mpicoll.model.calibration import load_calibration
    from mpicoll.sim.predict import main as simulate

    job, fields, text = run_job(
        cluster, tmp_path, "calibrate.sbatch",
        MPICOLL_CALIBRATE_ARGS="-b 8 -e 64K -f 8 --time-budget 2 --ops sum "
                               "--dtypes float32")
    completed(fields, text)
    results = tmp_path / "results" / job
    intra, inter = (str(results / f"calibration-{k}.json")
                    for k in ("intra", "inter"))
    assert load_calibration(intra).ranks_per_node == 2
    assert load_calibration(inter).ranks_per_node == 1
    assert simulate(["--calibration", inter, "--calibration-intra", intra,
                     "--ranks", "8", "--ranks-per-node", "4", "-b", "64K",
                     "-e", "64K", "--quiet"]) == 0


@pytest.mark.slurm
@pytest.mark.parametrize("launcher", ["srun", "mpiexec"])
def test_run_user_program(cluster, tmp_path, launcher):
    _, fields, text = run_job(
        cluster, tmp_path, "run.sbatch", HELLO,
        options=["--nodes=2", "--ntasks-per-node=2"],
        MPICOLL_LAUNCHER=launcher)
    completed(fields, text)
    assert "mpicoll.launch: 4 ranks on 2 nodes (node1: 2, node2: 2)" in text
    assert "hello_allreduce: 4 ranks on 2 node(s)" in text
    assert "all right" in text


@pytest.mark.slurm
def test_one_failing_rank_ends_the_job(cluster, tmp_path):
    _, fields, text = run_job(
        cluster, tmp_path, "run.sbatch", HELLO,
        "--fail-rank", "1")
    assert fields["JobState"] == "FAILED", text
    assert "rank 1 fails on purpose" in text
    assert "all right" not in text
    # The others were waiting in the allreduce: ended in seconds, not by
    # the 10-minute --time.
    assert fields["TimeLimit"] == "00:10:00"
    assert fields["seconds"] < 60


@pytest.mark.slurm
@pytest.mark.parametrize("launcher", ["srun", "mpiexec"])
def test_a_rank_killed_mid_allreduce_fails_the_job(cluster, tmp_path,
                                                     launcher):
    """tests/faults.py's ``kill``: rank 1 SIGKILLs itself during large ring
    allreduces under a 2 s deadline; srun --kill-on-bad-exit (or mpiexec)
    ends the other ranks, and the job is FAILED in seconds."""
    _, fields, text = run_job(
        cluster, tmp_path, "run.sbatch",
        str(TESTS / "faults.py"), "kill", "2", "raise",
        MPICOLL_LAUNCHER=launcher)
    assert fields["JobState"] == "FAILED", text
    assert "rank 1 pid" in text and "done" not in text
    assert fields["seconds"] < 60


@pytest.mark.slurm
def test_srun_without_pmi_fails_the_launch_check(cluster, tmp_path):
    _, fields, text = run_job(
        cluster, tmp_path, "run.sbatch", HELLO,
        MPICOLL_SRUN_MPI="none")
    assert fields["JobState"] == "FAILED", text
    assert ("MPI world has 1 rank but the launcher started 4 "
            "(SLURM_STEP_NUM_TASKS=4)") in text
    assert "hello_allreduce" not in text  # the program never ran


@pytest.mark.slurm
def test_test_suite_job(cluster, tmp_path):
    _, fields, text = run_job(
        cluster, tmp_path, "test.sbatch",
        options=["--nodes=2", "--ntasks-per-node=2"],
        MPICOLL_TEST_RANKS="2 3",
        MPICOLL_TEST_ARGS="tests/mpi/test_launch_mpi.py "
        "tests/mpi/test_readme_mpi.py")
    completed(fields, text)
    assert "mpicoll.launch: 4 ranks on 2 nodes" in text
    for n in (2, 3):
        assert f"== tier 2 on {n} ranks" in text
    # One summary line per rank: 2 + 3, each with the launch and README tests.
    summaries = re.findall(r"^(\d+) passed", text, re.M)
    assert len(summaries) == 5 and all(int(k) >= 3 for k in summaries), text
    assert "failed" not in text
