"""bench/overlap.py's ``--device cuda``: the usage error where CuPy or a
GPU is missing, :class:`CudaClock`'s arithmetic on fake events (tier 1),
and the benchmark run through event-like stamps, on a real GPU where
there is one (tier 2). The host benchmark's smoke test is in
test_bucketing_mpi."""

from __future__ import annotations

import sys
import time
import types

import numpy as np
import pytest
from mpi4py import MPI

from mpicoll.bench.device import unavailable
from scripts import load

overlap = load("overlap")
NO_GPU = unavailable("cuda")  # why --device cuda cannot run here, or None
TINY = ["--layers", "3", "--size", "16", "--batch", "4", "--steps", "2",
        "--bucket-kb", "1"]  # 3 buckets: 16 x 16 float32 = 1 KiB a layer


class FakeEvent:
    """A timing event on a fake device whose clock (milliseconds) is
    ``now()``."""

    def __init__(self, now) -> None:
        self.now, self.at, self.synced = now, None, False

    def record(self) -> None:
        self.at = self.now()

    def synchronize(self) -> None:
        self.synced = True


def fake_clock(now) -> overlap.CudaClock:
    """A :class:`CudaClock` on :class:`FakeEvent` s; like
    cudaEventElapsedTime, measuring refuses events not yet complete."""

    def elapsed_ms(start: FakeEvent, end: FakeEvent) -> float:
        assert start.synced and end.synced, "event not complete"
        return end.at - start.at

    return overlap.CudaClock(lambda: FakeEvent(now), elapsed_ms)


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


def _check_run(result, tmp_path):
    """Times, check and timelines of a run; its plot draws."""
    assert result.worst <= result.tolerance and result.buckets == 3
    for mode in overlap.MODES:
        assert getattr(result, mode) > 0
    for mode, spans in result.timelines.items():
        names = [name for name, _, _ in spans]
        assert [n for n in names if n.startswith("layer")] == \
            ["layer 2", "layer 1", "layer 0"], mode
        assert sorted(n for n in names if n.startswith("bucket")) == \
            ["bucket 0", "bucket 1", "bucket 2"], mode
        assert all(0 <= a <= b for _, a, b in spans), mode
    path = tmp_path / "timeline.png"
    overlap.plot(result, str(path), "test")
    assert path.stat().st_size > 0


@pytest.mark.mpi
def test_run_with_event_stamps(monkeypatch, tmp_path):
    """The benchmark loop on event-like stamps (host arrays, events that
    read the host clock): nothing treats a stamp as a number."""
    clock = fake_clock(lambda: time.perf_counter() * 1e3)
    monkeypatch.setattr(overlap, "device", lambda name: (np, clock))
    _check_run(overlap.run(overlap.parse_args(TINY), MPI.COMM_WORLD),
               tmp_path)


@pytest.mark.mpi
@pytest.mark.skipif(NO_GPU is not None, reason=str(NO_GPU))
def test_run_on_the_gpu(tmp_path):
    args = overlap.parse_args([*TINY, "--device", "cuda"])
    _check_run(overlap.run(args, MPI.COMM_WORLD), tmp_path)
