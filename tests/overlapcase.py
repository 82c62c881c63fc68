"""What the tests of bench/overlap.py share: the module itself, a tiny
run's arguments, a :class:`CudaClock` on fake events, and the checks of a
run's result; for tests/serial/test_overlap_bench.py,
tests/mpi/test_overlap_bench_mpi.py and tests/gpu/test_overlap_gpu_mpi.py."""

from __future__ import annotations

from scripts import load

overlap = load("overlap")
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


def check_run(result, tmp_path):
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
