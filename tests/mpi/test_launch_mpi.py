"""The launch check (``mpicoll.guard.launch``) under a real launcher: mpiexec
here, srun in slurm/test.sbatch (tests/slurm/test_slurm.py runs it there).
Its logic on made-up environments is tests/serial/test_launch.py."""

from __future__ import annotations

import re

import pytest

from mpicoll.guard.launch import launched_size, main


@pytest.mark.mpi
def test_launch_check_under_a_real_launcher(capsys):
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    # mpiexec (hydra) and srun --mpi=pmi2 both tell each rank the size.
    assert launched_size()[0] == world.Get_size()
    assert main(["check"]) == 0
    out = capsys.readouterr().out
    if world.Get_rank() == 0:
        assert re.search(rf"^mpicoll.launch: {world.Get_size()} ranks? on "
                         rf"\d+ nodes? \(", out, re.M)
    else:
        assert out == ""

