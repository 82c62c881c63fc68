"""bench/overlap.py's ``--device cuda`` on a real GPU with CuPy (skipped
where there is none); under mpiexec like the other MPI tests. Without a GPU
the same run on event-like stamps is tests/mpi/test_overlap_bench_mpi.py."""

from __future__ import annotations

import pytest
from mpi4py import MPI

from mpicoll.bench.device import unavailable
from overlapcase import TINY, check_run, overlap

NO_GPU = unavailable("cuda")  # why --device cuda cannot run here, or None


@pytest.mark.mpi
@pytest.mark.skipif(NO_GPU is not None, reason=str(NO_GPU))
def test_run_on_the_gpu(tmp_path):
    args = overlap.parse_args([*TINY, "--device", "cuda"])
    check_run(overlap.run(args, MPI.COMM_WORLD), tmp_path)
