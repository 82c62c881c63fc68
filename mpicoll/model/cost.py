"""An α-β-γ cost model of every hand-built algorithm, read off its schedules.

No cost here is written by hand: :func:`profile` walks each rank's
:class:`~mpicoll.schedule.core.Schedule` (built through the registry as
the MPI layer builds it) and :func:`predict` runs the schedules as a
dependency graph on a :class:`Network`. The published closed forms
(:mod:`mpicoll.model.formulas`) stand apart, for comparison.

The timing model is the one-port, full-duplex Hockney model of Thakur,
Rabenseifner & Gropp (2005) and MPICH's cost comments:

- every rank enters at time 0 and posts its round ``k`` at ``P(r, k)``;
- a rank's sends of a round leave one after another in posting order,
  its receives of a round arrive one after another in posting order, and
  a send and a receive overlap fully (full duplex);
- a message starts when both ends are ready for it (the sender's earlier
  sends and the receiver's earlier receives of their rounds done, both
  rounds posted: no eager buffering) and takes ``α + β·bytes``
  (``alpha_intra``/``beta_intra`` between two ranks of one node);
- a message one way (in their rounds its sender receives nothing and its
  receiver sends nothing: a broadcast's, a gather's) takes
  ``alpha_one_way + beta_one_way·bytes`` where the network gives them
  (None: ``α + β·bytes``, as on a full-duplex link); the others (an
  exchange's, a ring's, whose ranks each send and receive) ``α +
  β·bytes``: on shared memory a rank that sends and receives at once
  shares its memory bandwidth between them, and a calibration
  (:mod:`mpicoll.bench.calibrate`) measures both;
- a message that follows one between the same two ranks in both their
  rounds (a *train*: the pipelined broadcast's segments on 2 ranks, the
  two blocks of Bruck's all-to-all's first round) takes ``β·bytes``:
  its latency passes while the one before it streams, as LogGP's gap
  between a pair's back-to-back messages (at 2 ranks, α on every message
  of a train takes the calibrated model from 119 to 117 of 120 validated
  times within ±30%: docs/validation.md); messages to different peers pay
  their α each, as in the published forms;
- a round is over when all its messages are; its local steps then take
  ``γ`` per byte reduced (each :class:`~mpicoll.schedule.core.Reduce`'s
  output; ``gamma_out_of_place`` where its output is a third buffer,
  apart from both operands) and ``copy`` per byte copied (free by
  default, as in the published forms), which gives ``P(r, k+1)``;
- the prediction is the critical path, the latest rank's finish, plus
  ``call``: what one call costs each rank before its first round and
  after its last (mpicoll's Python: the arguments, the replayed plan, the
  tag; 0 by default, as in the published forms; a calibration measures
  it: 1.3 to 2.8 µs at 2 ranks on the development VM).

Not modelled: contention between pairs (links are per rank), the cost of
posting a round (Python's microseconds; a calibrated α includes it:
:mod:`mpicoll.bench.calibrate`), memory traffic beyond γ and copy.

Speed: walking every rank costs time in proportion to all their rounds.
Above :data:`FULL_WALK`, when every sampled rank's schedule is rank 0's
with peers relabelled (``r + i`` mod p, or ``r XOR i`` for a power of
two) and the same sizes and local steps (ring, pairwise, dissemination,
Bruck allgather, recursive doubling and halving on a power of two, with
counts the blocks divide), every rank has rank 0's timeline and rank 0's
schedule alone is walked. Otherwise (roots, folds, uneven blocks, several
nodes) every rank is: seconds at thousands of ranks for logarithmic
algorithms, minutes for ``O(p)``-round ones. Results are cached.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, NamedTuple

import numpy as np

from mpicoll.coll import lookup
from mpicoll.collectives import COLLECTIVES
from mpicoll.schedule.core import Reduce, Schedule
from mpicoll.schedule.relabel import find_relabelling
from mpicoll.topo import canonical_nodes

FULL_WALK = 1 << 15  # rounds + messages over all ranks walked without sampling
SAMPLES = 4  # random ranks compared with rank 0 (besides 1 and p-1)


class SizeRange(NamedTuple):
    """The costs of :class:`Network` for sizes up to ``upto`` bytes (and
    above the previous range's): a message of that many bytes, a round's
    reduction or copy output of that many."""

    upto: int
    alpha: float
    beta: float
    gamma: float
    copy: float
    gamma_out_of_place: float | None = None  # None: this range's gamma
    alpha_one_way: float | None = None  # None: this range's alpha
    beta_one_way: float | None = None  # None: this range's beta


# A cost that may be None, and the one it then stands for (an intra-node
# one way cost: the intra-node exchange's where there is one, below).
STANDS_FOR = {"alpha_intra": "alpha", "beta_intra": "beta",
              "gamma_out_of_place": "gamma", "alpha_one_way": "alpha",
              "beta_one_way": "beta", "alpha_one_way_intra": "alpha_one_way",
              "beta_one_way_intra": "beta_one_way"}


@dataclass(frozen=True)
class Network:
    """Costs in seconds: ``alpha`` per message and ``beta`` per byte between
    nodes (between any two ranks when no node map is given), ``gamma`` per
    byte reduced, ``copy`` per byte copied locally, ``alpha_intra`` and
    ``beta_intra`` within a node (None: the same as between nodes), and
    ``gamma_out_of_place`` per byte reduced into a buffer apart from both
    operands (``dst = a op b``, three buffers' worth of memory traffic
    where ``b = a op b`` has two; None: ``gamma``, as the published forms
    have it). ``alpha_one_way`` and ``beta_one_way`` (``_intra`` within
    a node) price a message that goes one way in its round, the others an
    exchange's direction (None: as an exchange's direction; within a node,
    the intra-node exchange's where it is given, else the one-way costs
    between nodes).

    ``ranges`` (increasing ``upto``) refine the base costs by size, as
    a calibration measures them (:mod:`mpicoll.model.calibration`): a message
    between nodes (or within one, where the intra-node costs are None) of
    ``n`` bytes costs the first range's ``alpha + beta·n`` with ``n <=
    upto``, a round's ``n`` bytes reduced (in place or out of place) or
    copied its ``gamma·n`` (``gamma_out_of_place·n``) or ``copy·n``;
    sizes above the last range take the base costs.
    ``ranges_intra`` refine ``alpha_intra`` and ``beta_intra`` the same
    way, their one-way costs ``alpha_one_way_intra`` and
    ``beta_one_way_intra`` (their ``gamma`` and ``copy`` are not read): a
    calibration made inside a node beside one made between nodes
    (:meth:`~mpicoll.model.calibration.Calibration.network`'s ``intra``).

    ``trains``: a message that follows one of the same pair in both their
    rounds pays no α (True; the module docstring), or α like any other
    (False: Hockney's model as the published forms apply it).

    ``call``: seconds added once to every prediction, the per-call cost
    of the software that makes the call (mpicoll's engine), apart from
    the rounds."""

    alpha: float
    beta: float
    gamma: float = 0.0
    copy: float = 0.0
    alpha_intra: float | None = None
    beta_intra: float | None = None
    ranges: tuple[SizeRange, ...] = ()
    ranges_intra: tuple[SizeRange, ...] = ()
    gamma_out_of_place: float | None = None
    alpha_one_way: float | None = None
    beta_one_way: float | None = None
    alpha_one_way_intra: float | None = None
    beta_one_way_intra: float | None = None
    trains: bool = True
    call: float = 0.0

    def __post_init__(self) -> None:
        tables = ("ranges", "ranges_intra")
        values = [(n, v) for n, v in vars(self).items() if n not in tables]
        for table in tables:
            ranges = getattr(self, table)
            values += [(f"{table}[{i}].{n}", v) for i, r in enumerate(ranges)
                       for n, v in r._asdict().items()]
            if any(b.upto <= a.upto for a, b in zip(ranges, ranges[1:])):
                raise ValueError(f"Network.{table} must have increasing upto")
        for name, value in values:
            if value is not None and not value >= 0:
                raise ValueError(f"Network.{name} must be >= 0, not {value!r}")
        if self.ranges_intra and None in (self.alpha_intra, self.beta_intra):
            raise ValueError("Network.ranges_intra refine alpha_intra and "
                             "beta_intra, which must then be given")

    def by_size(self, name: str, nbytes: np.ndarray) -> np.ndarray | float:
        """The cost ``name`` (a field: alpha, beta, gamma, copy,
        gamma_out_of_place, the ``_one_way`` and ``_intra`` ones) for
        each size in ``nbytes``: its range's, or the base one (a float,
        when there are no ranges). A cost that is None is the one it
        stands for (:data:`STANDS_FOR`): an intra-node cost the one
        between nodes (a one-way one the intra-node exchange's, where
        that is given), a one-way cost the exchange's, an out-of-place γ
        the γ beside it (the network's or a range's)."""
        base = getattr(self, name)
        if base is None and name.endswith("_intra"):
            exchange = name.replace("_one_way", "")
            inside = exchange != name and getattr(self, exchange) is not None
            return self.by_size(exchange if inside else STANDS_FOR[name],
                                nbytes)
        if base is None:
            base = getattr(self, STANDS_FOR[name])
        field = name.removesuffix("_intra")
        ranges = self.ranges_intra if field != name else self.ranges
        if not ranges:
            return base
        values = [getattr(r, field) for r in ranges]
        values = [getattr(r, STANDS_FOR[field]) if v is None else v
                  for r, v in zip(ranges, values)]
        table = np.array([*values, base])
        return table[np.searchsorted([r.upto for r in ranges], nbytes)]


class RankProfile(NamedTuple):
    """What one rank's schedule moves and computes, round by round (every
    round of the schedule, communication-free ones included), in bytes."""

    rank: int
    sent: tuple[tuple[int, ...], ...]  # per round: each message, posting order
    received: tuple[tuple[int, ...], ...]
    reduced: tuple[int, ...]  # per round: bytes of reduction output
    copied: tuple[int, ...]  # per round: bytes copied locally
    # per round: the part of ``reduced`` written apart from both operands
    reduced_out_of_place: tuple[int, ...]

    @property
    def rounds(self) -> int:
        """Rounds that post at least one message (what docstrings count)."""
        return sum(1 for s, r in zip(self.sent, self.received) if s or r)

    @property
    def messages(self) -> int:
        """Messages this rank sends."""
        return sum(map(len, self.sent))

    bytes_sent = property(lambda self: sum(map(sum, self.sent)))
    bytes_received = property(lambda self: sum(map(sum, self.received)))
    bytes_reduced = property(lambda self: sum(self.reduced))
    bytes_copied = property(lambda self: sum(self.copied))


def _rounds(schedule: Schedule) -> tuple:
    """The schedule reduced to what costs time, in elements: per round,
    ``((peer, n) sends, (peer, n) receives, (reduced in place, reduced out
    of place), copied)``. A reduction is in place when its output is one
    of its operands (schedules are alias-safe: otherwise it overlaps
    neither)."""
    out = []
    for rnd in schedule.rounds:
        in_place = out_of_place = copied = 0
        for step in rnd.local:
            n = step.dst.stop - step.dst.start
            if not isinstance(step, Reduce):
                copied += n
            elif step.dst in (step.a, step.b):
                in_place += n
            else:
                out_of_place += n
        out.append((tuple((s.peer, s.span.stop - s.span.start) for s in rnd.sends),
                    tuple((r.peer, r.span.stop - r.span.start) for r in rnd.recvs),
                    (in_place, out_of_place), copied))
    return tuple(out)


def _algorithm(collective: str, algorithm: str, commutative: bool):
    alg = lookup(collective, algorithm)
    if alg is None or alg.native:
        raise KeyError(f"no hand-built {collective} algorithm {algorithm!r} "
                       "(the MPI library's own call has no schedule to cost)")
    why = alg.unmet(commutative=commutative)
    if why is not None:
        raise ValueError(f"{collective} {algorithm} {why}")
    return alg


def _hashable(collective: str, count):
    shape = COLLECTIVES[collective].counts
    if shape == "matrix":
        return tuple(map(tuple, count))
    return tuple(count) if shape == "per_rank" else int(count)


def profile(collective: str, algorithm: str, size: int, count,
            itemsize: int = 1, *, root: int = 0, commutative: bool = True,
            nodes=None, ranks=None, **params) -> tuple[RankProfile, ...]:
    """Per-rank rounds, messages, bytes sent, received, reduced and copied
    of ``algorithm`` on ``size`` ranks (all of them, or ``ranks``).

    ``count`` is shaped as the collective's row says (see
    :mod:`mpicoll.schedule.layout`), ``itemsize`` the bytes per element;
    ``root``, ``commutative``, ``nodes`` and ``params`` reach the builder
    as the MPI layer passes them. Native algorithms raise KeyError.
    """
    alg = _algorithm(collective, algorithm, commutative)
    out = []
    for rank in range(size) if ranks is None else ranks:
        rounds = _rounds(alg.schedule(rank, size, count, root=root,
                                      commutative=commutative, nodes=nodes,
                                      **params))
        out.append(RankProfile(
            rank,
            tuple(tuple(n * itemsize for _, n in s) for s, _, _, _ in rounds),
            tuple(tuple(n * itemsize for _, n in r) for _, r, _, _ in rounds),
            tuple(sum(red) * itemsize for _, _, red, _ in rounds),
            tuple(cop * itemsize for _, _, _, cop in rounds),
            tuple(red[1] * itemsize for _, _, red, _ in rounds)))
    return tuple(out)


def predict(collective: str, algorithm: str, size: int, count, itemsize: int,
            network: Network, *, root: int = 0, commutative: bool = True,
            nodes=None, exhaustive: bool | None = None, **params) -> float:
    """Seconds ``algorithm`` takes on ``network``: the critical path over
    all ranks of their schedules, under the model of the module docstring,
    plus the network's per-call cost (``Network.call``).

    Arguments as for :func:`profile`; ``nodes`` also decides which messages
    take the network's intra-node link. ``exhaustive``: True walks every
    rank, False takes rank 0's schedule for all whenever the samples are
    its relabelled copies, None (default) does so only above
    :data:`FULL_WALK`. The graph is cached per schedule set, the answer
    per network and item size. Native algorithms raise KeyError.
    """
    if nodes is not None:
        nodes = canonical_nodes(nodes, size)
    graph = _graph(collective, algorithm, size, _hashable(collective, count),
                   root, commutative, nodes, exhaustive,
                   tuple(sorted(params.items())))
    return graph.evaluate(network, itemsize) + network.call


def _symmetry(rounds, size: int) -> str | None:
    """``"shift"`` or ``"xor"`` when every sampled rank's schedule is rank
    0's with peers relabelled (:func:`mpicoll.schedule.relabel.find_relabelling`),
    else None."""
    picks = {1, size - 1, *random.Random(size).sample(range(1, size),
                                                      min(SAMPLES, size - 1))}
    found = find_relabelling(rounds, size, picks)
    return found and found[0]


@lru_cache(maxsize=64)
def _graph(collective, algorithm, size, count, root, commutative, nodes,
           exhaustive, params) -> _Graph:
    alg = _algorithm(collective, algorithm, commutative)

    def rounds(rank: int):
        return _rounds(alg.schedule(rank, size, count, root=root,
                                    commutative=commutative, nodes=nodes,
                                    **dict(params)))

    first = rounds(0)
    work = size * (len(first) + sum(len(s) for s, _, _, _ in first))
    if (size > 1 and exhaustive is not True and len(set(nodes or (0,))) == 1
            and (exhaustive is False or work > FULL_WALK)):
        name = _symmetry(lambda r: first if r == 0 else rounds(r), size)
        if name is not None:
            # Rank 0's send to q is the message of its receive from the rank
            # that sees rank 0 as rank 0 sees q: -q (shift), q (xor).
            mirror = (lambda q: q) if name == "xor" else (lambda q: -q % size)
            return _Graph([first], lambda i, q: q, lambda i, q: mirror(q),
                          lambda i, q: nodes is not None)
    same = (lambda i, q: nodes[i] == nodes[q]) if nodes else (lambda i, q: False)
    return _Graph([rounds(r) for r in range(size)], lambda i, q: i * size + q,
                  lambda i, q: q * size + i, same)


class _Graph:
    """The schedules as a dependency graph of events: round starts ("nodes",
    rank by rank, one more per rank for its finish) and messages. Each event
    has at most three predecessors (the sentinel ``n`` stands for none) and
    a cost; its time is the latest predecessor's plus its cost."""

    def __init__(self, ranks, send_key: Callable, recv_key: Callable,
                 intra: Callable) -> None:
        local, starts, finish = [], [], []
        # (key, round node, elements, intra, first of its round, after one
        # to the same peer in its round, its round moves nothing the other
        # way: a send's no receive, a receive's no send)
        sends: list[tuple] = []
        recvs: list[tuple] = []
        node = 0
        for i, rounds in enumerate(ranks):
            starts.append(node)
            local.append((0, 0, 0))
            for s, r, red, cop in rounds:
                sends += [(send_key(i, q), node, n, intra(i, q), j == 0,
                           j > 0 and s[j - 1][0] == q, not r)
                          for j, (q, n) in enumerate(s)]
                recvs += [(recv_key(i, q), node, n, False, j == 0,
                           j > 0 and r[j - 1][0] == q, not s)
                          for j, (q, n) in enumerate(r)]
                local.append((*red, cop))
                node += 1
            finish.append(node)
            node += 1
        nn, nm = node, len(sends)
        self.n = n = nn + nm
        s_arr = np.array(sends, dtype=np.int64).reshape(-1, 7)
        r_arr = np.array(recvs, dtype=np.int64).reshape(-1, 7)
        s_ord = np.argsort(s_arr[:, 0], kind="stable")
        r_ord = np.argsort(r_arr[:, 0], kind="stable")
        if (len(s_arr) != len(r_arr)
                or not np.array_equal(s_arr[s_ord, 0], r_arr[r_ord, 0])
                or not np.array_equal(s_arr[s_ord, 2], r_arr[r_ord, 2])):
            raise ValueError("the schedules' sends and receives do not match")
        preds = np.full((n, 3), n, dtype=np.int64)
        self.train = np.ones(nm, dtype=bool)  # follows its pair's in a train
        for side, (arr, order) in enumerate(((s_arr, s_ord), (r_arr, r_ord))):
            ids = np.empty(nm, dtype=np.int64)  # the message of each entry
            ids[order] = nn + np.arange(nm)
            self.train[ids - nn] &= arr[:, 5] == 1
            prev = np.concatenate(([n], ids[:-1]))
            # first of its round: after the round's start; else after the previous
            preds[ids, side] = np.where(arr[:, 4] == 1, arr[:, 1], prev)
            last = np.ones(len(arr), dtype=bool)
            last[:-1] = arr[1:, 1] != arr[:-1, 1]
            # a round's next start waits for its last send and last receive
            preds[arr[last, 1] + 1, side + 1] = ids[last]
        later = np.setdiff1d(np.arange(nn), starts)  # not a rank's first
        preds[later, 0] = later - 1
        self.preds, self.nn, self.finish = preds, nn, np.array(finish)
        self.local = np.array(local, dtype=np.float64).reshape(-1, 3)
        self.length = s_arr[s_ord, 2].astype(np.float64)
        self.intra = s_arr[s_ord, 3].astype(bool)
        self.one_way = (s_arr[s_ord, 6] & r_arr[r_ord, 6]).astype(bool)
        self.order = self._order()
        self._columns = None  # the predecessors, as lists, once evaluated
        self._cache: dict = {}

    def _order(self) -> list[int]:
        """A topological order of the events (Kahn's algorithm)."""
        n, preds = self.n, self.preds
        rows, cols = np.nonzero(preds < n)
        src = preds[rows, cols]
        by_src = np.argsort(src, kind="stable")
        succ = rows[by_src].tolist()
        first = np.searchsorted(src[by_src], np.arange(n + 1)).tolist()
        deg = np.bincount(rows, minlength=n).tolist()
        ready, order = [e for e in range(n) if not deg[e]], []
        while ready:
            e = ready.pop()
            order.append(e)
            for s in succ[first[e]:first[e + 1]]:
                deg[s] -= 1
                if not deg[s]:
                    ready.append(s)
        if len(order) != n:
            raise ValueError("the schedules' dependencies form a cycle under "
                             "the model's posting order")
        return order

    def evaluate(self, net: Network, itemsize: int) -> float:
        """The latest finish over ranks, in seconds."""
        key = (net, itemsize)
        if key not in self._cache:
            cost = np.zeros(self.n)
            red, apart, cop = (itemsize * self.local).T
            cost[:self.nn] = (net.by_size("gamma", red) * red
                              + net.by_size("gamma_out_of_place", apart) * apart
                              + net.by_size("copy", cop) * cop)
            nbytes = itemsize * self.length

            def link(kind: str) -> np.ndarray:  # alpha or beta per message
                def of(name: str):
                    return net.by_size(name, nbytes) * np.ones_like(nbytes)

                return np.where(
                    self.intra,
                    np.where(self.one_way, of(f"{kind}_one_way_intra"),
                             of(f"{kind}_intra")),
                    np.where(self.one_way, of(f"{kind}_one_way"), of(kind)))

            alpha = link("alpha")
            cost[self.nn:] = alpha + link("beta") * nbytes
            if net.trains:
                cost[self.nn:][self.train] -= alpha[self.train]
            if self._columns is None:
                self._columns = self.preds.T.tolist()
            (a, b, c), w = self._columns, cost.tolist()
            time = [0.0] * (self.n + 1)  # the last: the sentinel, never set
            for e in self.order:
                time[e] = max(time[a[e]], time[b[e]], time[c[e]]) + w[e]
            self._cache[key] = max(time[f] for f in self.finish.tolist())
        return self._cache[key]
