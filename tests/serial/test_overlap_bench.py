"""bench/overlap.py's ``--device cuda``: the usage error where CuPy or a
GPU is missing, and :class:`CudaClock`'s arithmetic on fake events (tier 1).
The benchmark run through event-like stamps is
tests/mpi/test_overlap_bench_mpi.py, on a real GPU
tests/gpu/test_overlap_gpu_mpi.py; the host benchmark's smoke test is in
test_bucketing_mpi."""

from __future__ import annotations

import sys
import types

import pytest

from overlapcase import fake_clock, overlap


def test_cuda_clock_resolves_seconds_since_creation():
    ms = [5.0]
    clock = fake_clock(lambda: ms[0])
    ms[0] = 7.5
    a = clock.stamp()
    ms[0] = 12.0
    b = clock.stamp()
    assert not a.synced and not b.synced  # stamping does not block
    assert clock.resolve(b) == pytest.approx(0.007)
    assert clock.resolve(a) == pytest.approx(0.0025)
    assert a.synced and b.synced


def test_cuda_without_cupy_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import fails
    assert overlap.main(["--device", "cuda"]) == 2
    assert "--device cuda needs CuPy" in capsys.readouterr().err


def test_cuda_without_a_gpu_is_a_usage_error(monkeypatch, capsys):
    class CUDARuntimeError(RuntimeError):
        pass

    def no_device():
        raise CUDARuntimeError("cudaErrorNoDevice")

    runtime = types.SimpleNamespace(CUDARuntimeError=CUDARuntimeError,
                                    getDeviceCount=no_device)
    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(runtime=runtime)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    assert overlap.main(["--device", "cuda"]) == 2
    assert "no usable GPU (cudaErrorNoDevice)" in capsys.readouterr().err
