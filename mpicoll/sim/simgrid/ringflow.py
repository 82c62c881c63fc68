"""Symmetric rounds on ``ring:P`` in closed form, where SimGrid cannot go.

On ``ring:65536`` a round whose partners are up to 32,768 links apart puts
65,536 flows of up to 32,768 links each into SimGrid's sharing system,
about 10⁹ flow-link pairs: more than this machine holds. Such rounds are
regular enough to price exactly as SimGrid's model would, without it:

- **routes** as SimGrid's ``TorusZone`` takes them in one dimension of
  ``P`` nodes: clockwise (to higher ranks) when the target is at most
  ``P // 2`` ahead without wrapping, or, from a node past ``P // 2``, when
  it is at most ``P // 2`` ahead around the wrap; otherwise anticlockwise
  (so a partner exactly ``P/2`` away is reached clockwise, except from
  node ``P/2`` itself);
- **links** are directed (``SPLITDUPLEX``): a flow over ``h`` links waits
  ``h × latency``, then transfers at its share of each link's
  ``bandwidth``;
- **shares**: when all flows of a round start together, cross as many
  links and carry as many bytes, a flow's max-min fair rate is the
  bandwidth over the number of flows on the busiest link of its path,
  provided every flow has a link of its path that those flows saturate
  (each of them having it as a busiest link). :func:`round_time` checks
  both and raises :class:`NotClosedForm` where they do not hold;
- **rounds**: all flows of such a round end together, so every rank
  starts the next round at once; a round then reduces its bytes at γ per
  byte, as the SimGrid replay charges.
- **nodes** (``ranks_per_node`` above 1, ranks in blocks): a round whose
  flows all stay inside nodes takes the loopback's latency and the bytes
  at its full bandwidth (SimGrid's loopback is a FATPIPE, not shared);
  across nodes, a node's ranks' flows share its links as above. A round
  with flows of both kinds is refused (they end at different times), as
  are schedules whose ranks do not move in step (rounds counts or bytes
  reduced that differ between a node's ranks: a leader's).

Every rank's rounds are rank 0's relabelled (a shift or an xor of ranks),
or, on nodes, node 0's ranks' shifted or xor-ed by a node's first rank
(:func:`mpicoll.sim.simgrid.base_rank.find_symmetry`, which merges a round's
messages to one peer where only that makes them so, as for Bruck's
all-to-all: :attr:`Priced.symmetry` says), so those schedules give every
round's flows. Cost: ``O(P log P)`` per distinct round (link loads by
difference arrays, the busiest link of each path by a sparse table;
rounds with the same sends are priced once), so ``log P``-round
algorithms take seconds at 65,536 ranks. Rounds that fail the checks (the
pairwise exchange's xor rounds, whose partners lie at different
distances) need SimGrid.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mpicoll.coll import lookup
from mpicoll.sim.simgrid.networks import Platform
from mpicoll.sim.simgrid.program import sig
from mpicoll.sim.simgrid.base_rank import find_symmetry, peers


class NotClosedForm(ValueError):
    """A round whose max-min shares this module cannot give exactly."""


class Priced(NamedTuple):
    """A schedule priced in closed form."""

    time: float  # seconds
    rounds: int  # rank 0's rounds (as many as every rank's)
    distinct: int  # rounds priced (the others repeat one of them)
    symmetry: str  # find_symmetry's: "shift", "xor", "shift/8", "+merged"


def routes(src: np.ndarray, dst: np.ndarray, size: int):
    """``(clockwise, hops)`` per flow: the way SimGrid's TorusZone goes
    round a ring of ``size`` nodes, and the links crossed."""
    half = size // 2
    clockwise = ((dst > src) & (dst <= src + half)) | (
        (src > half) & ((src + half) % size >= dst))
    hops = np.where(clockwise, (dst - src) % size, (src - dst) % size)
    return clockwise, hops


def _covered(first: np.ndarray, length: np.ndarray, values: np.ndarray,
             size: int) -> np.ndarray:
    """Per link ``0..size-1``, the sum of ``values`` of the arcs of links
    ``first, first+1, ..., first+length-1`` (mod ``size``) covering it."""
    diff = (np.bincount(first, values, 2 * size + 1)
            - np.bincount(first + length, values, 2 * size + 1))
    total = np.cumsum(diff)[:2 * size]
    return total[:size] + total[size:]


def _arc_max(per_link: np.ndarray, first: np.ndarray,
             length: np.ndarray) -> np.ndarray:
    """The largest of ``per_link`` over each arc (a sparse table over the
    ring unrolled twice; no table when every link holds the same)."""
    if per_link.min() == per_link.max():
        return np.full(len(first), per_link[0])
    table = [np.concatenate([per_link, per_link])]
    while (1 << len(table)) <= length.max():
        prev, step = table[-1], 1 << (len(table) - 1)
        table.append(np.maximum(prev[:-step], prev[step:]))
    level = np.floor(np.log2(length)).astype(np.int64)
    out = np.empty(len(first), dtype=per_link.dtype)
    for k in np.unique(level):
        pick = level == k
        a, n = first[pick], length[pick]
        out[pick] = np.maximum(table[k][a], table[k][a + n - (1 << k)])
    return out


def round_time(src: np.ndarray, dst: np.ndarray, nbytes: int, size: int,
               bandwidth: float, latency: float) -> float:
    """Seconds until the last flow ``src[i] -> dst[i]`` of ``nbytes`` ends
    on ``ring:size`` (module docstring); NotClosedForm where the round's
    flows do not all cross as many links or their shares are not the
    closed form's."""
    clockwise, hops = routes(src, dst, size)
    if hops.min() < 1:
        raise NotClosedForm("a flow to its own node (node_round_time "
                            "prices rounds inside nodes)")
    if hops.min() != hops.max():
        raise NotClosedForm(f"its flows cross {hops.min()} to {hops.max()} "
                            "links (their transfers start at different "
                            "times)")
    # anticlockwise link i carries i+1 -> i; a flow from s over h links
    # covers clockwise links s..s+h-1, anticlockwise ones s-h..s-1
    first = np.where(clockwise, src, (src - hops) % size)
    busiest = np.empty(len(src))
    for way in (True, False):
        mine = clockwise == way
        if not mine.any():
            continue
        a, h = first[mine], hops[mine]
        load = _covered(a, h, np.ones(len(a)), size)
        peak = _arc_max(load, a, h)
        share = _covered(a, h, 1 / peak, size)  # 1 where saturated equally
        saturated = np.where(np.isclose(share, 1.0), load, 0.0)
        if not np.array_equal(_arc_max(saturated, a, h), peak):
            raise NotClosedForm("a flow whose path no link saturates with "
                                "flows of its own share")
        busiest[mine] = peak
    return float(hops[0] * latency + nbytes * busiest.max() / bandwidth)


