"""Run schedules on a SimGrid network: predicted time of a collective.

:func:`run_collective` builds every rank's schedule (or, with ``symmetric=True``,
rank 0's and a sample: :func:`mpicoll.sim.simgrid.program.network_sigs`), turns
them into flows (:mod:`mpicoll.sim.simgrid.program`) and replays them in SimGrid
on a :class:`~mpicoll.sim.simgrid.networks.Platform`.

One controller actor issues every transfer (``Comm.sendto_async`` between
the two ranks' hosts) and tracks dependencies per rank, so rounds of
different ranks are not aligned: a rank posts round k + 1 when its round k
is done, and a message flows once both its sender and its receiver have
posted the rounds holding it (rendezvous: no eager buffering). When a
rank's messages of a round are done it reduces, γ seconds per byte of
reduction output, then posts its next round; copies are free. With
``send_overhead=o`` each send costs its sender o seconds before it enters
the network (LogP's o; SMPI's ``smpi/ois``): a rank's i-th send of a
round (i = 0, 1, ...) is posted ``(i + 1)·o`` after the round, so the p-1
messages a linear algorithm posts at once leave one after another. With
``recv_overhead=o_r`` each message costs its receiver o_r seconds once it
has arrived, the rank handling its arrivals one at a time (LogP's o at
the receiver; :mod:`mpicoll.sim.simgrid.child`). The defaults 0 post every
message with its round and count it received when it ends.
``quantum=q > 0`` makes the controller look for ended messages only every
q simulated seconds (and at reduction and injection instants) instead of
at each instant a message ends: a stated approximation for rounds of many
flows that end at many instants, where waiting for each instant costs
time linear in the flows in flight. A rank's next round then starts at
most q after its messages end, so without contention the time is never
earlier and at most (rounds on the critical path)·q later (rounds left
out by ``keep`` or ``sample`` count: each is charged a simulated round's
duration); with contention the changed sharing can move it either way
(measured in docs/simulation.md). The default 0 is the exact
event-driven run. With the default ``model_factors=False`` SimGrid's
latency and bandwidth correction factors and cross-traffic are off, so a
message of n bytes over a path of latency L and bottleneck bandwidth B
takes L + n/B alone and shares B max-min fairly with the others: on
``flat`` the result is the α-β(-γ) cost. SimGrid's TCP window bound
stays on: a flow's rate is at most 4 MiB / (2L) (``network/TCP-gamma``),
below B = 12.5 GB/s from L = 168 µs, 336 links of the default 0.5 µs, so
only long paths of a ring are capped (tested).

Why a controller, not one actor per rank or SMPI: SimGrid's Python actors
each need an OS thread (~100 µs per message, and no more than ~32k of them
here); SMPI replays C MPI programs, not Python schedules. One controller
runs on SimGrid's ``raw`` contexts (safe because it is the only Python
actor) at a few µs per flow. SimGrid 3.32 removes each finished transfer
from a list of the issuing actor's activities in time linear in that list,
so a round of p concurrent flows costs O(p²): recursive doubling takes
~2 s at 4,096 ranks, ~34 s at 16,384 and over 150 s at 65,536. SimGrid
4.1 keeps them in a set, which is what runs at 65,536 ranks need
(docs/simulation.md, "What a prediction costs").

SimGrid allows one engine per process, so every simulation runs in a child
process (:mod:`mpicoll.sim.simgrid.child`). The child imports the ``simgrid``
the venv has (3.32, ``scripts/simgrid.sh``) unless ``simgrid=`` or the
environment variable ``MPICOLL_SIMGRID`` names a folder holding another
build's module (4.1: ``scripts/simgrid41.sh --print-dir``), which it puts
first on its path.
"""

from __future__ import annotations

import math
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

import numpy as np

from mpicoll.coll import lookup
from mpicoll.sim.simgrid import child
from mpicoll.sim.simgrid.networks import Platform, parse
from mpicoll.sim.simgrid.program import Program, build, network_sigs, sig

