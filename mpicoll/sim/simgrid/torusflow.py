"""Rounds a torus's translations leave unchanged, in a fluid model of SimGrid.

The linear all-to-all posts ``P (P - 1)`` flows at once: at 65,536 ranks
4.3·10⁹, which no SimGrid run here can hold. On ``ring:P``,
``torus:AxBxC`` and ``hypercube:d`` with one rank per node, such a round
is the same seen from every node: moving every flow by a translation of
the torus (``x -> x + t`` in every coordinate) gives the same set of
flows. Then every flow with the same *displacement* (destination minus
source, coordinate by coordinate) behaves alike, and every link of one
dimension and direction carries the same load, so SimGrid's model can be
followed with one number per displacement instead of one per flow:

- **routes** as SimGrid's ``TorusZone`` takes them, a dimension at a
  time, each the way :func:`mpicoll.sim.simgrid.ringflow.routes` goes round
  one ring (a flow crosses ``h_d`` links of dimension ``d``, clockwise or
  not); the order of the dimensions does not change any link's load;
- **classes**: a displacement ``δ`` is one class of ``P`` flows, except
  where ``δ_d`` is half of an even dimension ``n_d >= 4``: there the flows
  from coordinate ``n_d / 2`` go anticlockwise and the others clockwise,
  two classes (``1/n_d`` and ``1 - 1/n_d`` of the flows). Their loads are
  not the same on every link: half the links of the dimension carry one
  flow of the class more than the others, the one place where this
  module approximates. ``busiest=True`` (the default) loads every link
  as those do (weights ``2/n_d`` and 1), which is exact on a ring (its
  busiest links decide); ``busiest=False`` spreads the flows evenly. On
  tori the two bracket SimGrid's time (measured in
  ``tests/serial/test_torusflow.py`` and docs/simulation.md). Dimensions of
  2 (the hypercube) have no such flows: by translation half go each way,
  on links that carry the same;
- **links** (``SPLITDUPLEX``, :mod:`mpicoll.sim.simgrid.networks`): a link of
  dimension ``d`` and one direction carries ``weight · h_d`` flows of a
  class (on a dimension of 2 the flows from coordinate 0 take one
  direction of a pair's link and those from 1 the other: one kind);
- **time**: a flow over ``H`` links waits ``H × latency``, then shares
  the links' bandwidth max-min fairly (SimGrid's ``maxmin`` system with
  the model's correction factors off, :data:`mpicoll.sim.simgrid.driver.EXACT`),
  at most ``network/TCP-gamma / (2 H latency)`` (:data:`TCP_GAMMA`, which
  :mod:`mpicoll.sim.simgrid.driver` leaves on). :func:`round_time` steps from
  one event (a class starting or ending) to the next, water-filling the
  rates at each: ``O(K T)`` per event for ``K`` classes and ``T``
  directed link kinds, about ``2K`` events. A round ends with its last
  flow; every rank then starts the next at once, after reducing its bytes
  at γ per byte, as the SimGrid replay charges.

A round qualifies when it is every rank's round relabelled by a
translation: an xor of ranks on ``hypercube:d``, a shift on ``ring:P``,
or any round whose ranks each send one message of the same size to every
other (the linear all-to-all); otherwise all ranks' peers are checked
(up to 2²⁴ flows) and :class:`NotClosedForm` raised where it fails.
Multi-round schedules take the sum of their rounds (each one distinct
round priced once). On a ring, a schedule with a root whose one round's
flows all leave or all reach the root (the linear broadcast, scatter,
gather) is priced as a fan (:func:`fan_time`).
"""

from __future__ import annotations

import numpy as np

from mpicoll.sim.simgrid import dragonflyflow, ringflow
from mpicoll.sim.simgrid.fluid import TCP_GAMMA, fluid, rank_rounds
from mpicoll.sim.simgrid.networks import Platform
from mpicoll.sim.simgrid.ringflow import NotClosedForm, Priced
from mpicoll.sim.simgrid.base_rank import find_symmetry, peers

CHECKED_FLOWS = 1 << 24  # flows whose invariance is checked one by one
KINDS = ("ring", "torus", "hypercube")
CLOSED_FORM_KINDS = (*KINDS, *dragonflyflow.KINDS)  # what closed_form takes


def torus_shape(platform: Platform) -> tuple[int, ...]:
    """The torus's dimensions, SimGrid's first (the fastest-varying
    coordinate of a node's number) first."""
    if platform.kind not in KINDS:
        raise ValueError(f"{platform.spec}: the fluid model is for ring:P, "
                         "torus:AxB.. and hypercube:d")
    return tuple(platform.shape)


