"""Schedules as traffic: the flows and dependencies a network simulator needs.

A schedule says, per rank and round, which spans go to and come from which
peers and which reductions follow (:mod:`mpicoll.schedule.core`). For the
network only sizes matter, so each round is reduced to a :class:`Sig`:
``(peer, bytes)`` of its sends and receives and the bytes it reduces.
:func:`build` matches every send with its receive (messages between a pair
of ranks match in posting order, as in MPI) into a :class:`Program`: one
flow per message, and for each rank and round the flows it waits for.

Three reductions make large rank counts affordable; all are approximations
the caller asks for and :mod:`mpicoll.sim.simgrid.driver` reports (a fourth,
for the linear algorithms' single round of ``p - 1`` messages per rank,
is :mod:`mpicoll.sim.simgrid.peer_sample`):

Repeated rounds (:func:`compress`)
    Where consecutive rounds are identical on every rank (same peers, same
    bytes: a ring's ``p - 1`` reduce-scatter rounds, then its ``p - 1``
    allgather rounds), only the first ``keep`` of each run are simulated;
    the rest are charged at the mean duration of the kept rounds after the
    first (``(n - keep) × Δ``, Δ measured on the network, contention
    included; the mean smooths rounds that alternate in length).

Sampled rounds (:func:`sample_rounds`)
    Where every round differs (the pairwise all-to-all and reduce-scatter:
    round k talks to the rank k away), only ``n`` pairs of consecutive
    rounds are simulated, one after another: the first two, the last two
    and one pair drawn at random in each of ``n - 2`` equal strata between.
    The rounds between two pairs are charged the durations of the pairs'
    second rounds, linearly interpolated by round index (the trapezoid
    rule: ``m × (d_a + d_b) / 2`` for ``m`` rounds). Durations come from
    the latest rank's round ends; a pair's first round absorbs the change
    of pattern (ranks drift apart by round, and adjacent rounds load the
    network alike, so a round's duration depends on the round before: a
    single sampled round after an unrelated one ran up to 20% fast on a
    hypercube). Exact where every round takes as long (a flat network);
    elsewhere the error is how far the left-out rounds stray from the line
    between the sampled ones (docs/simulation.md measures it). Every rank
    must have the same rounds count and each sampled round must be closed
    (its messages sent and received in that round, checked), so dropping
    the others leaves every message matched; ranks whose rounds do not
    line up (a node's leader exchanging with the other leaders while its
    members wait) are first padded with empty rounds until they do
    (:func:`align`).

Symmetry (:func:`symmetric_sigs`)
    Building ``p`` schedules of ``2(p-1)`` rounds (a ring at 65,536 ranks)
    does not fit in memory, so only rank 0's schedule and a sample of other
    ranks' are built; if every sampled rank's rounds equal rank 0's with
    peers relabelled (``peer - rank mod p``: rings; ``peer xor rank``:
    recursive doubling and halving on powers of two), every rank's rounds
    are generated from rank 0's. Schedules built for nodes of ``L`` ranks
    in blocks (the hierarchical ones) are no rank's relabelled, but repeat
    from node to node: rank ``r``'s are rank ``r % L``'s with peers
    shifted (or xor-ed) by ``r - r % L``, so node 0's ``L`` schedules stand
    for all (``"shift/L"``, ``"xor/L"``). A rank that is not sampled is
    assumed to follow the same symmetry: sampling checks it, it does not
    prove it.
    Where the rounds differ only in how a rank's bytes to one peer are cut
    into messages (Bruck's all-to-all sends its first round's blocks in two
    messages on ranks where they wrap past the last block), the check is
    made again with each round's messages to one peer, and from one,
    merged (:func:`~mpicoll.sim.simgrid.base_rank.merged`), and the symmetry is
    named ``"shift+merged"`` (or ``"xor+merged"``): an approximation,
    since SimGrid shares a link among flows, so two flows of a pair take
    more of a contended link than one of their bytes would
    (docs/simulation.md measures it).
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Callable, NamedTuple

from mpicoll.sim.simgrid.peer_sample import sample_peers
from mpicoll.sim.simgrid.base_rank import find_symmetry
from mpicoll.schedule.core import Reduce, Schedule
from mpicoll.schedule.relabel import RELABEL, relabel, relabelling


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


class Gap(NamedTuple):
    """``rounds`` rounds of the real program, not simulated, between the
    simulated rounds ``after`` and ``after + 1``; charged by the durations
    of ``after`` and ``after + 2``, the second rounds of the sampled pairs
    on either side (:func:`sample_rounds`)."""

    after: int
    rounds: int


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
    gaps: tuple[Gap, ...]  # the rounds left out by sampling (empty: exact)


def sig(schedule: Schedule, itemsize: int) -> tuple[Sig, ...]:
    """The network view of one rank's schedule."""
    return tuple(
        Sig(tuple((s.peer, len(s.span) * itemsize) for s in rnd.sends),
            tuple((r.peer, len(r.span) * itemsize) for r in rnd.recvs),
            sum(len(st.dst) for st in rnd.local if isinstance(st, Reduce))
            * itemsize)
        for rnd in schedule.rounds)


