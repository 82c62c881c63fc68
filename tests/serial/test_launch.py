"""The launch check's logic (``mpicoll.guard.launch``) on made-up environments,
in one process with no MPI. Under a real launcher it is
tests/mpi/test_launch_mpi.py; in Slurm jobs, tests/slurm/test_slurm.py."""

from __future__ import annotations

import pytest

from mpicoll.guard.launch import LaunchError, check_world, launched_size


def test_launched_size_prefers_the_mpi_launcher():
    # mpiexec inside an allocation: srun started one proxy per node (2),
    # hydra started 4 ranks.
    env = {"SLURM_STEP_NUM_TASKS": "2", "PMI_SIZE": "4"}
    assert launched_size(env) == (4, "PMI_SIZE")
    assert launched_size({"OMPI_COMM_WORLD_SIZE": "3",
                          "SLURM_STEP_NUM_TASKS": "1"}) == (
        3, "OMPI_COMM_WORLD_SIZE")
    assert launched_size({"SLURM_STEP_NUM_TASKS": "8"}) == (
        8, "SLURM_STEP_NUM_TASKS")
    assert launched_size({"PMI_SIZE": "", "SLURM_NTASKS": "4"}) is None
    assert launched_size({}) is None


def test_check_world_passes_when_the_counts_agree():
    check_world(4, {"PMI_SIZE": "4", "SLURM_STEP_NUM_TASKS": "2"})
    check_world(4, {"SLURM_STEP_NUM_TASKS": "4"})
    check_world(1, {})  # no launcher: nothing to compare


def test_check_world_catches_singleton_worlds():
    with pytest.raises(LaunchError, match=r"MPI world has 1 rank but the "
                       r"launcher started 4 \(SLURM_STEP_NUM_TASKS=4\): "
                       r"each process is alone.*--mpi=pmi2"):
        check_world(1, {"SLURM_STEP_NUM_TASKS": "4"})
    with pytest.raises(LaunchError, match=r"has 2 ranks but the launcher "
                       r"started 4 .*disagree"):
        check_world(2, {"PMI_SIZE": "4"})