def even_sided(platform: Platform) -> bool:
    """Whether a round here may carry half-way flows whose loads are taken
    as on the busiest links (module docstring): a torus of two or more
    dimensions with a side of even length 4 or more (on a ring the
    busiest links' load is exact, on a hypercube there are none)."""
    return platform.kind == "torus" and len(platform.shape) > 1 and any(
        n >= 4 and n % 2 == 0 for n in platform.shape)


def coordinates(nodes: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Each node's coordinates (one row per node), as SimGrid numbers them."""
    out, stride = [], 1
    for n in shape:
        out.append(nodes // stride % n)
        stride *= n
    return np.stack(out, axis=-1)


def classes(displacements: np.ndarray, nbytes: np.ndarray,
            shape: tuple[int, ...], busiest: bool = True):
    """``(weight, hops, nbytes)`` of the flow classes of a translation-
    invariant round whose node-0 flows have ``displacements`` (rows of
    coordinates) and ``nbytes``: ``weight`` the fraction of the ``P``
    flows of its displacement (or, for the links' loads, of ``busiest``
    links: module docstring), ``hops`` (one column per directed link
    kind: dimension ``d`` clockwise at ``2d``, anticlockwise at ``2d +
    1``) the flows each link of that kind carries per flow of the
    class."""
    weight = np.ones(len(displacements))
    hops = np.zeros((len(displacements), 2 * len(shape)))
    rows = np.arange(len(displacements))
    for d, n in enumerate(shape):
        delta = displacements[:, d]
        if n == 2:  # half each way: one kind of link (module docstring)
            hops[:, 2 * d] = delta
            continue
        half = n % 2 == 0 and n // 2
        hops[:, 2 * d] = np.where(delta <= (n - 1) // 2, delta, 0)
        hops[:, 2 * d + 1] = np.where(delta > n // 2, n - delta, 0)
        split = np.flatnonzero(delta == half) if half else []
        if len(split):  # from coordinate n/2 anticlockwise, else clockwise
            rows = np.concatenate([rows, rows[split]])
            cw, ccw = (1, 2 / n) if busiest else (1 - 1 / n, 1 / n)
            weight = np.concatenate([weight * np.where(delta == half, cw, 1),
                                     weight[split] * ccw])
            extra = hops[split].copy()
            hops[split, 2 * d] = half
            extra[:, 2 * d + 1] = half
            hops = np.concatenate([hops, extra])
            displacements = displacements[np.concatenate(
                [np.arange(len(displacements)), split])]
    return weight, hops, nbytes[rows]


def round_time(displacements: np.ndarray, nbytes: np.ndarray,
               shape: tuple[int, ...], bandwidth: float, latency: float,
               busiest: bool = True) -> float:
    """Seconds until the last flow of a translation-invariant round ends
    (module docstring): node 0's flows have ``displacements`` (rows of
    coordinates, none all zero) and ``nbytes``."""
    weight, hops, size = classes(displacements, np.asarray(nbytes, float),
                                 shape, busiest)
    crossed = hops.sum(axis=1)  # links each flow of a class crosses
    if crossed.min() < 1:
        raise NotClosedForm("a flow to its own node")
    start = crossed * latency
    return fluid(start, TCP_GAMMA / (2 * start), size,
                 weight[:, None] * hops, bandwidth)


def invariant_round(name: str, sends, size: int,
                    shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """``(displacements, nbytes)`` of node 0's flows of a round whose base
    (rank 0) ``sends`` ``(peer, bytes)`` and whose other ranks' are
    relabelled by the symmetry ``name`` (:func:`find_symmetry`'s);
    NotClosedForm unless every rank's flows are node 0's translated."""
    relative = np.array([q for q, _ in sends], dtype=np.int64)
    nbytes = np.array([n for _, n in sends], dtype=np.int64)
    moved = coordinates(relative, shape)
    everyone = (len(set(relative.tolist())) == size - 1 and 0 not in relative
                and len(set(nbytes.tolist())) == 1)
    if (everyone or (name.startswith("xor") and set(shape) == {2})
            or (name.startswith("shift") and len(shape) == 1)):
        return moved, nbytes
    if size * len(sends) > CHECKED_FLOWS:
        raise NotClosedForm(f"a round whose flows are not checked to be the "
                            f"same from every node ({name}, "
                            f"{size * len(sends)} flows)")
    ranks = np.arange(size)
    here = coordinates(ranks, shape)
    for q, m in zip(relative.tolist(), moved):
        there = coordinates(peers(name, q, ranks, size), shape)
        if not ((there - here) % np.array(shape) == m).all():
            raise NotClosedForm(f"a round whose flows differ from node to "
                                f"node (peer {q} of rank 0 under {name})")
    return moved, nbytes


def predict(collective: str, algorithm: str, size: int, count,
            itemsize: int, platform: Platform, gamma: float,
            busiest: bool = True, **params) -> Priced:
    """What ``algorithm`` takes on ``platform`` (``ring:P``, ``torus:..``
    or ``hypercube:d``, one rank per node, as many ranks as nodes): the
    sum over its rounds of :func:`round_time`, plus γ per byte each round
    reduces. ValueError if the platform is not one of those or the
    schedules are not symmetric; NotClosedForm where a round is not
    translation-invariant."""
    shape = torus_shape(platform)
    rank_sig = rank_rounds(collective, algorithm, size, count, itemsize,
                           platform, **params)
    try:
        name, bases = find_symmetry(rank_sig, size)
    except ValueError:
        if platform.kind != "ring":
            raise
        return _rooted([rank_sig(r) for r in range(size)], platform, gamma)
    known: dict = {}
    total = 0.0
    for rnd in bases[0]:
        if rnd.sends not in known:
            known[rnd.sends] = round_time(
                *invariant_round(name, rnd.sends, size, shape), shape,
                platform.bandwidth, platform.latency, busiest) \
                if rnd.sends else 0.0
        total += known[rnd.sends] + gamma * rnd.reduce_bytes
    return Priced(total, len(bases[0]), len(known), name)


def fan_time(root: int, others: np.ndarray, nbytes: np.ndarray,
             outward: bool, size: int, bandwidth: float,
             latency: float) -> float:
    """Seconds until the last flow between node ``root`` and each of
    ``others`` (``nbytes`` each, from the root if ``outward``, else to
    it) ends on ``ring:size``. Every flow that leaves the root clockwise
    crosses the root's clockwise link first, so any other link of that
    way carries some of the same flows: the root's two links alone set
    the max-min shares (the last two, inward), and the flows, each
    starting after its path's latency and at most at its TCP window
    bound, are :func:`~mpicoll.sim.simgrid.fluid.fluid`'s classes of one flow each."""
    src, dst = (np.full(len(others), root), others) if outward else \
        (others, np.full(len(others), root))
    clockwise, hops = ringflow.routes(src, dst, size)
    start = hops * latency
    load = np.stack([clockwise, ~clockwise], axis=1).astype(float)
    return fluid(start, TCP_GAMMA / (2 * start), nbytes.astype(float),
                  load, bandwidth)


def _rooted(sigs, platform: Platform, gamma: float) -> Priced:
    """A schedule with a root on ``ring:P``: one round of flows that all
    leave the root or all reach it (the linear broadcast, scatter and
    gather), by :func:`fan_time`, plus γ per byte of the most any rank
    reduces; NotClosedForm for any other (the linear reduce, whose root
    receives round by round)."""
    flows = [(r, q, n) for r, rounds in enumerate(sigs) for rnd in rounds
             for q, n in rnd.sends]
    for r, rounds in enumerate(sigs):
        if sum(bool(rnd.sends or rnd.recvs) for rnd in rounds) > 1:
            raise NotClosedForm(f"rank {r} has messages in several rounds "
                                "(not symmetric: only one round of flows "
                                "from or to a root is priced)")
    src, dst, nbytes = np.array(flows, dtype=np.int64).reshape(-1, 3).T
    if len(src) and (src == src[0]).all():
        outward, root, others = True, int(src[0]), dst
    elif len(dst) and (dst == dst[0]).all():
        outward, root, others = False, int(dst[0]), src
    else:
        raise NotClosedForm("a round whose flows do not all leave or all "
                            "reach one rank (not symmetric)")
    time = fan_time(root, others, nbytes, outward, platform.nodes,
                    platform.bandwidth, platform.latency)
    reduced = max(sum(rnd.reduce_bytes for rnd in rounds) for rounds in sigs)
    return Priced(time + gamma * reduced, 1, 1, "rooted")


def closed_form(collective: str, algorithm: str, size: int, count,
                itemsize: int, platform: Platform, gamma: float,
                busiest: bool = True, **params) -> Priced:
    """``python -m mpicoll.simulate --model closed-form``: on ``ring:P``
    :func:`mpicoll.sim.simgrid.ringflow.predict` (rounds whose flows cross as
    many links, any ranks per node), and where it cannot price a round
    with one rank per node, or on a torus or hypercube, :func:`predict`
    (with ``busiest``); on ``dragonfly:G,C,R,N``
    :func:`mpicoll.sim.simgrid.dragonflyflow.predict` (all-pairs rounds)."""
    if platform.kind == "dragonfly":
        return dragonflyflow.predict(collective, algorithm, size, count,
                                     itemsize, platform, gamma, **params)
    if platform.kind == "ring":
        try:
            return ringflow.predict(collective, algorithm, size, count,
                                    itemsize, platform, gamma, **params)
        except ValueError:  # NotClosedForm, or not symmetric
            if platform.ranks_per_node != 1:
                raise
    return predict(collective, algorithm, size, count, itemsize, platform,
                   gamma, busiest, **params)