def build(sigs: list[tuple[Sig, ...]], runs: tuple[Run, ...] = (),
          gaps: tuple[Gap, ...] = ()) -> Program:
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
                   runs, gaps)


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


def sample_rounds(sigs: list[tuple[Sig, ...]], n: int, seed: int = 0):
    """``(sigs, gaps)``: ``n`` pairs of consecutive rounds of every rank's
    (the first two and the last two rounds, and one pair drawn at random,
    ``seed``, in each of ``n - 2`` equal strata between; every round when
    there are no more than ``2n``), and the :class:`Gap` records that say
    what was left out. Raises ValueError when ``n < 2`` or the ranks'
    rounds counts differ."""
    if n < 2:
        raise ValueError("sample at least 2 pairs of rounds (the first and "
                         "the last)")
    counts = {len(rounds) for rounds in sigs}
    if len(counts) > 1:
        raise ValueError(f"the ranks have {min(counts)} to {max(counts)} "
                         "rounds; sampling rounds needs every rank to have "
                         "as many")
    total = counts.pop() if counts else 0
    if total <= 2 * n:
        return sigs, ()
    rng = random.Random(seed)
    edges = [2 + i * (total - 4) // max(1, n - 2) for i in range(n - 1)]
    starts = [0, *(rng.randrange(a, b - 1) for a, b in zip(edges, edges[1:])),
              total - 2]
    gaps = tuple(Gap(2 * i + 1, b - a - 2)
                 for i, (a, b) in enumerate(zip(starts, starts[1:]))
                 if b > a + 2)
    picks = [k for a in starts for k in (a, a + 1)]
    return [tuple(rounds[k] for k in picks) for rounds in sigs], gaps


EMPTY = Sig((), (), 0)  # a round that posts and reduces nothing


def align(sigs: list[tuple[Sig, ...]], to_base=None, period: int | None = None,
          size: int | None = None) -> list[tuple[Sig, ...]]:
    """``sigs`` padded with empty rounds so that every message is sent and
    received in the same round, every rank with as many rounds (what
    :func:`sample_rounds` needs): a leader's ``m + 1`` rounds and its
    members' two (send to the leader, receive from it) become ``m + 1``
    each, the members idle between. A round's place is the least that is
    after its rank's round before and equal to its messages' other ends'
    (found by raising places until nothing changes). An empty round takes
    no time in the replay, so the exact simulation is unchanged.

    ``sigs`` may be the bases of a symmetry
    (:func:`~mpicoll.sim.simgrid.base_rank.find_symmetry`):
    ``period`` of them among ``size`` ranks, ``to_base`` its relabelling
    (a peer ``q`` is base ``q % period``'s image); by default every rank
    is its own. Raises ValueError when a message has no other end, the
    places never settle (one round's messages ending in different rounds
    of one rank), or padding leaves no rank that takes part in every round
    (a chain or a tree: its rounds do not run in step, so sampled ones
    cannot stand for the rest)."""
    count = len(sigs)
    period = period or count
    size = size or count
    to_base = to_base or RELABEL["shift"][0]
    received: dict[tuple[int, int, int], int] = {}  # (base, peer, nth): round
    for c, rounds in enumerate(sigs):
        nth: dict[int, int] = defaultdict(int)
        for j, rnd in enumerate(rounds):
            for q, _ in rnd.recvs:
                received[c, q, nth[q]] = j
                nth[q] += 1
    links = []  # (base, round, other end's base, its round)
    for b, rounds in enumerate(sigs):
        nth = defaultdict(int)
        for k, rnd in enumerate(rounds):
            for q, _ in rnd.sends:
                c, offset = q % period, q - q % period
                key = (c, to_base(b, offset, size), nth[q])
                nth[q] += 1
                if key not in received:
                    raise ValueError(f"rank {b} round {k}: the send to {q} "
                                     "has no matching receive")
                links.append((b, k, c, received[key]))
    place = [list(range(len(rounds))) for rounds in sigs]
    bound = sum(map(len, sigs))
    changed = True
    while changed:
        changed = False
        for b, k, c, j in links:
            if place[b][k] != place[c][j]:
                place[b][k] = place[c][j] = max(place[b][k], place[c][j])
                changed = True
        for row in place:
            for k in range(1, len(row)):
                if row[k] <= row[k - 1]:
                    row[k] = row[k - 1] + 1
                    changed = True
        if max((row[-1] for row in place if row), default=0) >= bound:
            raise ValueError("the rounds cannot be aligned: one round's "
                             "messages end in different rounds of one rank "
                             "(sends posted at once, as a pipeline's)")
    total = max((row[-1] + 1 for row in place if row), default=0)
    if all(row == list(range(total)) for row in place):
        return sigs
    if not any(len(rounds) == total and all(r.sends or r.recvs
                                            for r in rounds)
               for rounds in sigs):
        raise ValueError("the rounds cannot be aligned in step: no rank "
                         "takes part in every round once they are (a chain "
                         "or a tree, whose rounds cannot stand for each "
                         "other)")
    out = []
    for rounds, row in zip(sigs, place):
        padded = [EMPTY] * total
        for k, rnd in zip(row, rounds):
            padded[k] = rnd
        out.append(tuple(padded))
    return out


def aligned_where_possible(sigs: list[tuple[Sig, ...]]
                           ) -> list[tuple[Sig, ...]]:
    """``sigs`` aligned (:func:`align`) where they can be, so that a run of
    identical rounds that ranks reach at different rounds (the ring of van
    de Geijn's broadcast, which a scatter's leaves start before its root)
    lines up for :func:`compress`; as they are where they cannot be (a
    pipeline, a chain). An empty round takes no time in the replay, so the
    exact run is the same either way."""
    try:
        return align(sigs)
    except ValueError:
        return sigs


def check_closed(sigs: list[tuple[Sig, ...]]) -> None:
    """Raise ValueError unless every message is sent and received in the
    same round (what :func:`sample_rounds` needs of the rounds it keeps)."""
    for k in range(max((len(r) for r in sigs), default=0)):
        sent, received = defaultdict(int), defaultdict(int)
        for rank, rounds in enumerate(sigs):
            if k < len(rounds):
                for peer, n in rounds[k].sends:
                    sent[rank, peer, n] += 1
                for peer, n in rounds[k].recvs:
                    received[peer, rank, n] += 1
        if sent != received:
            src, dst, n = next(key for key in sent.keys() | received.keys()
                               if sent[key] != received[key])
            raise ValueError(
                f"round {k}: the message of {n} bytes from rank {src} to "
                f"{dst} is not sent and received in the same round, so "
                "rounds cannot be sampled")


def cut_rounds(sigs: list[tuple[Sig, ...]], keep: int | None = None,
               sample: int | None = None):
    """``(sigs, runs, gaps)``: ``sigs`` with runs of identical rounds cut
    to ``keep`` (:func:`compress`) or ``sample`` rounds kept
    (:func:`sample_rounds`), or as they are when both are None. Raises
    ValueError when both are given: two ways to leave rounds out."""
    if keep is not None and sample is not None:
        raise ValueError("keep repeated rounds or sample rounds, not both")
    if keep is not None:
        return (*compress(sigs, keep), ())
    if sample is not None:
        short, gaps = sample_rounds(sigs, sample)
        return short, (), gaps
    return sigs, (), ()


def network_sigs(rank_sig: Callable[[int], tuple[Sig, ...]], size: int, *,
                 keep: int | None = None, sample: int | None = None,
                 symmetric: bool = False, period: int = 1,
                 peers: int | None = None):
    """``(sigs, runs, gaps, symmetry)``: the rounds of ``size`` ranks
    (``rank_sig(r)`` builds rank r's) cut as :func:`cut_rounds` says, from
    every rank's schedule or, with ``symmetric``, from a few ranks' and a
    sample (:func:`symmetric_sigs`, which tries ``period`` too; ``symmetry``
    None otherwise). ``peers``: keep the messages of that many sampled
    offsets only (:func:`mpicoll.sim.simgrid.peer_sample.sample_peers`); None
    keeps all. Before rounds are sampled they are aligned
    (:func:`align`), and after, checked closed (:func:`check_closed`);
    before runs are cut, aligned where they can be
    (:func:`aligned_where_possible`)."""
    if symmetric:
        sigs, runs, gaps, symmetry = symmetric_sigs(
            rank_sig, size, keep, sample, period=period, peers=peers)
    else:
        symmetry = None
        sigs = [rank_sig(r) for r in range(size)]
        if peers is not None:
            sigs = sample_peers(sigs, size, peers)
        if sample is not None:
            sigs = align(sigs)
        elif keep is not None:
            sigs = aligned_where_possible(sigs)
        sigs, runs, gaps = cut_rounds(sigs, keep, sample)
    if sample is not None:
        check_closed(sigs)
    return sigs, runs, gaps, symmetry


def symmetric_sigs(rank_sig: Callable[[int], tuple[Sig, ...]], size: int,
                   keep: int | None = None, sample: int | None = None,
                   samples: int = 8, seed: int = 0, period: int = 1,
                   peers: int | None = None):
    """``(sigs, runs, gaps, symmetry)`` for all ``size`` ranks from their
    bases' schedules and ``samples`` other sampled ranks' (``rank_sig(r)``
    builds one; :func:`~mpicoll.sim.simgrid.base_rank.find_symmetry`, with
    ``period``). With ``peers`` the bases keep the messages of that many
    sampled offsets (:func:`mpicoll.sim.simgrid.peer_sample.sample_peers`),
    which a shift carries to every rank: ValueError under another
    symmetry. The bases' rounds are cut (:func:`cut_rounds` with ``keep``
    or ``sample``, aligned first for ``sample``: :func:`align`; by
    symmetry their runs are every rank's) before the other ranks are
    generated. Raises ValueError when no symmetry fits the sample."""
    name, bases = find_symmetry(rank_sig, size, samples, seed, period)
    to_base, back, k = relabelling(name)
    if peers is not None:
        if not name.startswith("shift"):
            raise ValueError(f"sampled peers need schedules symmetric under a "
                             f"shift of ranks; these are under a {name}")
        bases = sample_peers(list(bases), size, peers)
    if sample is not None:
        bases = align(list(bases), to_base, k, size)
    bases, runs, gaps = cut_rounds(list(bases), keep, sample)
    return ([relabel(bases[r % k], back, r - r % k, size)
             for r in range(size)], runs, gaps, name)
