"""Tier 2: the 3D-parallel workload (``bench/mesh3d_mlp.py``) at whatever
world size runs it: its final weights and losses must match the same
training in one process, for a balanced dp x pp x tp mesh and for each
kind of parallelism alone."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest
from mpi4py import MPI

import mpicoll

pytestmark = pytest.mark.mpi

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench" / "mesh3d_mlp.py"
_spec = importlib.util.spec_from_file_location("mesh3d_mlp", BENCH)
mlp = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = mlp  # dataclasses look their module up
_spec.loader.exec_module(mlp)

P = MPI.COMM_WORLD.Get_size()


def balanced(p: int) -> tuple[int, int, int]:
    """dp x pp x tp: 2 of tp and of pp where p allows, the rest dp
    (8 -> 2x2x2, 4 -> 1x2x2, 6 -> 3x1x2, 5 -> 5x1x1)."""
    tp = 2 if p % 2 == 0 else 1
    pp = 2 if (p // tp) % 2 == 0 else 1
    return p // (tp * pp), pp, tp


SHAPES = sorted({balanced(P), (P, 1, 1), (1, P, 1), (1, 1, P)}, reverse=True)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_training_matches_one_process(shape):
    dp, pp, tp = shape
    cfg = mlp.Config(dim=8, hidden=4 * tp, batch=2 * 2 * dp,
                     microbatches=2, steps=3)
    mesh = mpicoll.Mesh(MPI.COMM_WORLD, shape, ("dp", "pp", "tp"))
    shard, losses, timer = mlp.train(mesh, cfg)
    weights, ref_losses = mlp.reference(cfg, pp)
    assert mlp.mismatch(mesh, cfg, shard, weights) <= mlp.TOLERANCE
    assert max(abs(a - b) / b for a, b in zip(losses, ref_losses)) <= 1e-12
    # Communication as designed: per step and microbatch, one tp
    # all-reduce forward and (past the first stage) one backward; a pp
    # message each way to each neighbour stage; one dp all-reduce a step.
    stage, last = mesh.coords.pp, pp - 1
    n = cfg.steps * cfg.microbatches
    assert timer.calls["tp"] == n * (1 + (stage > 0))
    assert timer.calls["pp"] == n * 2 * ((stage > 0) + (stage < last))
    assert timer.calls["dp"] == cfg.steps
    assert timer.bytes["dp"] == cfg.steps * 2 * cfg.dim * (cfg.hidden // tp) * 8
    mesh.free()


def test_command_line(capsys):
    """``main`` as ``mpiexec ... bench/mesh3d_mlp.py`` runs it: exit status
    0 and rank 0's report."""
    shape = ",".join(map(str, balanced(P)))
    assert mlp.main(["--shape", shape, "--steps", "2", "--dim", "8",
                     "--hidden", "8", "--batch", str(4 * P)]) == 0
    out = capsys.readouterr().out
    if MPI.COMM_WORLD.Get_rank() == 0:
        assert "max relative difference" in out and ": OK" in out
        for kind in ("tp  all_reduce", "pp  send/recv", "dp  all_reduce"):
            assert kind in out
    else:
        assert out == ""


def test_bad_shape_is_refused_on_every_rank(capsys):
    assert mlp.main(["--shape", f"{P + 1},1,1"]) == 2
    err = capsys.readouterr().err
    if MPI.COMM_WORLD.Get_rank() == 0:
        assert "asked for a bad mesh" in err
