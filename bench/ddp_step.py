"""DDP's training step and the allreduce of its gradient buckets: the
``mpicoll`` torch.distributed backend against gloo, and gloo with
mpicoll's DDP hook, on an MLP of about 25 M float32 parameters.

    mpiexec -n 2 python bench/ddp_step.py [--threads 1] [--batch 32]
                                          [--rounds 5] [--steps 4] [--sync]

gloo is the default group (on 127.0.0.1); the mpicoll backend's group is
``dist.new_group(backend="mpicoll")`` on the same ranks, so that every
contender runs in one job, in turn: ``--rounds`` rounds, each running
``--steps`` timed steps (after one untimed) of each contender. Contenders:

- ``mpicoll backend``: DDP on the mpicoll group, no hook (its allreduces
  run on the group's thread, overlapping the backward pass);
- ``gloo``: DDP on gloo, no hook (its allreduces overlap the backward
  pass on gloo's own thread, so its communication is not timed);
- ``gloo, blocking hook``: gloo's ``all_reduce`` of each bucket, waited
  for inside the hook (no overlap);
- ``gloo + mpicoll hook``: DDP on gloo with ``mpicoll.torch.allreduce_hook``
  (overlapping, as the backend's);
- ``mpicoll all_reduce`` and ``gloo all_reduce``: the same buckets (their
  sizes as DDP made them) all-reduced alone, blocking, by
  ``mpicoll.ProcessGroup.all_reduce`` and by ``dist.all_reduce``.

Prints, per contender, the median over rounds of a step's time and of the
communication time in it (the time in ``mpicoll.ProcessGroup.all_reduce``
calls, on the group's thread for the backend and the mpicoll hook, where
it overlaps the step's computation; the blocking hook's own time; with
the wait for the other ranks to reach the call, unless ``--sync``), the
slowest rank's, and the bus bandwidth of the buckets' bytes in that
communication time (an allreduce's bus factor 2(p-1)/p).
"""

import argparse
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
from mpi4py import MPI
from torch.nn.parallel import DistributedDataParallel

import mpicoll
import mpicoll.torch

WORLD = MPI.COMM_WORLD
WIDTHS = (1024, 4096, 4096, 1024)  # 25.2 M parameters


class Clock:
    """Seconds spent in the timed calls since the last :meth:`take`, and
    the buckets' sizes (elements, dtype) of the last step. With ``sync``,
    an ``MPI_Barrier`` before each timed call keeps the wait for the other
    ranks out of the time."""

    def __init__(self, sync: bool = False) -> None:
        self.spent, self.buckets, self.sync = 0.0, [], sync

    def time(self, fn, tensor):
        if self.sync:
            WORLD.Barrier()
        start = time.perf_counter()
        result = fn()
        self.spent += time.perf_counter() - start
        self.buckets.append((tensor.numel(), tensor.dtype))
        return result

    def take(self) -> float:
        spent, self.spent = self.spent, 0.0
        return spent


class TimedGroup:
    """A :class:`mpicoll.ProcessGroup` whose ``all_reduce`` calls are
    timed by ``clock`` (the mpicoll backend's and hook's calls go through
    it)."""

    def __init__(self, pg, clock: Clock) -> None:
        self._pg, self._clock = pg, clock

    def all_reduce(self, tensor, *args, **kwargs):
        return self._clock.time(
            lambda: self._pg.all_reduce(tensor, *args, **kwargs), tensor)

    def __getattr__(self, name):
        return getattr(self._pg, name)


def timed_hook(hook):
    """``hook`` timed by the ``clock`` DDP passes as its state."""

    def timed(clock: Clock, bucket) -> torch.futures.Future[torch.Tensor]:
        return clock.time(lambda: hook(None, bucket), bucket.buffer())

    return timed


def gloo_blocking_hook(state, bucket) -> torch.futures.Future[torch.Tensor]:
    """torch's allreduce hook, waited for inside the hook."""
    buffer = bucket.buffer().div_(WORLD.size)
    dist.all_reduce(buffer)
    future = torch.futures.Future()
    future.set_result(buffer)
    return future


