"""DDP training of a small MLP on synthetic data, on the ``mpicoll``
torch.distributed backend or on gloo (with or without mpicoll's DDP hook).

    mpiexec -n 2 python examples/ddp.py --backend mpicoll --steps 20
    mpiexec -n 4 python examples/ddp.py --backend gloo --hook allreduce

Everything is float64 on powers of two: weights drawn from -2..2 times a
power of two, inputs and targets from -2..2, a loss whose gradient is a
multiple of the world size (so DDP's averaging divides exactly) and a
learning rate of 1/4096, so that in the first steps every sum is exact and
the backends' results must agree bit for bit (later, at 3 ranks or more,
sums may round, and differently in a different order). The
last line, printed by rank 0, is a checksum of the parameters and the mean
step time (``tests/mpi/test_torch_backend_mpi.py`` trains with :func:`train`
and compares the parameters across backends and hooks).
"""

from __future__ import annotations

import argparse
import datetime
import math
import socket
import time

import torch
import torch.distributed as dist
from mpi4py import MPI
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel

import mpicoll.torch

WORLD = MPI.COMM_WORLD
LR = 2.0 ** -12
HOOKS = {"none": None, "allreduce": mpicoll.torch.allreduce_hook,
         "fp16": mpicoll.torch.fp16_compress_hook,
         "torch-fp16": default_hooks.fp16_compress_hook}


def model(width: int = 16, depth: int = 2, features: int = 6,
          seed: int = 0) -> torch.nn.Sequential:
    """An MLP of ``depth`` hidden layers of ``width``, weights and biases
    drawn from -2..2 and scaled by a power of two near 1/sqrt(fan-in), so
    still exact (the same on every rank: DDP checks that)."""
    g = torch.Generator().manual_seed(seed)
    sizes = [features] + [width] * depth + [4]
    layers = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        linear = torch.nn.Linear(a, b, dtype=torch.float64)
        with torch.no_grad():
            for p in linear.parameters():
                p.copy_(torch.randint(-2, 3, p.shape, generator=g)
                        * 2.0 ** -round(math.log2(a) / 2))
        layers += [linear] if i == len(sizes) - 2 else [linear,
                                                        torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def train(ddp, steps: int, batch: int = 8, rank: int = WORLD.rank,
          size: int = WORLD.size) -> list:
    """``steps`` of SGD on ``ddp`` (a DDP-wrapped :func:`model`), each rank
    on its own batches; returns copies of the parameters."""
    net = ddp.module
    features = net[0].in_features
    outputs = net[-1].out_features
    g = torch.Generator().manual_seed(1000 + rank)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=LR)
    for _ in range(steps):
        x = torch.randint(-2, 3, (batch, features), generator=g).double()
        y = torch.randint(-2, 3, (batch, outputs), generator=g).double()
        optimizer.zero_grad()
        # d(loss)/d(out) = size * (out - y): DDP's division by size is exact
        loss = (ddp(x) - y).square().sum() * (size / 2)
        loss.backward()
        optimizer.step()
    return [p.detach().clone() for p in net.parameters()]


def init(backend: str, timeout: float = 60.0) -> None:
    """The default group: ``mpicoll`` from MPI alone, or gloo on 127.0.0.1
    (rank 0 picks a free port and tells the others over MPI)."""
    span = datetime.timedelta(seconds=timeout)
    if backend == "mpicoll":
        dist.init_process_group("mpicoll", init_method="mpicoll://",
                                timeout=span)
        return
    port = None
    if WORLD.rank == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{WORLD.bcast(port)}",
        rank=WORLD.rank, world_size=WORLD.size, timeout=span)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("mpicoll", "gloo"),
                        default="mpicoll")
    parser.add_argument("--hook", choices=tuple(HOOKS), default="none",
                        help="DDP communication hook (allreduce, fp16: "
                             "mpicoll's; torch-fp16: torch's own)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args(argv)
    init(args.backend)
    ddp = DistributedDataParallel(model(args.width))
    if HOOKS[args.hook] is not None:
        ddp.register_comm_hook(None, HOOKS[args.hook])
    dist.barrier()
    start = time.perf_counter()
    params = train(ddp, args.steps, args.batch)
    elapsed = (time.perf_counter() - start) / max(args.steps, 1)
    checksum = sum(float(p.abs().sum()) for p in params)
    if WORLD.rank == 0:
        print(f"{args.backend} hook={args.hook} ranks={WORLD.size} "
              f"steps={args.steps}: |params| = {checksum!r}, "
              f"{elapsed * 1e3:.2f} ms/step")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
