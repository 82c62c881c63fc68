"""mpicoll against the other ways to do a collective from Python, interleaved.

    mpiexec -n 2 python -m mpi4py bench/peers.py                 # 8 B .. 16 MiB
    mpiexec -n 2 python -m mpi4py bench/peers.py -c allreduce -e 64M \\
        --json peers.json --plot peers.png

Contenders, per collective (allreduce, allgather, bcast) and size:

- ``mpicoll auto``: what mpicoll's selection picks (named in the table);
- ``mpicoll best``: the fastest right hand-built algorithm of this run
  (every registered one is timed; the winner is named);
- ``mpicoll nonblocking``: ``auto``'s choice as the ``I*`` call (its
  ``Work`` waited on at once);
- ``mpicoll persistent``: ``auto``'s choice prepared once
  (``Allreduce_init``...), then ``Start`` and ``Wait`` per call;
- ``mpi4py``: the MPI library's call made directly through mpi4py's
  buffer methods (``Allreduce``...), no mpicoll in the way;
- ``mpi4py persistent``: the MPI library's persistent call through
  mpi4py (``Allreduce_init`` once, ``Start`` and ``Wait`` per call);
- ``mpi4py pickle``: mpi4py's lowercase methods (``allreduce``...), which
  pickle the array and reduce Python objects;
- ``torch gloo``: ``torch.distributed`` with the gloo backend on tensors
  sharing the NumPy buffers (only when torch is installed:
  ``pip install torch==2.13.0`` is the CPU build).

Timing is :mod:`mpicoll.bench.harness`'s (barrier, then batches of
back-to-back calls, visits interleaved across contenders); every
contender's output is checked exactly once after timing. float32 SUM,
root 0. Rank 0 prints a table of the median µs per call (``p50``: all
ranks' calls pooled, robust to the odd descheduled call that moves a
mean on a busy machine) with the ratio to ``mpi4py``, and which
algorithm ``auto`` and ``best`` ran at each size. ``--json`` writes the
benchmark's schema (``algorithm`` is the contender), ``--plot`` busbw by
size.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys

import numpy as np

CONTENDERS = ("mpicoll auto", "mpicoll best", "mpicoll nonblocking",
              "mpicoll persistent", "mpi4py", "mpi4py persistent",
              "mpi4py pickle", "torch gloo")
COLLECTIVES = ("allreduce", "allgather", "bcast")
STAT = "p50"  # the statistic compared


def arguments(argv=None) -> argparse.Namespace:
    from mpicoll.cli.sizes import parse_size

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-c", "--collective", default=",".join(COLLECTIVES),
                   help="comma list of " + ", ".join(COLLECTIVES))
    p.add_argument("-b", "--minbytes", type=parse_size, default=8)
    p.add_argument("-e", "--maxbytes", type=parse_size, default=16 << 20)
    p.add_argument("-f", "--stepfactor", type=float, default=4.0)
    p.add_argument("-n", "--iters", type=int, default=200,
                   help="timed calls per contender and size (at most)")
    p.add_argument("-w", "--warmup", type=int, default=5)
    p.add_argument("--rounds", type=int, default=8,
                   help="interleaved visits per contender and size")
    p.add_argument("--time-budget", type=float, default=240.0,
                   metavar="SECONDS", help="for all timed calls together")
    p.add_argument("--thread-level", choices=("single", "multiple"),
                   default="multiple", help="mpi4py.rc.thread_level")
    p.add_argument("--no-torch", action="store_true",
                   help="leave torch gloo out even if torch is installed")
    p.add_argument("--rewrite", action="store_true",
                   help="write the input before every timed call (as an "
                        "application does; the write is timed too)")
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--plot", metavar="FILE.png")
    args = p.parse_args(argv)
    args.collectives = [c.strip() for c in args.collective.split(",")]
    bad = [c for c in args.collectives if c not in COLLECTIVES]
    if bad:
        p.error(f"unknown collective(s): {', '.join(bad)}")
    return args


# -- contenders: each makes (call, output) from one rank's fresh buffers --

def mpicoll_caller(comm, algorithm, persistent=False, nonblocking=False):
    from mpicoll.bench.harness import caller

    def make(case, bufs):
        return (caller(comm, case, bufs, algorithm, persistent=persistent,
                       nonblocking=nonblocking), lambda: bufs.out)
    return make


def mpi4py_persistent(world):
    """MPI-4's persistent call through mpi4py: ``X_init`` once, then
    ``Start`` and ``Wait``."""
    from mpicoll.bench.harness import arguments

    def make(case, bufs):
        request = getattr(world, case.spec.method + "_init")(
            *arguments(case, bufs))

        def call():
            request.Start()
            request.Wait()
        call.free = request.Free
        return call, lambda: bufs.out
    return make


def mpi4py_buffer(world):
    from mpicoll.bench.harness import arguments

    def make(case, bufs):
        fn, args = getattr(world, case.spec.method), arguments(case, bufs)
        return (lambda: fn(*args)), lambda: bufs.out
    return make


def mpi4py_pickle(world):
    from mpi4py import MPI

    def make(case, bufs):
        result = []
        send, root = bufs.send, case.root
        mine = bufs.recv if world.Get_rank() == root else None
        call = {"allreduce": lambda: world.allreduce(send, op=MPI.SUM),
                "allgather": lambda: np.concatenate(world.allgather(send)),
                "bcast": lambda: world.bcast(mine, root)}[case.spec.name]

        def run():
            result[:] = [call()]
        return run, lambda: result[0]
    return make


def torch_gloo(world):
    """The gloo contender, or None without torch (process group set up
    once, collectively, on first use)."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        return None
    if not dist.is_initialized():
        port = None
        if world.Get_rank() == 0:
            with socket.socket() as s:
                s.bind(("", 0))
                port = s.getsockname()[1]
        host, port = world.bcast((socket.gethostname(), port))
        dist.init_process_group("gloo", init_method=f"tcp://{host}:{port}",
                                rank=world.Get_rank(),
                                world_size=world.Get_size())

    def make(case, bufs):
        name, root = case.spec.name, case.root
        send, recv = torch.from_numpy(bufs.send), torch.from_numpy(bufs.recv)
        if name == "allreduce":
            recv.copy_(send)  # gloo reduces in place
        # all_gather_single replaces all_gather_into_tensor in torch 2.13
        gather = getattr(dist, "all_gather_single",
                         dist.all_gather_into_tensor)

        def call():
            if name == "allreduce":
                dist.all_reduce(recv)
            elif name == "allgather":
                gather(recv, send)
            else:
                dist.broadcast(recv, src=root)
        return call, lambda: bufs.out
    return make


