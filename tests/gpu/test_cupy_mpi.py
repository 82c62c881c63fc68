"""The device path on a real GPU with CuPy (skipped where there is none).

Run under mpiexec like the other MPI tests; several ranks may share one
GPU. The same cases as test_device_mpi, on CuPy arrays, against the host
results, CUDA-aware and staged (staging is forced with
MPICOLL_CUDA_AWARE=0; awareness is tested only where the probe says yes).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll import ProcessGroup as PG
from mpicoll.bench.device import unavailable
from mpicoll.device.cuda import cuda_aware

pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(unavailable("cuda") is not None,
                                 reason="needs CuPy and a GPU")]
# The cases are test_device_mpi's, beside the other MPI tests.
MPI_TESTS = str(Path(__file__).resolve().parents[1] / "mpi")


@pytest.fixture(scope="module")
def cupy():
    import cupy

    return cupy


@pytest.fixture(scope="module")
def comm():
    return mpicoll.Comm(MPI.COMM_WORLD)


@pytest.fixture(params=["aware", "staged"])
def mode(request, monkeypatch):
    monkeypatch.delenv("MPICOLL_CUDA_AWARE", raising=False)
    if request.param == "staged":
        monkeypatch.setenv("MPICOLL_CUDA_AWARE", "0")
    elif not cuda_aware():
        pytest.skip("this MPI library is not CUDA-aware")
    return request.param


def _cases():
    if MPI_TESTS not in sys.path:
        sys.path.append(MPI_TESTS)
    from test_device_mpi import CASES, _runs

    return CASES, list(_runs())


@pytest.mark.parametrize("nonblocking", [False, True],
                         ids=["blocking", "nonblocking"])
@pytest.mark.parametrize(("name", "algorithm"), _cases()[1])
def test_cupy_arrays_give_the_host_results(cupy, comm, mode, name,
                                           algorithm, nonblocking):
    run = _cases()[0][name][1]
    try:
        want = run(comm, np.array, algorithm, False)
    except mpicoll.ConstraintError as exc:
        pytest.skip(str(exc))
    got = run(comm, cupy.asarray, algorithm, nonblocking)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(cupy.asnumpy(g), w)


def test_caller_stream_is_ordered_without_blocking_the_host(cupy, comm,
                                                            mode):
    """The input is written by a kernel on a side stream, the result read
    by one on that stream after wait(): no host synchronisation between."""
    side = cupy.cuda.Stream(non_blocking=True)
    with side:
        x = cupy.full(1 << 22, comm.rank + 1.0, dtype=cupy.float32)
        work = PG(comm).all_reduce(x, algorithm="ring", async_op=True)
        work.wait()
        y = x * 2
    side.synchronize()
    total = sum(range(1, comm.size + 1))
    assert float(y[0]) == float(y[-1]) == 2.0 * total


def test_bucketer_on_cupy_arrays(cupy, comm, mode):
    grads = [cupy.full(n, comm.rank + 1.0, dtype=cupy.float32)
             for n in (1000, 1 << 18, 7, 1 << 20)]
    bucketer = mpicoll.GradientBucketer(comm, grads, bucket_bytes=1 << 20,
                                        average=True)
    for step in range(3):
        for g in grads:
            g.fill(comm.rank + 1.0 + step)
        for g in reversed(grads):
            bucketer.mark_ready(g)
        bucketer.wait()
        mean = sum(range(1, comm.size + 1)) / comm.size + step
        for g in grads:
            np.testing.assert_allclose(cupy.asnumpy(g), mean, rtol=1e-6)