#: SimGrid options that make a flat network exact α-β (the correction
#: factors model TCP; they are on by default in SimGrid).
EXACT = ("--cfg=network/latency-factor:1", "--cfg=network/bandwidth-factor:1",
         "--cfg=network/weight-S:0", "--cfg=network/crosstraffic:0")


class Result(NamedTuple):
    """A simulated collective."""

    time: float  # seconds until the last rank is done
    finish: tuple[float, ...]  # per rank
    flows: int  # messages simulated
    rounds_cut: int  # rounds charged without being simulated (0: exact)
    symmetry: str | None  # find_symmetry's name when from a sample
    wall: float  # seconds the SimGrid run took
    maxrss_mb: float  # the child process's peak memory
    version: str  # the SimGrid that ran it ("3.32.0", "4.1.0")
    quantum: float  # the controller's time quantum, s (0: event-driven)
    phases: int = 1  # phases simulated one after the other (1: whole)


def calibrate_gamma(itemsize: int = 4, n_bytes: int = 1 << 23) -> float:
    """γ on this machine: seconds per output byte of a numpy sum of two
    ``n_bytes`` arrays (float32/float64, else uint8), best of 5 runs."""
    dtype = {4: np.float32, 8: np.float64}.get(itemsize, np.uint8)
    a = np.ones(n_bytes // np.dtype(dtype).itemsize, dtype)
    b, out = a.copy(), np.empty_like(a)
    best = math.inf
    for _ in range(5):
        t0 = time.perf_counter()
        np.add(a, b, out=out)
        best = min(best, time.perf_counter() - t0)
    return best / out.nbytes


def run_collective(collective: str, algorithm: str, size: int, count,
             platform: Platform | str, *, itemsize: int = 4, root: int = 0,
             gamma: float | None = None, keep: int | None = None,
             sample: int | None = None, symmetric: bool = False,
             peers: int | None = None, phases: bool = False,
             model_factors: bool = False,
             send_overhead: float = 0.0, recv_overhead: float = 0.0,
             quantum: float = 0.0, timeout: float | None = None,
             simgrid: str | None = None, **params) -> Result:
    """Simulate ``algorithm`` of ``collective`` on ``size`` ranks.

    ``count`` as in :mod:`mpicoll.schedule.layout`, ``itemsize`` bytes per
    element. ``platform``: a :class:`Platform` or a spec string
    (:func:`mpicoll.sim.simgrid.networks.parse`); its node map reaches
    topology-aware algorithms. ``gamma``: seconds per reduced byte
    (default :func:`calibrate_gamma`). ``keep``: simulate only the first
    ``keep`` rounds of every run of identical rounds and extrapolate
    (:func:`mpicoll.sim.simgrid.program.compress`); None is exact.
    ``sample``: simulate only ``sample`` pairs of consecutive rounds and
    interpolate the others' durations
    (:func:`mpicoll.sim.simgrid.program.sample_rounds`; ValueError where the
    ranks' rounds do not allow it); None is exact.
    ``symmetric``: build rank 0's schedule (or a node's ranks', where
    schedules repeat from node to node) and a sample only
    (:func:`mpicoll.sim.simgrid.program.symmetric_sigs`). ``peers``: keep the
    messages of that many sampled offsets, each carrying its stratum's
    bytes (:func:`mpicoll.sim.simgrid.peer_sample.sample_peers`: the linear
    algorithms; not with ``send_overhead`` or ``recv_overhead``, whose
    left-out messages would not be charged); None is exact. ``phases``:
    where the algorithm is declared as registered collectives run one
    after the other (:meth:`mpicoll.coll.registry.Algorithm.phases_of`: van de Geijn's
    broadcast), simulate each alone with these options (``symmetric``
    only for the unrooted ones: a root breaks every relabelling) and add
    them up (:func:`one_after_another`); the whole schedule otherwise.
    ``send_overhead``: seconds each send costs its sender before it
    enters the network, ``recv_overhead`` seconds each message costs its
    receiver after it arrives (see the module docstring; 0: none).
    ``quantum``: the controller's time quantum in seconds (see the module
    docstring; 0: exact). ``timeout``: seconds for the SimGrid run.
    ``simgrid``: a folder holding the SimGrid module to use (default
    ``$MPICOLL_SIMGRID``, else the venv's). ``params`` go to the schedule
    builder.
    """
    if peers is not None and (send_overhead or recv_overhead):
        raise ValueError("sampled peers leave messages out, whose overheads "
                         "would not be charged: use one or the other")
    if isinstance(platform, str):
        platform = parse(platform)
    alg = lookup(collective, algorithm)
    if alg is None or alg.native:
        raise KeyError(f"no hand-built {collective} algorithm {algorithm!r}")
    parts = alg.phases_of(size, count, root=root, **params) if phases \
        else None
    if parts:
        gamma = calibrate_gamma(itemsize) if gamma is None else gamma
        return one_after_another([run_collective(
            part.collective, part.algorithm, size, part.count, platform,
            itemsize=itemsize, gamma=gamma, keep=keep, sample=sample,
            symmetric=symmetric and not part.rooted,
            peers=peers, model_factors=model_factors,
            send_overhead=send_overhead, recv_overhead=recv_overhead,
            quantum=quantum, timeout=timeout, simgrid=simgrid,
            **part.params) for part in parts])
    nodes = platform.node_map(size)

    def rank_sig(rank):
        return sig(alg.schedule(rank, size, count, root=root, nodes=nodes,
                                cached=False, **params), itemsize)

    sigs, runs, gaps, symmetry = network_sigs(
        rank_sig, size, keep=keep, sample=sample, symmetric=symmetric,
        period=platform.ranks_per_node, peers=peers)
    result = run_program(build(sigs, runs, gaps), platform, gamma=gamma,
                         itemsize=itemsize, model_factors=model_factors,
                         send_overhead=send_overhead,
                         recv_overhead=recv_overhead, quantum=quantum,
                         timeout=timeout, simgrid=simgrid)
    return result._replace(symmetry=symmetry)


def one_after_another(parts: list[Result]) -> Result:
    """Phases simulated alone as one result: each starts when the one
    before has ended on every rank, so a rank finishes at the earlier
    phases' times plus its own in the last. An approximation of the whole
    schedule, in which a rank starts the next phase as soon as it and the
    peers it needs are done (docs/simulation.md measures it). Flows, cut
    rounds and wall times add up; the symmetry names are joined with
    ``+`` (``exact`` for a phase without one)."""
    before = sum(part.time for part in parts[:-1])
    last = parts[-1]
    return last._replace(
        time=before + last.time,
        finish=tuple(before + t for t in last.finish),
        flows=sum(part.flows for part in parts),
        rounds_cut=sum(part.rounds_cut for part in parts),
        symmetry="+".join(part.symmetry or "exact" for part in parts),
        wall=sum(part.wall for part in parts),
        maxrss_mb=max(part.maxrss_mb for part in parts),
        phases=len(parts))


def run_program(program: Program, platform: Platform, *,
                gamma: float | None = None, itemsize: int = 4,
                model_factors: bool = False, send_overhead: float = 0.0,
                recv_overhead: float = 0.0, quantum: float = 0.0,
                timeout: float | None = None,
                simgrid: str | None = None) -> Result:
    """Simulate a :class:`~mpicoll.sim.simgrid.program.Program` in a child
    process; extrapolates its compressed runs (``(n - kept) × Δ`` each,
    Δ the mean duration of the run's kept rounds after the first) and its
    gaps (``m × (d_a + d_b) / 2`` each, ``d_a`` and ``d_b`` the durations
    of the second rounds of the sampled pairs on either side), durations
    taken from the latest rank's round ends. ``send_overhead`` and
    ``recv_overhead``: seconds per message at its sender and at its
    receiver; ``quantum``: the controller's time quantum in seconds; all
    as in :func:`run_collective`."""
    for name, value in (("send_overhead", send_overhead),
                        ("recv_overhead", recv_overhead),
                        ("quantum", quantum)):
        if value < 0 or not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number >= 0, not "
                             f"{value!r}")
    if gamma is None:
        gamma = calibrate_gamma(itemsize)
    job = {"src": program.src, "dst": program.dst, "nbytes": program.nbytes,
           "ops": program.ops,
           "delay": [[gamma * b for b in rank] for rank in program.reduce_bytes],
           "hosts": platform.node_map(program.size), "xml": platform.xml(),
           "cfg": () if model_factors else EXACT,
           "simgrid": simgrid_folder(simgrid)}
    if send_overhead:  # absent: the child's fast path
        job["send_overhead"] = float(send_overhead)
    if recv_overhead:
        job["recv_overhead"] = float(recv_overhead)
    if quantum:  # absent: the event-driven controller
        job["quantum"] = float(quantum)
    with tempfile.TemporaryDirectory(prefix="mpicoll-netsim-") as tmp:
        src, out = os.path.join(tmp, "job.json"), os.path.join(tmp,
                                                               "out.json")
        with open(src, "w") as f:
            json.dump(job, f)
        try:
            proc = subprocess.run([sys.executable, "-I", child.__file__, src,
                                   out], cwd=tmp, capture_output=True,
                                  text=True, timeout=timeout,
                                  preexec_fn=_raise_stack_limit)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"SimGrid ran over {timeout} s") from None
        if proc.returncode or not os.path.exists(out):
            raise RuntimeError(f"SimGrid run failed (exit {proc.returncode}):"
                               f"\n{proc.stderr[-3000:]}")
        with open(out) as f:
            done = json.load(f)
    if "error" in done:
        raise RuntimeError(f"SimGrid run stopped: {done['error']}")
    end = done["round_end"]
    took = [b - a for a, b in zip([0.0, *end], end)]  # per simulated round
    extra = sum((run.length - run.kept) / (run.kept - 1)
                * (end[run.start + run.kept - 1] - end[run.start])
                for run in program.runs)
    extra += sum(gap.rounds * (took[gap.after] + took[gap.after + 2]) / 2
                 for gap in program.gaps)
    finish = tuple(t + extra for t in done["finish"])
    cut = sum(run.length - run.kept for run in program.runs) + sum(
        gap.rounds for gap in program.gaps)
    return Result(max(finish, default=0.0), finish, len(program.src), cut,
                  None, done["wall"], done["maxrss_mb"], done["version"],
                  float(quantum))


def _raise_stack_limit() -> None:
    """In the SimGrid child, before it runs: the stack limit raised to the
    hard limit. SimGrid 4.1's engine ran out of an 8 MiB stack (segfault)
    on the pairwise all-to-all at 65,536 ranks on ``torus:16x64x64`` and
    ran with ``ulimit -s unlimited`` (docs/simulation.md)."""
    hard = resource.getrlimit(resource.RLIMIT_STACK)[1]
    resource.setrlimit(resource.RLIMIT_STACK, (hard, hard))


def simgrid_folder(folder: str | None = None) -> str | None:
    """The absolute folder whose ``simgrid`` module the child imports:
    ``folder``, else ``$MPICOLL_SIMGRID``, else None (the venv's). Raises
    FileNotFoundError when the folder holds no ``simgrid*.so``."""
    folder = folder or os.environ.get("MPICOLL_SIMGRID") or None
    if folder is None:
        return None
    folder = os.path.abspath(folder)
    if not os.path.isdir(folder) or not any(
            name.startswith("simgrid") and name.endswith(".so")
            for name in os.listdir(folder)):
        raise FileNotFoundError(f"no SimGrid module (simgrid*.so) in "
                                f"{folder} (scripts/simgrid41.sh builds one)")
    return folder
