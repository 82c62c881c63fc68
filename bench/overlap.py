"""Overlap of gradient all-reduce with the backward pass, host or GPU.

    mpiexec -n 2 python -m mpi4py bench/overlap.py --algorithm native
    mpiexec -n 2 python -m mpi4py bench/overlap.py --device cuda

A synthetic backward pass: ``--layers`` dense layers of ``--size`` x
``--size`` weights and a batch of ``--batch`` rows; layer ``l`` (last
first) computes its weight gradient ``A_l^T dY`` and passes ``dY W_l^T``
down, two matrix products per layer. The gradients are averaged over the
ranks by a :class:`mpicoll.parallel.bucketing.GradientBucketer` with buckets of
``--bucket-kb``. Four ways of running a step, interleaved step by step
(the VM's speed changes hit all alike), each after a barrier:

- **compute**: the backward pass alone;
- **comm**: the bucketed all-reduce alone (mark every gradient, wait):
  copies into buckets, the all-reduces, copies back;
- **serial**: the backward pass, then the bucketed all-reduce;
- **overlapped**: each gradient marked ready as soon as it is computed
  (a full bucket starts its all-reduce while lower layers compute), then
  one wait at the end.

A step's time is the slowest rank's; each figure is the median over
``--steps`` steps. Overlap efficiency is (T_serial - T_overlapped) /
min(T_compute, T_comm): 1 when all communication hid behind compute, 0
when none did, negative when overlapping cost more than it saved. One
more overlapped step is then checked against one native ``all_reduce``
per layer (the exit status is 1 on a mismatch). ``--plot FILE.png`` draws
rank 0's last serial and overlapped steps: compute spans per layer, and
per bucket the span from its launch to when its completion was seen.

Host progress: a native nonblocking all-reduce (MPICH) and a hand-built
one both advance mostly inside MPI or mpicoll calls, here the ``test()``
that each ``mark_ready`` makes of the buckets in flight, so on the host
much of the communication still happens in the final wait. The numbers
show how much.

On the host timestamps are ``time.perf_counter`` (:class:`HostClock`).

On a GPU (``--device cuda``: CuPy arrays, the rest unchanged) the matrix
products and the bucket copies run on the current stream (the compute
stream) and each bucket's all-reduce on a stream mpicoll lends it, which
waits on the compute stream only up to the bucket's launch
(:mod:`mpicoll.device.rules`). ``--device model`` runs the same on the
host model of CUDA (:mod:`mpicoll.device.hostmodel`; latencies, matrix
products' speed included, from ``MPICOLL_MODEL_LATENCIES``), with its
events for clock. Timestamps are CUDA events recorded on the
compute stream (:class:`CudaClock`): a layer's span is when the GPU ran
its two products, not when the host launched them. A step ends with the
compute stream waiting on every bucket (the bucketer's ``wait``) and the
host waiting on the step's last event, so its time covers all its device
work. A bucket's span runs from where the compute stream had its inputs
ready to where the compute stream, having waited on the all-reduce,
passed that wait. The host launches kernels ahead of the GPU, so it
mostly sees completion only in the final wait, with the whole backward
pass queued: such spans end no earlier than the compute. Without CuPy or
a GPU, ``--device cuda`` is a usage error (exit status 2) on every rank.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import NamedTuple

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.bench.device import to_host, unavailable
from mpicoll.device import hostmodel
from mpicoll.parallel.bucketing import GradientBucketer

MODES = ("compute", "comm", "serial", "overlapped")
_WHERE = {"cuda": ", on the GPU (CUDA events)",
          "model": ", on the host model of CUDA (its events)"}


class UsageError(Exception):
    """Bad arguments (the same on every rank): exit status 2."""


class HostClock:
    """Host timestamps in seconds. The interface :class:`CudaClock` keeps:
    ``stamp()`` now, ``resolve(t)`` a stamp as seconds (after the work it
    marks is done; trivial on the host)."""

    def stamp(self) -> float:
        return time.perf_counter()

    def resolve(self, t: float) -> float:
        return t


class CudaClock:
    """GPU timestamps: CUDA events with timing, on the current stream.

    ``stamp()`` records a new event on the current stream and returns it
    (no synchronisation: it marks when the GPU gets there).
    ``resolve(t)`` blocks the host until the GPU has passed ``t`` and
    returns the seconds since the reference event recorded when the
    clock was made. Events resolve about 0.5 us, and cudaEventElapsedTime
    returns float32 milliseconds: exact to that for the clock's first 4
    s, to about 1e-7 of its age after that.

    ``new_event()`` returns an event with ``record()`` (on the current
    stream) and ``synchronize()``; ``elapsed_ms(start, end)`` measures
    between two completed events. They default to ``cupy.cuda.Event``
    and ``cupy.cuda.get_elapsed_time``; tests pass fakes.
    """

    def __init__(self, new_event=None, elapsed_ms=None) -> None:
        if new_event is None:
            import cupy

            new_event, elapsed_ms = (cupy.cuda.Event,
                                     cupy.cuda.get_elapsed_time)
        self._new_event, self._elapsed_ms = new_event, elapsed_ms
        self._origin = self.stamp()
        self._origin.synchronize()  # elapsed_ms needs both complete

    def stamp(self):
        event = self._new_event()
        event.record()
        return event

    def resolve(self, t) -> float:
        t.synchronize()
        return self._elapsed_ms(self._origin, t) / 1e3


def device(name: str):
    """``(array module, clock)`` for ``--device``; a :class:`UsageError`
    saying what is missing when CuPy or a GPU is."""
    missing = unavailable(name)
    if missing is not None:
        raise UsageError(missing)
    if name == "cpu":
        return np, HostClock()
    if name == "model":
        return hostmodel.from_environment().xp, CudaClock(
            hostmodel.ModelEvent, hostmodel.elapsed_ms)
    import cupy

    return cupy, CudaClock()


class Backward:
    """The synthetic model: weights, stored activations and the output
    gradient of one rank (from the seed and the rank), and one gradient
    array per layer, written in place by :meth:`run`."""

    def __init__(self, xp, clock, args, rank: int) -> None:
        rng = np.random.default_rng([args.seed, rank])
        n, b, dtype = args.size, args.batch, np.dtype(args.dtype)

        def draw(*shape, scale=1.0):
            return xp.asarray((rng.standard_normal(shape) * scale)
                              .astype(dtype))

        self.weights = [draw(n, n, scale=n ** -0.5)
                        for _ in range(args.layers)]
        self.inputs = [draw(b, n) for _ in range(args.layers)]
        self.dy0 = draw(b, n)
        self.dy = [xp.empty((b, n), dtype), xp.empty((b, n), dtype)]
        self.grads = [xp.empty((n, n), dtype) for _ in range(args.layers)]
        self.xp, self.clock = xp, clock
        self.offload = args.offload_ms / 1e3

    def run(self, spans: list | None = None, ready=None) -> None:
        """The backward pass, last layer first; ``ready(l)`` after layer
        ``l``'s gradient is written; ``("layer l", start, end)`` stamps
        appended to ``spans``."""
        dy = self.dy0
        for layer in reversed(range(len(self.weights))):
            start = self.clock.stamp()
            self.xp.matmul(self.inputs[layer].T, dy, out=self.grads[layer])
            out = self.dy[layer % 2]
            self.xp.matmul(dy, self.weights[layer].T, out=out)
            dy = out
            if self.offload:
                time.sleep(self.offload)  # the core is free meanwhile
            if spans is not None:
                spans.append((f"layer {layer}", start, self.clock.stamp()))
            if ready is not None:
                ready(layer)


class Result(NamedTuple):
    """Medians over steps (seconds, the slowest rank's), the check, and
    rank 0's timeline of the last serial and overlapped steps."""

    compute: float
    comm: float
    serial: float
    overlapped: float
    buckets: int
    worst: float
    tolerance: float
    timelines: dict

    @property
    def efficiency(self) -> float:
        return (self.serial - self.overlapped) / min(self.compute, self.comm)


def run(args, world: MPI.Comm) -> Result:
    """Time the four modes and check the result (collective)."""
    xp, clock = device(args.device)
    comm = mpicoll.Comm(world)
    model = Backward(xp, clock, args, comm.rank)
    spans: list = []
    launched: dict[int, float] = {}

    def on_event(what: str, bucket: int) -> None:
        if what == "launch":
            launched[bucket] = clock.stamp()
        else:
            spans.append((f"bucket {bucket}", launched[bucket],
                          clock.stamp()))

    bucketer = GradientBucketer(comm, model.grads, average=True,
                                bucket_bytes=args.bucket_kb * 1024,
                                algorithm=args.algorithm,
                                bucket_views=args.bucket_views,
                                on_event=on_event)
    model.grads = bucketer.arrays  # the bucket views, if asked for

    def mark_all() -> None:
        for layer in reversed(range(args.layers)):
            bucketer.mark_ready(layer)

    steps = {
        "compute": lambda: model.run(spans),
        "comm": lambda: (mark_all(), bucketer.wait()),
        "serial": lambda: (model.run(spans), mark_all(), bucketer.wait()),
        "overlapped": lambda: (model.run(spans, bucketer.mark_ready),
                               bucketer.wait()),
    }
    times = {mode: [] for mode in MODES}
    timelines = {}
    for step in range(args.steps + 1):  # step 0 warms up, untimed
        for mode in MODES:
            world.Barrier()
            spans.clear()
            start = clock.stamp()
            steps[mode]()
            end = clock.stamp()
            # On a GPU, resolving the end waits for the step's device work
            # (all ordered before it on the compute stream), so the next
            # step starts on an idle device.
            origin, finish = clock.resolve(start), clock.resolve(end)
            if step:
                times[mode].append(finish - origin)
                timelines[mode] = [(name, clock.resolve(a) - origin,
                                    clock.resolve(b) - origin)
                                   for name, a, b in spans]
    slowest = np.array([times[mode] for mode in MODES])
    bucketer.group.all_reduce(slowest, op="max")
    medians = [statistics.median(row) for row in slowest]
    worst, tolerance = check(comm, model, bucketer)
    return Result(*medians, buckets=len(bucketer.buckets), worst=worst,
                  tolerance=tolerance,
                  timelines={m: timelines[m] for m in ("serial",
                                                       "overlapped")})


def check(comm, model: Backward, bucketer: GradientBucketer):
    """One overlapped step against one native ``all_reduce`` per layer of
    copies taken as each gradient was made: the largest difference
    relative to the layer's largest value, over layers and ranks, and the
    tolerance (reduction order may differ: a few ulps per rank)."""
    local = {}
    xp = model.xp

    def ready(layer: int) -> None:
        grad = model.grads[layer]
        local[layer] = xp.empty(grad.shape, grad.dtype)
        xp.copyto(local[layer], grad)  # on the current stream, in order
        bucketer.mark_ready(layer)

    model.run(ready=ready)
    bucketer.wait()
    worst, group = np.zeros(1), bucketer.group
    for layer, grad in enumerate(model.grads):
        ref = local[layer]
        group.all_reduce(ref, algorithm="native")
        ref = to_host(ref) / comm.size
        scale = float(np.max(np.abs(ref))) or 1.0
        worst[0] = max(worst[0],
                       float(np.max(np.abs(to_host(grad) - ref))) / scale)
    group.all_reduce(worst, op="max")
    return float(worst[0]), 4 * comm.size * float(np.finfo(grad.dtype).eps)


def report(args, result: Result, nranks: int) -> str:
    """Rank 0's summary."""
    grad = args.size * args.size * np.dtype(args.dtype).itemsize
    ms = {m: getattr(result, m) * 1e3 for m in MODES}
    ok = result.worst <= result.tolerance
    return "\n".join([
        f"overlap: {args.layers} layers of {args.size} x {args.size} "
        f"{args.dtype} ({grad / 2**20:.2f} MiB gradient each), batch "
        f"{args.batch}, {nranks} ranks, {result.buckets} buckets of <= "
        f"{args.bucket_kb} KiB, allreduce algorithm {args.algorithm}, "
        f"{args.offload_ms:g} ms offloaded per layer"
        f"{', bucket views' if args.bucket_views else ''}"
        f"{_WHERE.get(args.device, '')}"
        f"; median of "
        f"{args.steps} steps, the slowest rank's",
        f"  compute (backward alone)          {ms['compute']:10.3f} ms",
        f"  comm (bucketed all-reduce alone)  {ms['comm']:10.3f} ms",
        f"  serial step (compute, then comm)  {ms['serial']:10.3f} ms",
        f"  overlapped step                   {ms['overlapped']:10.3f} ms",
        f"  overlap efficiency (T_serial - T_overlapped) / "
        f"min(T_compute, T_comm): {result.efficiency:.2f}",
        f"reduced gradients vs one native all_reduce per layer: max "
        f"relative difference {result.worst:.1e} (tolerance "
        f"{result.tolerance:.1e}): {'OK' if ok else 'MISMATCH'}",
    ])


def plot(result: Result, path: str, title: str) -> None:
    """Rank 0's serial and overlapped steps, one panel each: a row for
    compute (a span per layer) and a row per bucket (launch to seen
    done)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = ["compute"] + [f"bucket {b}" for b in range(result.buckets)]
    fig, axes = plt.subplots(2, 1, sharex=True,
                             figsize=(9, 1.2 + 0.9 * len(rows)))
    for ax, mode in zip(axes, ("serial", "overlapped")):
        for name, start, end in result.timelines[mode]:
            row = 0 if name.startswith("layer") else rows.index(name)
            ax.broken_barh([(start * 1e3, (end - start) * 1e3)],
                           (row - 0.4, 0.8),
                           color="tab:blue" if row == 0 else "tab:orange",
                           edgecolor="white")
            if row == 0:
                ax.text((start + end) / 2 * 1e3, row, name.split()[1],
                        ha="center", va="center", fontsize=7, color="white")
        ax.set_yticks(range(len(rows)), rows)
        ax.invert_yaxis()
        ax.set_title(f"{mode} step: {getattr(result, mode) * 1e3:.2f} ms "
                     f"(median, slowest rank)", fontsize=9)
    axes[-1].set_xlabel("ms since the step began (rank 0)")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--size", type=int, default=1024,
                   help="weights are size x size (default 1024)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--dtype", default="float32",
                   choices=("float32", "float64"))
    p.add_argument("--steps", type=int, default=9)
    p.add_argument("--bucket-kb", type=int, default=8192,
                   help="bucket size in KiB (default 8192)")
    p.add_argument("--algorithm", default="auto",
                   help="allreduce algorithm (default auto)")
    p.add_argument("--device", default="cpu",
                   choices=("cpu", "cuda", "model"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--offload-ms", type=float, default=0.0,
                   help="per layer, also wait this long with the core free "
                        "(standing in for work on a GPU or I/O, which a "
                        "progress thread can hide communication behind)")
    p.add_argument("--bucket-views", action="store_true",
                   help="compute gradients straight into the buckets "
                        "(no copies in and out; DDP's "
                        "gradient_as_bucket_view)")
    p.add_argument("--plot", metavar="FILE.png",
                   help="timeline of rank 0's last serial and overlapped "
                        "steps (needs matplotlib)")
    args = p.parse_args(argv)
    for name in ("layers", "size", "batch", "steps", "bucket_kb"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.offload_ms < 0:
        p.error("--offload-ms must be >= 0")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    world = MPI.COMM_WORLD
    try:  # the same arguments on every rank: all fail alike, none hangs
        result = run(args, world)
    except (UsageError, ValueError) as exc:
        if world.Get_rank() == 0:
            print(f"overlap: {exc}", file=sys.stderr)
        return 2
    if world.Get_rank() == 0:
        print(report(args, result, world.Get_size()), flush=True)
        if args.plot:
            plot(result, args.plot, f"{args.layers} layers, "
                 f"{result.buckets} buckets, {world.Get_size()} ranks, "
                 f"algorithm {args.algorithm}")
    return 0 if result.worst <= result.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