# -- one size, every contender --

def measure_size(comm, case, makers: dict, hand_built: list[str], *,
                 iters, warmup, rounds, budget) -> list[dict]:
    """Records for the contenders at ``case``: timed interleaved, then each
    checked on fresh buffers (hand-built algorithms folded into the one
    ``mpicoll best`` row)."""
    from mpi4py import MPI

    from mpicoll.bench import harness

    world = MPI.Intracomm(comm)
    bufs = harness.make_buffers(case, comm.rank, comm.size)
    made = {name: make(case, bufs)[0] for name, make in makers.items()}
    calls = harness.rewriting(case, bufs, made, comm.rank)
    probe = harness.warm_up(world, calls, warmup)
    iters = harness.fit_iterations(world, probe, iters, budget)
    times = harness.timed_rounds(world, calls, iters, rounds)
    _free(made.values())
    rows = {}
    for name, make in makers.items():
        fresh = harness.make_buffers(case, comm.rank, comm.size)
        call, output = make(case, fresh)
        call()
        _free([call])
        want = case.spec.expected(comm.rank, comm.size, case.count,
                                  case.root, case.dtype, case.op)
        wrong = world.allreduce(harness.mismatches(output(), want))
        rows[name] = harness.record(
            comm, case, "auto" if name == "mpicoll auto" else name,
            harness.summarize(world, times[name]), iters, wrong)
        rows[name]["algorithm"] = name
    return _fold_hand_built(rows, hand_built)


def _free(calls) -> None:
    """Free the persistent requests behind ``calls``."""
    for call in calls:
        if hasattr(call, "free"):
            call.free()


def _fold_hand_built(rows: dict, hand_built: list[str]) -> list[dict]:
    """The rows, hand-built ones replaced by the fastest right one."""
    right = [rows[a] for a in hand_built if not rows[a]["wrong"]]
    best = min(right or [rows[a] for a in hand_built],
               key=lambda r: r["time_us"][STAT])
    best = {**best, "algorithm": "mpicoll best",
            "chosen": best["algorithm"]}
    best["wrong"] = sum(rows[a]["wrong"] for a in hand_built)
    return [best if name == "mpicoll best" else rows[name]
            for name in CONTENDERS if name in rows or name == "mpicoll best"]


# -- output --

