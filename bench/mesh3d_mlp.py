"""A 3D-parallel workload: a small NumPy MLP trained on a dp x pp x tp mesh.

    mpiexec -n 8 python -m mpi4py bench/mesh3d_mlp.py --shape 2,2,2

The model is a chain of ``pp`` residual blocks ``y = x + relu(x W1) W2``,
one per pipeline stage, trained by SGD on a mean squared error. The three
kinds of parallelism each use their own process group of one
``mpicoll.Mesh`` (``mesh.get_group(name)``, a ``mpicoll.ProcessGroup``):

- **tp** (tensor parallel, Megatron-style): ``W1`` is split by columns and
  ``W2`` by rows over the ranks of ``mesh["tp"]``, so each computes a
  partial ``relu(x W1_i) W2_i`` and one all-reduce (sum) makes ``y``; the
  backward pass all-reduces the input gradient the same way.
- **pp** (pipeline parallel, GPipe): the batch is cut into microbatches;
  each stage receives activations from the previous stage and sends its
  output to the next (``mesh["pp"]`` point-to-point, where a rank's number
  is its stage), then gradients flow back the same way.
- **dp** (data parallel): each ``dp`` replica takes its share of the batch;
  the gradients (one flat buffer) are averaged over ``mesh["dp"]`` with one
  all-reduce per step.

Weights and data come from ``--seed``. Every rank then recomputes the same
steps in one process (plain NumPy, float64, whole matrices, whole batch)
and checks its shard of the final weights against that, to a relative
1e-12; the exit status is non-zero on a mismatch. Rank 0 prints the
losses, the check, and the time spent in each kind of communication (the
slowest rank's; a pp receive includes waiting for the previous stage to
compute, i.e. the pipeline bubble).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

import mpicoll

TOLERANCE = 1e-12
KINDS = ("tp", "pp", "dp")


@dataclass(frozen=True)
class Config:
    dim: int = 32           # width of the activations
    hidden: int = 64        # width inside each block (split over tp)
    batch: int = 32         # samples per step (split over dp)
    microbatches: int = 4   # per dp replica and step (the pipeline's)
    steps: int = 5
    lr: float = 0.5
    seed: int = 0


def initial_weights(cfg: Config, stages: int) -> list[list[np.ndarray]]:
    """``[W1, W2]`` of every stage, whole, from the seed."""
    rng = np.random.default_rng(cfg.seed)
    return [[rng.standard_normal((cfg.dim, cfg.hidden)) / np.sqrt(cfg.dim),
             rng.standard_normal((cfg.hidden, cfg.dim))
             / (np.sqrt(cfg.hidden) * stages)]
            for _ in range(stages)]


def batch(cfg: Config, step: int) -> tuple[np.ndarray, np.ndarray]:
    """Inputs and targets of ``step``, whole: learn a rotation of the
    features."""
    x = np.random.default_rng([cfg.seed, step]).standard_normal(
        (cfg.batch, cfg.dim))
    return x, np.roll(x, 1, axis=1)


def reference(cfg: Config, stages: int):
    """The same training in one process: ``(weights, losses)``."""
    weights = initial_weights(cfg, stages)
    losses = []
    for step in range(cfg.steps):
        x, target = batch(cfg, step)
        stash = []
        for w1, w2 in weights:
            h = np.maximum(x @ w1, 0)
            stash.append((x, h))
            x = x + h @ w2
        losses.append(0.5 * np.sum((x - target) ** 2) / x.size)
        dy = (x - target) / x.size
        grads = []
        for (w1, w2), (x, h) in zip(reversed(weights), reversed(stash)):
            dh = (dy @ w2.T) * (h > 0)
            grads.append((x.T @ dh, h.T @ dy))
            dy = dy + dh @ w1.T
        for (w1, w2), (g1, g2) in zip(weights, reversed(grads)):
            w1 -= cfg.lr * g1
            w2 -= cfg.lr * g2
    return weights, losses


class Timer:
    """Seconds, calls and buffer bytes of communication per kind."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(KINDS, 0.0)
        self.calls = dict.fromkeys(KINDS, 0)
        self.bytes = dict.fromkeys(KINDS, 0)

    def __call__(self, kind: str, call, x: np.ndarray, *args, **kw):
        start = time.perf_counter()
        out = call(x, *args, **kw)
        self.seconds[kind] += time.perf_counter() - start
        self.calls[kind] += 1
        self.bytes[kind] += x.nbytes
        return out


