"""Schedules as traffic: the flows and dependencies a network simulator needs.

A schedule says, per rank and round, which spans go to and come from which
peers and which reductions follow (:mod:`mpicoll.schedule.core`). For the
network only sizes matter, so each round is reduced to a :class:`Sig`:
``(peer, bytes)`` of its sends and receives and the bytes it reduces.
:func:`build` matches every send with its receive (messages between a pair
of ranks match in posting order, as in MPI) into a :class:`Program`: one
flow per message, and for each rank and round the flows it waits for.

Two reductions make large rank counts affordable; both are approximations
the caller asks for and :mod:`mpicoll.netsim.driver` reports:

Repeated rounds (:func:`compress`)
    Where consecutive rounds are identical on every rank (same peers, same
    bytes: a ring's ``p - 1`` reduce-scatter rounds, then its ``p - 1``
    allgather rounds), only the first ``keep`` of each run are simulated;
    the rest are charged at the mean duration of the kept rounds after the
    first (``(n - keep) × Δ``, Δ measured on the network, contention
    included; the mean smooths rounds that alternate in length).

Symmetry (:func:`symmetric_sigs`)
    Building ``p`` schedules of ``2(p-1)`` rounds (a ring at 65,536 ranks)
    does not fit in memory, so only rank 0's schedule and a sample of other
    ranks' are built; if every sampled rank's rounds equal rank 0's with
    peers relabelled (``peer - rank mod p``: rings; ``peer xor rank``:
    recursive doubling and halving on powers of two), every rank's rounds
    are generated from rank 0's. A rank that is not sampled is assumed to
    follow the same symmetry: sampling checks it, it does not prove it.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Callable, NamedTuple

from mpicoll.schedule.core import Reduce, Schedule


class Sig(NamedTuple):
    """One round as the network sees it."""

    sends: tuple[tuple[int, int], ...]  # (peer, bytes)
    recvs: tuple[tuple[int, int], ...]
    reduce_bytes: int


class Run(NamedTuple):
    """Rounds ``[start, start + kept)`` of the simulated program stand for
    ``length`` identical rounds of the real one."""

    start: int
    kept: int
    length: int


class Program(NamedTuple):
    """Flows and per-rank rounds, in plain lists (cheap to write as JSON).

    ``ops[r][k]``: the flows rank ``r``'s round ``k`` waits for;
    ``reduce_bytes[r][k]``: what it reduces once they are done.
    """

    size: int
    src: list[int]
    dst: list[int]
    nbytes: list[int]
    ops: list[list[list[int]]]
    reduce_bytes: list[list[int]]
    runs: tuple[Run, ...]  # the compressed runs (empty: exact)


def sig(schedule: Schedule, itemsize: int) -> tuple[Sig, ...]:
    """The network view of one rank's schedule."""
    return tuple(
        Sig(tuple((s.peer, len(s.span) * itemsize) for s in rnd.sends),
            tuple((r.peer, len(r.span) * itemsize) for r in rnd.recvs),
            sum(len(st.dst) for st in rnd.local if isinstance(st, Reduce))
            * itemsize)
        for rnd in schedule.rounds)


def build(sigs: list[tuple[Sig, ...]], runs: tuple[Run, ...] = ()) -> Program:
    """Match every send with its receive; raises ValueError on a send
    without a receive (or the other way round) or a length mismatch."""
    size = len(sigs)
    posted: dict[tuple[int, int], list] = defaultdict(list)  # sends
    src, dst, nbytes = [], [], []
    ops = [[[] for _ in rounds] for rounds in sigs]
    for rank, rounds in enumerate(sigs):
        for k, rnd in enumerate(rounds):
            for peer, n in rnd.sends:
                _check_peer(peer, size, rank)
                posted[rank, peer].append((len(src), k))
                src.append(rank)
                dst.append(peer)
                nbytes.append(n)
    cursor: dict[tuple[int, int], int] = defaultdict(int)
    for rank, rounds in enumerate(sigs):
        for k, rnd in enumerate(rounds):
            for peer, n in rnd.recvs:
                _check_peer(peer, size, rank)
                i = cursor[peer, rank]
                queue = posted.get((peer, rank), ())
                if i == len(queue):
                    raise ValueError(f"rank {rank} round {k}: receive from "
                                     f"{peer} has no matching send")
                flow, k_src = queue[i]
                cursor[peer, rank] = i + 1
                if nbytes[flow] != n:
                    raise ValueError(
                        f"rank {rank} round {k}: {n} bytes expected from "
                        f"{peer}, which sends {nbytes[flow]}")
                ops[peer][k_src].append(flow)
                ops[rank][k].append(flow)
    for key, queue in posted.items():
        if cursor[key] != len(queue):
            raise ValueError(f"rank {key[0]} sends {len(queue)} messages to "
                             f"{key[1]}, which receives {cursor[key]}")
    return Program(size, src, dst, nbytes, ops,
                   [[rnd.reduce_bytes for rnd in rounds] for rounds in sigs],
                   runs)