def print_table(name: str, rows: list[dict], nranks: int, level: str) -> None:
    names = list(dict.fromkeys(r["algorithm"] for r in rows))
    rewritten = ", input rewritten per call" if rows[0]["rewritten"] else ""
    print(f"\n# {name} float32 sum, {nranks} ranks, thread level {level}"
          f"{rewritten}; median µs per call (time / mpi4py)")
    print(f"{'bytes':>10} " + " ".join(f"{n:>22}" for n in names))
    for nbytes in dict.fromkeys(r["nbytes"] for r in rows):
        at = {r["algorithm"]: r for r in rows if r["nbytes"] == nbytes}
        base = at["mpi4py"]["time_us"][STAT]
        cells = []
        for n in names:
            t = at[n]["time_us"][STAT]
            bad = " WRONG" if at[n]["wrong"] else ""
            cells.append(f"{t:>13.1f} ({t / base:5.2f}){bad}")
        print(f"{nbytes:>10} " + " ".join(f"{c:>22}" for c in cells))
    for who in ("mpicoll auto", "mpicoll best"):
        print(f"# {who}: {spans([r for r in rows if r['algorithm'] == who])}",
              flush=True)


def spans(rows: list[dict]) -> str:
    """The algorithms ``rows`` chose, as runs of consecutive sizes:
    ``native 8-8192 B, recursive_doubling 32768-524288 B``."""
    runs: list[list] = []
    for r in sorted(rows, key=lambda r: r["nbytes"]):
        if runs and runs[-1][0] == r["chosen"]:
            runs[-1][2] = r["nbytes"]
        else:
            runs.append([r["chosen"], r["nbytes"], r["nbytes"]])
    return ", ".join(f"{name} {lo}-{hi} B" if lo != hi else f"{name} {lo} B"
                     for name, lo, hi in runs)


def main(argv=None) -> int:
    import mpi4py

    # The level must be set before anything imports mpicoll (which
    # initializes MPI): read it first, alone.
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--thread-level", default="multiple")
    mpi4py.rc.thread_level = early.parse_known_args(argv)[0].thread_level
    args = arguments(argv)
    from mpi4py import MPI

    import mpicoll
    from mpicoll.cli import plot as plotting
    from mpicoll.bench.cli import header
    from mpicoll.cli.sizes import sizes
    from mpicoll.bench.harness import Case
    from mpicoll.bench.specs import SPECS

    comm = mpicoll.Comm(MPI.COMM_WORLD)
    world = MPI.Intracomm(comm)
    gloo = None if args.no_torch else torch_gloo(world)
    level = {MPI.THREAD_SINGLE: "single",
             MPI.THREAD_MULTIPLE: "multiple"}.get(MPI.Query_thread(), "other")
    if level != args.thread_level:
        sys.exit(f"peers.py: MPI runs at thread level {level}, not "
                 f"{args.thread_level}: it was initialized before this "
                 f"script could choose (run it without -m mpi4py)")
    all_cases = [(name, n) for name in args.collectives
                 for n in dict.fromkeys(
                     SPECS[name].count_for(s, comm.size, 4) for s in
                     sizes(args.minbytes, args.maxbytes, args.stepfactor))]
    budget = args.time_budget / max(len(all_cases), 1)
    records = []
    for name in args.collectives:
        hand_built = [a for a in mpicoll.algorithms(name) if a != "native"]
        makers = {"mpicoll auto": mpicoll_caller(comm, "auto"),
                  **{a: mpicoll_caller(comm, a) for a in hand_built},
                  "mpicoll nonblocking": mpicoll_caller(
                      comm, "auto", nonblocking=True),
                  "mpicoll persistent": mpicoll_caller(comm, "auto", True),
                  "mpi4py": mpi4py_buffer(world),
                  "mpi4py persistent": mpi4py_persistent(world),
                  "mpi4py pickle": mpi4py_pickle(world)}
        if gloo is not None:
            makers["torch gloo"] = gloo
        rows = []
        for _, count in (c for c in all_cases if c[0] == name):
            case = Case(SPECS[name], count, "float32", "sum", 0, False,
                        rewrite=args.rewrite)
            rows += measure_size(comm, case, makers, hand_built,
                                 iters=args.iters, warmup=args.warmup,
                                 rounds=args.rounds, budget=budget)
        records += rows
        if comm.rank == 0:
            print_table(name, rows, comm.size, level)
    if args.json:  # the header gathers host names: every rank takes part
        head = {**header(comm, []),
                "command": " ".join([sys.executable, *sys.argv])}
        if comm.rank == 0:
            with open(args.json, "w") as f:
                json.dump({"header": head, "records": records}, f, indent=1)
    if comm.rank == 0 and args.plot:
        plotting.plot_busbw(records, args.plot)
    world.Barrier()
    if gloo is not None:
        import torch.distributed as dist

        dist.destroy_process_group()
    return 1 if any(r["wrong"] for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
