"""SimGrid's sharing of links, followed class by class (a fluid model).

SimGrid's network model (with its correction factors off,
:data:`mpicoll.sim.simgrid.driver.EXACT`) gives a flow over ``H`` links of
latency ``L`` nothing for ``H·L`` seconds, then a rate: the flows on the
links share each link's bandwidth max-min fairly (``maxmin`` system),
each at most ``network/TCP-gamma / (2 H L)`` (:data:`TCP_GAMMA`, its TCP
window over the path's round trip), recomputed whenever a flow starts or
ends. Where a round's flows fall into *classes* whose flows behave alike
and links into *kinds* whose links carry alike (by a symmetry of the
network and of the round: :mod:`mpicoll.sim.simgrid.torusflow` on tori,
:mod:`mpicoll.sim.simgrid.dragonflyflow` on dragonflies), :func:`fluid` follows
that model with one number per class: ``O(K T)`` per event for ``K``
classes and ``T`` link kinds, about ``2K`` events.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from mpicoll.coll import lookup
from mpicoll.sim.simgrid.networks import Platform
from mpicoll.sim.simgrid.program import Sig, sig

TCP_GAMMA = 4194304.0  # bytes: SimGrid's network/TCP-gamma default


def rank_rounds(collective: str, algorithm: str, size: int, count,
                itemsize: int, platform: Platform,
                **params) -> Callable[[int], tuple[Sig, ...]]:
    """Rank ``r``'s rounds (:func:`~mpicoll.sim.simgrid.program.sig`) of
    ``algorithm`` as a function of ``r``, once ``platform`` is checked to
    hold one rank on each of its nodes, as these models take them
    (ValueError if not)."""
    if platform.ranks_per_node != 1 or size != platform.nodes:
        raise ValueError(f"{platform.spec}: the fluid model takes one rank "
                         f"on each of its {platform.nodes} nodes")
    alg = lookup(collective, algorithm)

    def rounds(r: int) -> tuple[Sig, ...]:
        return sig(alg.schedule(r, size, count, cached=False, **params),
                   itemsize)

    return rounds


def fluid(start, bound, size, load, bandwidth: float) -> float:
    """The last end of classes that start at ``start``, move ``size``
    bytes per flow at most at ``bound`` each, with ``load[c, t]`` flows on
    every link of kind ``t`` per flow of class ``c`` (max-min fair shares
    of ``bandwidth``, recomputed at every start and end)."""
    order = np.argsort(bound, kind="stable")  # for water-filling by bounds
    start, bound, size, load = start[order], bound[order], size[order], \
        load[order]
    left = size.astype(float)
    done = left <= 0
    t = 0.0
    starts = np.unique(start)
    ends_at = 0.0
    while not done.all():
        running = ~done & (start <= t * (1 + 1e-12))
        later = starts[starts > t * (1 + 1e-12)]
        nxt = later[0] if len(later) else math.inf
        if not running.any():
            t = nxt
            continue
        idx = np.flatnonzero(running)
        rate = _shares(bound[idx], load[idx], bandwidth)
        live = rate > 0
        step = min(nxt - t, float((left[idx[live]] / rate[live]).min()))
        left[idx] -= rate * step
        t += step
        finished = running & (left <= size * 1e-9)
        done |= finished
        if finished.any():
            ends_at = t
    return ends_at


def _shares(bound, load, bandwidth: float) -> np.ndarray:
    """Max-min fair rates per flow of classes (sorted by ``bound``), each
    at most its bound: water-filling one link kind at a time, the kind
    that fills at the lowest level first."""
    rate = np.zeros(len(bound))
    free = np.arange(len(bound))
    used = np.zeros(load.shape[1])
    while len(free):
        mine = load[free]
        best, kind = math.inf, -1
        for k in np.flatnonzero(mine.sum(axis=0) > 0):
            level = _level(bound[free], mine[:, k], bandwidth - used[k])
            if level < best:
                best, kind = level, k
        fixed = bound[free] <= best
        if kind >= 0:
            fixed |= mine[:, kind] > 0
        now = free[fixed]
        rate[now] = np.minimum(bound[now], best)
        used += (mine[fixed] * rate[now, None]).sum(axis=0)
        free = free[~fixed]
    return rate


def _level(bound: np.ndarray, load: np.ndarray, capacity: float) -> float:
    """The water level ``x`` with ``sum(load · min(x, bound)) = capacity``
    (``bound`` increasing); inf if the bounds fill less than it."""
    mine = load > 0
    bound, load = bound[mine], load[mine]
    below = np.concatenate([[0.0], np.cumsum(load * bound)])  # sum under u_j
    above = np.concatenate([np.cumsum(load[::-1])[::-1], [0.0]])  # from j on
    filled = below[:-1] + bound * above[:-1]  # at x = bound[j]
    j = int(np.searchsorted(filled, capacity))
    if j >= len(bound):
        return math.inf
    return float((capacity - below[j]) / above[j])