def predict(collective: str, algorithm: str, size: int, count,
            itemsize: int, platform: Platform, gamma: float,
            **params) -> Priced:
    """What ``algorithm`` takes on ``platform`` (a ``ring:P``, ranks in
    blocks of ``ranks_per_node``): the sum over the rounds of
    :func:`node_round_time` of every rank's flows of the round, all
    together, plus γ per byte the round reduces. ValueError if the
    schedules are not symmetric or the platform is not a ring;
    NotClosedForm where a round is not in closed form."""
    if platform.kind != "ring":
        raise ValueError(f"{platform.spec}: the closed form is for ring:P")
    nodes = platform.node_map(size)  # PlatformError if the ranks do not fit
    alg = lookup(collective, algorithm)
    name, bases = find_symmetry(
        lambda r: sig(alg.schedule(r, size, count, nodes=nodes,
                                   cached=False, **params), itemsize),
        size, period=platform.ranks_per_node)
    lengths = {len(rounds) for rounds in bases}
    if len(lengths) > 1:
        raise NotClosedForm(f"the ranks of a node have {min(lengths)} to "
                            f"{max(lengths)} rounds (they do not move in "
                            "step)")
    period = len(bases)
    classes = [np.arange(c, size, period) for c in range(period)]
    known: dict = {}  # the bases' sends of a round: seconds

    def seconds(sends: tuple) -> float:
        """Every rank's flows of a round whose sends, seen from the bases,
        are ``sends`` (one tuple per base): all of them at once."""
        if sends not in known:
            sizes = {n for mine in sends for _, n in mine}
            if len(sizes) > 1:
                raise NotClosedForm(f"a round's messages carry {min(sizes)}"
                                    f" to {max(sizes)} bytes")
            _same_hops(name, sends[0], size, platform)  # before P² flows
            src = [ranks for ranks, mine in zip(classes, sends) for _ in mine]
            dst = [peers(name, q, ranks, size)
                   for ranks, mine in zip(classes, sends) for q, _ in mine]
            known[sends] = node_round_time(
                np.concatenate(src), np.concatenate(dst), sizes.pop(),
                platform) if src else 0.0
        return known[sends]

    total = 0.0
    for k in range(lengths.pop()):
        reduced = {rounds[k].reduce_bytes for rounds in bases}
        if len(reduced) > 1:
            raise NotClosedForm(f"round {k}: the ranks of a node reduce "
                                f"{min(reduced)} to {max(reduced)} bytes "
                                "(they do not move in step)")
        total += seconds(tuple(rounds[k].sends for rounds in bases)) \
            + gamma * reduced.pop()
    return Priced(total, len(bases[0]), len(known), name)


def _same_hops(name: str, sends, size: int, platform: Platform) -> None:
    """NotClosedForm if rank 0's own flows across nodes in a round with
    ``sends`` cross different numbers of links (checked on rank 0 before
    every rank's flows are built: the linear all-to-all's are P(P-1))."""
    per_node = platform.ranks_per_node
    dst = np.array([int(peers(name, q, np.array([0]), size)[0])
                    for q, _ in sends], dtype=np.int64) // per_node
    dst = dst[dst != 0]
    if len(dst):
        hops = routes(np.zeros_like(dst), dst, platform.nodes)[1]
        if hops.min() != hops.max():
            raise NotClosedForm(f"its flows cross {hops.min()} to "
                                f"{hops.max()} links (their transfers start "
                                "at different times)")


def node_round_time(src: np.ndarray, dst: np.ndarray, nbytes: int,
                    platform: Platform) -> float:
    """:func:`round_time` of flows between ranks ``src[i] -> dst[i]``
    placed in blocks of ``platform.ranks_per_node`` on the ring's nodes. A
    round whose flows all stay inside nodes takes the loopback's latency
    and ``nbytes`` at its full bandwidth (a FATPIPE: SimGrid does not
    share it); NotClosedForm where a round has flows inside nodes and
    across (they end at different times)."""
    per_node = platform.ranks_per_node
    src, dst = src // per_node, dst // per_node
    inside = src == dst
    if inside.all():
        return platform.intra_latency + nbytes / platform.intra_bandwidth
    if inside.any():
        raise NotClosedForm("a round with flows inside nodes and across "
                            "(they end at different times)")
    return round_time(src, dst, nbytes, platform.nodes, platform.bandwidth,
                      platform.latency)
