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

Every rank's rounds are rank 0's relabelled (a shift or an xor of ranks:
:func:`mpicoll.netsim.program.find_symmetry`, which merges a round's
messages to one peer where only that makes them so, as for Bruck's
all-to-all: :attr:`Priced.symmetry` says), so rank 0's schedule gives
every round's flows. Cost: ``O(P log P)`` per distinct round (link loads
by difference arrays, the busiest link of each path by a sparse table;
rounds with the same sends are priced once), so ``log
P``-round algorithms take seconds at 65,536 ranks. Rounds that fail
the checks (the pairwise exchange's xor rounds, whose partners lie at
different distances) need SimGrid. One rank per node only.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mpicoll.coll import lookup
from mpicoll.netsim.platform import Platform
from mpicoll.netsim.program import find_symmetry, peers, sig


class NotClosedForm(ValueError):
    """A round whose max-min shares this module cannot give exactly."""


class Priced(NamedTuple):
    """A schedule priced in closed form."""

    time: float  # seconds
    rounds: int  # rank 0's rounds (every rank's, by symmetry)
    distinct: int  # rounds priced (the others repeat one of them)
    symmetry: str  # find_symmetry's: "shift", "xor", or with "+merged"


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
        raise NotClosedForm("a flow to its own node (one rank per node only)")
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
    """What ``algorithm`` takes on ``platform`` (a ``ring:P`` with one
    rank per node): the sum over rank 0's rounds of :func:`round_time` of
    every rank's flows of the round, all together, plus γ per byte the
    round reduces. ValueError if
    the schedules are not symmetric or the platform is not a ring;
    NotClosedForm where a round is not in closed form."""
    if platform.kind != "ring" or platform.ranks_per_node != 1:
        raise ValueError(f"{platform.spec}: the closed form is for ring:P "
                         "with one rank per node")
    platform.node_map(size)  # PlatformError if the ranks do not fit
    nodes = tuple(range(size))
    alg = lookup(collective, algorithm)
    name, rounds = find_symmetry(
        lambda r: sig(alg.schedule(r, size, count, nodes=nodes, **params),
                      itemsize), size)
    ranks = np.arange(size)
    known: dict = {}  # rank 0's sends of a round: seconds

    def seconds(sends: tuple) -> float:
        """Every rank's flows of a round whose sends, seen from rank 0,
        are ``sends``: all of them at once (they share links)."""
        if not sends:
            return 0.0
        if sends not in known:
            sizes = {n for _, n in sends}
            if len(sizes) > 1:
                raise NotClosedForm(f"a round's messages carry {min(sizes)}"
                                    f" to {max(sizes)} bytes")
            dst = np.concatenate([peers(name, q, ranks, size)
                                  for q, _ in sends])
            known[sends] = round_time(np.tile(ranks, len(sends)), dst,
                                      sizes.pop(), platform.nodes,
                                      platform.bandwidth, platform.latency)
        return known[sends]

    total = sum(seconds(rnd.sends) + gamma * rnd.reduce_bytes
                for rnd in rounds)
    return Priced(total, len(rounds), len(known), name)
