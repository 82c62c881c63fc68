"""Tier 1: the peers script's bookkeeping, the OSU method's iteration
counts, and ``--device`` handling (no MPI messages needed)."""

import sys

import numpy as np
import pytest

from mpicoll.bench import device
from mpicoll.bench.cli import parse_args
from scripts import load

peers = load("peers")
osu = load("osu_check")


def _row(name, avg, nbytes=8, wrong=0, chosen=None):
    return {"algorithm": name, "nbytes": nbytes, "wrong": wrong,
            "chosen": chosen, "time_us": {"p50": avg}}


def test_best_hand_built_is_the_fastest_right_one():
    rows = {"mpicoll auto": _row("mpicoll auto", 5.0, chosen="ring"),
            "ring": _row("ring", 4.0), "bruck": _row("bruck", 1.0, wrong=2),
            "linear": _row("linear", 3.0), "mpi4py": _row("mpi4py", 6.0)}
    out = peers._fold_hand_built(rows, ["ring", "bruck", "linear"])
    assert [r["algorithm"] for r in out] == ["mpicoll auto", "mpicoll best",
                                             "mpi4py"]
    best = out[1]
    assert best["chosen"] == "linear" and best["time_us"]["p50"] == 3.0
    assert best["wrong"] == 2  # a wrong hand-built algorithm still shows


def test_peers_rejects_unknown_collective(capsys):
    with pytest.raises(SystemExit) as e:
        peers.arguments(["-c", "alltoall"])
    assert e.value.code == 2


def test_osu_iterations():
    assert osu.osu_iterations(8) == (200, 1000)
    assert osu.osu_iterations(8192) == (200, 1000)
    assert osu.osu_iterations(8193) == (10, 100)
    assert osu.osu_iterations(4, scale=0.01) == (2, 10)


def test_cpu_device_is_a_no_op():
    a = np.arange(3)
    assert device.unavailable("cpu") is None
    assert device.to_device(a, "cpu") is a and device.to_host(a) is a
    assert device.synchronizer("cpu")() is None


def test_cuda_without_cupy_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import fails
    assert "CuPy" in device.unavailable("cuda")
    with pytest.raises(SystemExit) as e:
        parse_args(["--device", "cuda"], 0, 2)
    assert e.value.code == 2
    assert "CuPy" in capsys.readouterr().err


def test_progress_follows_the_terminal(monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert parse_args([], 0, 2).progress
    assert not parse_args(["--quiet"], 0, 2).progress
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    assert not parse_args([], 0, 2).progress
    assert parse_args(["--progress"], 0, 2).progress


def test_spans_are_runs_of_sizes():
    rows = [_row("mpicoll auto", 1.0, n, chosen=c) for n, c in
            ((32, "native"), (8, "native"), (128, "ring"), (512, "native"))]
    assert peers.spans(rows) == "native 8-32 B, ring 128 B, native 512 B"