def model() -> torch.nn.Sequential:
    torch.manual_seed(0)
    layers = []
    for a, b in zip(WIDTHS, WIDTHS[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


class Contender:
    """One DDP model and the way its communication is timed."""

    def __init__(self, name, group=None, hook=None, clock=None,
                 state=None) -> None:
        self.name, self.clock = name, clock
        self.ddp = DistributedDataParallel(model(), process_group=group)
        if hook is not None:  # its state: ``state``, else the clock
            self.ddp.register_comm_hook(state or clock, hook)
        self.optimizer = torch.optim.SGD(self.ddp.parameters(), lr=1e-3)
        self.steps, self.comms = [], []

    def step(self, x, y) -> None:
        self.optimizer.zero_grad()
        torch.nn.functional.mse_loss(self.ddp(x), y).backward()
        self.optimizer.step()

    def run(self, steps: int, x, y) -> None:
        self.step(x, y)  # untimed: lets the first bucket rebuild settle
        if self.clock is not None:
            self.clock.take()
        start = time.perf_counter()
        for _ in range(steps):
            if self.clock is not None:
                self.clock.buckets.clear()  # keeps the last step's
            self.step(x, y)
        self.steps.append((time.perf_counter() - start) / steps)
        if self.clock is not None:
            self.comms.append(self.clock.take() / steps)


def time_buckets(all_reduce, buckets, steps: int) -> float:
    """Seconds to all-reduce ``buckets`` once, blocking (mean of
    ``steps`` times, after one untimed)."""
    tensors = [torch.ones(n, dtype=dtype) for n, dtype in buckets]
    for t in tensors:
        all_reduce(t)
    start = time.perf_counter()
    for _ in range(steps):
        for t in tensors:
            all_reduce(t)
    return (time.perf_counter() - start) / steps


def slowest(values) -> float:
    """The median over rounds of the slowest rank's value."""
    return statistics.median(WORLD.allreduce(v, op=MPI.MAX) for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1,
                        help="torch.set_num_threads on every rank")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--sync", action="store_true",
                        help="an MPI barrier before each timed allreduce "
                             "or hook: times the transfer alone, without "
                             "the wait for the other ranks")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load = os.getloadavg()[0]  # other work on the machine, before this
    port = None
    if WORLD.rank == 0:  # a free port of rank 0's, told the others
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{WORLD.bcast(port)}",
        rank=WORLD.rank, world_size=WORLD.size)
    ours = dist.new_group(backend="mpicoll")
    backend_clock, hook_clock, gloo_clock = (Clock(args.sync)
                                             for _ in range(3))
    ours.pg = TimedGroup(ours.pg, backend_clock)
    contenders = [
        Contender("mpicoll backend", ours, clock=backend_clock),
        Contender("gloo"),
        Contender("gloo, blocking hook", hook=timed_hook(gloo_blocking_hook),
                  clock=gloo_clock),
        Contender("gloo + mpicoll hook", hook=mpicoll.torch.allreduce_hook,
                  state=TimedGroup(mpicoll.ProcessGroup(WORLD), hook_clock),
                  clock=hook_clock),
    ]
    g = torch.Generator().manual_seed(WORLD.rank)
    x = torch.randn(args.batch, WIDTHS[0], generator=g)
    y = torch.randn(args.batch, WIDTHS[-1], generator=g)
    pg = mpicoll.ProcessGroup(WORLD)
    alone = {"mpicoll all_reduce": [], "gloo all_reduce": []}
    for _ in range(args.rounds):
        for c in contenders:
            c.run(args.steps, x, y)
        buckets = backend_clock.buckets
        alone["mpicoll all_reduce"].append(
            time_buckets(pg.all_reduce, buckets, args.steps))
        alone["gloo all_reduce"].append(
            time_buckets(dist.all_reduce, buckets, args.steps))
    buckets = backend_clock.buckets
    nbytes = sum(n * dtype.itemsize for n, dtype in buckets)
    factor = 2 * (WORLD.size - 1) / WORLD.size
    rows = [(c.name, slowest(c.steps), slowest(c.comms) if c.comms else None)
            for c in contenders]
    rows += [(name, None, slowest(v)) for name, v in alone.items()]
    if WORLD.rank == 0:
        params = sum(p.numel() for p in contenders[0].ddp.parameters())
        print(f"# {WORLD.size} ranks, {params / 1e6:.1f} M float32 "
              f"parameters in {len(buckets)} DDP buckets "
              f"({nbytes / 2**20:.1f} MiB: "
              f"{', '.join(f'{n * d.itemsize / 2**20:.1f}' for n, d in buckets)}"
              f"), batch {args.batch}, torch.set_num_threads("
              f"{args.threads}); median of {args.rounds} rounds of "
              f"{args.steps} steps, the slowest rank's; 1-minute load "
              f"average before the run {load:.2f}"
              f"{'; a barrier before each timed call' if args.sync else ''}")
        print(f"# {'contender':<22} {'step ms':>8} {'comm ms':>8} "
              f"{'busbw GB/s':>10}")
        for name, step, comm in rows:
            busbw = None if comm is None else nbytes * factor / comm / 1e9
            print(f"{name:<24} {_column(step, 1e3, 1):>8} "
                  f"{_column(comm, 1e3, 1):>8} {_column(busbw, 1, 2):>10}")
    dist.destroy_process_group()


def _column(value, scale: float, digits: int) -> str:
    return "-" if value is None else f"{value * scale:.{digits}f}"


if __name__ == "__main__":
    main()