def train(mesh: mpicoll.Mesh, cfg: Config, algorithm: str = "auto"):
    """Train on ``mesh`` (dims ``dp``, ``pp``, ``tp``): returns this rank's
    shard ``(W1[:, cols], W2[cols, :])`` of its stage's final weights, the
    loss of each step (on every rank), and the :class:`Timer`."""
    dp, pp, tp = mesh["dp"], mesh["pp"], mesh["tp"]
    dpg, ppg, tpg = (mesh.get_group(n) for n in ("dp", "pp", "tp"))
    if cfg.hidden % tp.size or cfg.batch % (dp.size * cfg.microbatches):
        raise ValueError(f"hidden {cfg.hidden} must be a multiple of tp "
                         f"({tp.size}), and batch {cfg.batch} of dp x "
                         f"microbatches ({dp.size} x {cfg.microbatches})")
    stage, last = pp.rank, pp.size - 1
    width = cfg.hidden // tp.size
    cols = slice(tp.rank * width, (tp.rank + 1) * width)
    # Parameters and gradients in flat buffers: dp reduces one buffer.
    split = cfg.dim * width
    params, grads = np.empty(2 * split), np.empty(2 * split)
    w1, g1 = (a[:split].reshape(cfg.dim, width) for a in (params, grads))
    w2, g2 = (a[split:].reshape(width, cfg.dim) for a in (params, grads))
    whole1, whole2 = initial_weights(cfg, pp.size)[stage]
    w1[...], w2[...] = whole1[:, cols], whole2[cols, :]
    share = cfg.batch // dp.size
    micro = share // cfg.microbatches
    timer, losses = Timer(), np.zeros(cfg.steps)
    for step in range(cfg.steps):
        x_all, t_all = batch(cfg, step)
        x_all = x_all[dp.rank * share:(dp.rank + 1) * share]
        t_all = t_all[dp.rank * share:(dp.rank + 1) * share]
        grads[...] = 0
        stash = []
        for m in range(cfg.microbatches):  # forward
            rows = slice(m * micro, (m + 1) * micro)
            if stage == 0:
                x = x_all[rows]
            else:
                x = np.empty((micro, cfg.dim))
                timer("pp", ppg.recv, x, stage - 1, m)
            h = np.maximum(x @ w1, 0)
            y = h @ w2
            timer("tp", tpg.all_reduce, y, algorithm=algorithm)
            y += x
            stash.append((x, h, y))
            if stage < last:
                timer("pp", ppg.send, y, stage + 1, m)
        for m in reversed(range(cfg.microbatches)):  # backward
            x, h, y = stash[m]
            if stage == last:
                err = y - t_all[m * micro:(m + 1) * micro]
                losses[step] += 0.5 * np.sum(err ** 2)
                dy = err / (share * cfg.dim)
            else:
                dy = np.empty((micro, cfg.dim))
                timer("pp", ppg.recv, dy, stage + 1, m)
            dh = (dy @ w2.T) * (h > 0)
            g1 += x.T @ dh
            g2 += h.T @ dy
            if stage > 0:
                dx = dh @ w1.T
                timer("tp", tpg.all_reduce, dx, algorithm=algorithm)
                dx += dy
                timer("pp", ppg.send, dx, stage - 1, m)
        timer("dp", dpg.all_reduce, grads, algorithm=algorithm)
        params -= (cfg.lr / dp.size) * grads
    # Each step's loss over the whole batch: the last stage's sums of
    # squared errors, counted once per dp replica (from its tp rank 0).
    if stage != last or tp.rank != 0:
        losses[...] = 0
    mpicoll.ProcessGroup(mesh.comm).all_reduce(losses)
    losses /= cfg.batch * cfg.dim
    return (w1, w2), losses, timer


