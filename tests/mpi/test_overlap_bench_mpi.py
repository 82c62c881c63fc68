"""bench/overlap.py's benchmark run through event-like stamps (host arrays,
events that read the host clock), as ``--device cuda`` runs it, without a
GPU (tests/gpu/test_overlap_gpu_mpi.py runs it on one)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from mpi4py import MPI

from overlapcase import TINY, check_run, fake_clock, overlap


@pytest.mark.mpi
@pytest.mark.interface
def test_run_with_event_stamps(monkeypatch, tmp_path):
    """The benchmark loop on event-like stamps (host arrays, events that
    read the host clock): nothing treats a stamp as a number."""
    clock = fake_clock(lambda: time.perf_counter() * 1e3)
    monkeypatch.setattr(overlap, "device", lambda name: (np, clock))
    check_run(overlap.run(overlap.parse_args(TINY), MPI.COMM_WORLD),
              tmp_path)