def _check_peer(peer: int, size: int, rank: int) -> None:
    if not 0 <= peer < size or peer == rank:
        raise ValueError(f"rank {rank}: peer {peer} is not another rank")


def find_runs(sigs: list[tuple[Sig, ...]]) -> list[tuple[int, int]]:
    """Maximal ``(start, length)`` runs of rounds identical on every rank
    (length >= 2); none unless every rank has the same number of rounds."""
    counts = {len(rounds) for rounds in sigs}
    if len(counts) != 1:
        return []
    (n,) = counts
    runs, start = [], 0
    for k in range(1, n + 1):
        if k == n or any(rounds[k] != rounds[k - 1] for rounds in sigs):
            if k - start >= 2:
                runs.append((start, k - start))
            start = k
    return runs


def compress(sigs: list[tuple[Sig, ...]], keep: int,
             runs: list[tuple[int, int]] | None = None):
    """``(sigs, runs)``: every run of identical rounds longer than ``keep``
    cut to its first ``keep`` rounds, and the :class:`Run` records that say
    what was cut. ``runs`` defaults to :func:`find_runs` ``(sigs)``."""
    if keep < 2:
        raise ValueError("keep at least 2 rounds of a run (Δ is measured "
                         "between the last two)")
    if runs is None:
        runs = find_runs(sigs)
    cut = [(s, n) for s, n in runs if n > keep]
    drop = {k for s, n in cut for k in range(s + keep, s + n)}
    records, removed = [], 0
    for s, n in cut:
        records.append(Run(s - removed, keep, n))
        removed += n - keep
    short = [tuple(r for k, r in enumerate(rounds) if k not in drop)
             for rounds in sigs]
    return short, tuple(records)


_RELABEL: dict[str, tuple[Callable[[int, int, int], int], ...]] = {
    # (to rank 0's frame, back to rank r's) for a peer of rank r among p
    "shift": (lambda peer, r, p: (peer - r) % p,
              lambda rel, r, p: (rel + r) % p),
    "xor": (lambda peer, r, p: peer ^ r, lambda rel, r, p: rel ^ r),
}


def _relabel(rounds: tuple[Sig, ...], f, r: int, p: int) -> tuple[Sig, ...]:
    return tuple(
        Sig(tuple((f(q, r, p), n) for q, n in rnd.sends),
            tuple((f(q, r, p), n) for q, n in rnd.recvs), rnd.reduce_bytes)
        for rnd in rounds)


def symmetric_sigs(rank_sig: Callable[[int], tuple[Sig, ...]], size: int,
                   keep: int | None = None, samples: int = 8, seed: int = 0):
    """``(sigs, runs, symmetry)`` for all ``size`` ranks from rank 0's
    schedule and ``samples`` other sampled ranks' (``rank_sig(r)`` builds
    one). Runs are found on rank 0 (by symmetry they are every rank's) and
    cut to ``keep`` rounds before the other ranks are generated. Raises
    ValueError when no symmetry fits the sample."""
    base = rank_sig(0)
    picks = {1, size - 1, size // 2}
    rng = random.Random(seed)
    picks.update(rng.randrange(size) for _ in range(samples))
    picks = sorted(picks - {0})
    sampled = {r: rank_sig(r) for r in picks}
    for name, (to_zero, _) in _RELABEL.items():
        if name == "xor" and size & (size - 1):
            continue
        if all(_relabel(s, to_zero, r, size) == base
               for r, s in sampled.items()):
            break
    else:
        raise ValueError(
            f"the schedules of {size} ranks are not symmetric under a shift "
            "or xor of ranks (try a count divisible by the rank count, or "
            "the exact simulation)")
    runs: tuple[Run, ...] = ()
    if keep is not None:
        (base,), runs = compress([base], keep)
    back = _RELABEL[name][1]
    return ([_relabel(base, back, r, size) for r in range(size)], runs, name)