def mismatch(mesh: mpicoll.Mesh, cfg: Config, shard, weights) -> float:
    """The largest relative difference between any rank's ``shard`` of
    the final weights and the single-process run's ``weights`` (the
    answer is the same on every rank: one all-reduce)."""
    w1, w2 = weights[mesh["pp"].rank]
    width = cfg.hidden // mesh["tp"].size
    cols = slice(mesh["tp"].rank * width, (mesh["tp"].rank + 1) * width)
    worst = np.array([max(np.max(np.abs(got - want)) / np.max(np.abs(want))
                          for got, want in zip(shard, (w1[:, cols],
                                                       w2[cols, :])))])
    mpicoll.ProcessGroup(mesh.comm).all_reduce(worst, op="max")
    return float(worst[0])


def report(mesh: mpicoll.Mesh, cfg: Config, losses, ref_losses,
           timer: Timer, worst: float) -> str:
    """Rank 0's summary (every rank calls it: it reduces the counts and
    timings over the mesh)."""
    seconds = np.array([timer.seconds[k] for k in KINDS])
    mpicoll.ProcessGroup(mesh.comm).all_reduce(seconds, op="max")
    totals = np.array([[timer.calls[k], timer.bytes[k]] for k in KINDS])
    mpicoll.ProcessGroup(mesh.comm).all_reduce(totals)
    shape = " x ".join(f"{n}={s}" for n, s in zip(mesh.names, mesh.shape))
    lines = [
        f"mesh {shape} on {mesh.comm.size} ranks: MLP of {mesh['pp'].size} "
        f"block(s), dim {cfg.dim}, hidden {cfg.hidden}, batch {cfg.batch} in "
        f"{cfg.microbatches} microbatches per dp replica, {cfg.steps} steps",
        "loss per step: " + " ".join(f"{v:.6f}" for v in losses),
        "single process: " + " ".join(f"{v:.6f}" for v in ref_losses),
        f"final weights vs single-process NumPy: max relative difference "
        f"{worst:.1e} (tolerance {TOLERANCE:g}): "
        f"{'OK' if worst <= TOLERANCE else 'MISMATCH'}",
        "communication (calls and MB of buffers: all ranks' sum; time: the "
        "slowest rank's, pp's including waits for other stages):",
    ]
    calls = {"tp": "all_reduce", "pp": "send/recv", "dp": "all_reduce"}
    for k, (n, nbytes), s in zip(KINDS, totals, seconds):
        lines.append(f"  {k}  {calls[k]:<10}  {n:5d} calls  "
                     f"{nbytes / 1e6:9.3f} MB  {s * 1e3:9.3f} ms")
    return "\n".join(lines)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    d = Config()
    p.add_argument("--shape", default="2,2,2",
                   help="dp,pp,tp (one may be -1: --shape=-1,2,2)")
    for name in ("dim", "hidden", "batch", "microbatches", "steps", "seed"):
        p.add_argument(f"--{name}", type=int, default=getattr(d, name))
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--algorithm", default="auto",
                   help="allreduce algorithm for tp and dp (default auto)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    shape = tuple(int(s) for s in args.shape.split(","))
    cfg = Config(dim=args.dim, hidden=args.hidden, batch=args.batch,
                 microbatches=args.microbatches, steps=args.steps,
                 lr=args.lr, seed=args.seed)
    try:  # the same arguments on every rank: all fail alike, none hangs
        mesh = mpicoll.Mesh(MPI.COMM_WORLD, shape, ("dp", "pp", "tp"))
        shard, losses, timer = train(mesh, cfg, args.algorithm)
    except ValueError as exc:
        if MPI.COMM_WORLD.Get_rank() == 0:
            print(f"mesh3d_mlp: {exc}", file=sys.stderr)
        return 2
    weights, ref_losses = reference(cfg, mesh["pp"].size)
    worst = mismatch(mesh, cfg, shard, weights)
    text = report(mesh, cfg, losses, ref_losses, timer, worst)
    if mesh.comm.rank == 0:
        print(text, flush=True)
    mesh.free()
    return 0 if worst <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
