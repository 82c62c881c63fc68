"""All-pairs rounds on SimGrid's dragonfly, in a fluid model, by symmetry.

The linear all-to-all posts a flow from every node to every other at
once: ``P (P - 1)`` flows, 4.3·10⁹ at 65,536 ranks, more than a SimGrid
run here holds. On ``dragonfly:G,C,R,N`` (one rank per node, as many
ranks as nodes) such a round looks the same after any relabelling of the
network that SimGrid's routing respects, and the dragonfly has many:

- the ``G`` groups permuted together with the router numbers below ``G``
  of every chassis (router ``j`` of a group's chassis 0 holds its global
  link to group ``j``; a flow to another group goes through router
  ``g2`` of its chassis, then chassis 0, then from router ``g1`` of
  chassis 0 of the target group);
- in each group, the chassis other than 0, and the routers numbered ``G``
  and up (where ``R > G``), permuted among themselves;
- on each router, its ``N`` nodes.

So every flow of one orbit of this group of symmetries gets the same
rate, and every link of one orbit carries the same load: SimGrid's model
(:mod:`mpicoll.sim.simgrid.fluid`) can be followed with one class per orbit of
flows and one kind per orbit of links. An orbit is named by relabelling
each kind of number (groups with low router numbers; each group's
chassis other than 0; each group's high router numbers; each router's
nodes) in order of first appearance (:func:`canonical`); a class's count
is summed over one source node per orbit of nodes, its links read off
one representative's route (:func:`route`, as SimGrid's
``DragonflyZone`` takes it, minimal routing, every link full duplex and
of one bandwidth), and a link of kind ``t`` carries ``count_c · hops_ct /
links_t`` flows of class ``c``. Nothing is approximated beyond the fluid
model itself, which equals SimGrid's own run on small dragonflies
(``tests/serial/test_dragonflyflow.py``).

Cost: one orbit name per destination of each of at most six source
nodes and one per link (``6 P`` and about ``4 P`` names: seconds at
65,536 ranks), then the fluid model over the classes (65 where routers
per chassis are as many as groups, from ``dragonfly:4,4,4,4`` up; 123 on
``dragonfly:4,4,8,4``). Only rounds whose every rank sends one message
of one size to every other rank qualify
(:class:`~mpicoll.sim.simgrid.ringflow.NotClosedForm` otherwise): the linear
all-to-all.
"""

from __future__ import annotations

import math
from collections import Counter
from functools import lru_cache

import numpy as np

from mpicoll.sim.simgrid.fluid import TCP_GAMMA, fluid, rank_rounds
from mpicoll.sim.simgrid.networks import Platform
from mpicoll.sim.simgrid.ringflow import NotClosedForm, Priced

KINDS = ("dragonfly",)


def node_coordinates(node: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """``(group, chassis, router, node)`` of a node, as SimGrid numbers
    them (the node varies fastest)."""
    _, c, r, n = shape
    return node // (c * r * n), node // (r * n) % c, node // n % r, node % n


def route(src: tuple[int, ...], dst: tuple[int, ...]) -> list[tuple]:
    """The directed links a flow from node ``src`` to node ``dst``
    (coordinates) crosses in SimGrid's minimal routing: ``("up", g, c, r,
    n)`` and ``("down", ...)`` between a node and its router, ``("green",
    g, c, r_from, r_to)`` in a chassis, ``("black", g, r, c_from, c_to)``
    between chassis, ``("blue", g_from, g_to)`` between groups. As
    SimGrid's ``DragonflyZone::get_local_route`` does, after a hop between
    two routers of a chassis the route goes on as if from chassis 0 of the
    group: where a flow came over a global link it is there, where it
    stayed in its group it may not be."""
    g1, c1, r1, _ = src
    g2, c2, r2, _ = dst
    links = [("up", *src)]
    if (g1, c1, r1) != (g2, c2, r2):
        g, c, r = g1, c1, r1
        if g1 != g2:
            if r != g2:
                links.append(("green", g, c, r, g2))
                r = g2
            if c != 0:
                links.append(("black", g, r, c, 0))
                c = 0
            links.append(("blue", g1, g2))
            g, r = g2, g1
        if r2 != r:
            links.append(("green", g, c, r, r2))
            c, r = 0, r2
        if c2 != c:
            links.append(("black", g, r, c, c2))
    links.append(("down", *dst))
    return links


class _Names:
    """Numbers renamed in order of first appearance, each set of numbers
    that the symmetries permute (a *domain*) on its own."""

    def __init__(self, groups: int) -> None:
        self.groups, self.seen = groups, {}

    def __call__(self, domain, value: int) -> int:
        names = self.seen.setdefault(domain, {})
        return names.setdefault(value, len(names))

    def group(self, g: int) -> tuple:
        return ("G", self("G", g))  # one domain with the low routers

    def chassis(self, group: tuple, c: int) -> tuple:
        return ("0",) if c == 0 else ("c", self(("c", group), c))

    def router(self, group: tuple, r: int) -> tuple:
        return ("G", self("G", r)) if r < self.groups else \
            ("h", self(("h", group), r))

    def node(self, g: int, c: int, r: int, n: int) -> tuple:
        group = self.group(g)
        where = (group, self.chassis(group, c), self.router(group, r))
        return (*where, self(("n", *where), n))


def canonical(thing: tuple, groups: int) -> tuple:
    """The name of the orbit of a flow (``("flow", src, dst)``, node
    coordinates) or a directed link (:func:`route`'s tuples) under the
    dragonfly's symmetries (module docstring): every number renamed in
    order of first appearance among those it may be permuted with. Two
    flows, or two links, have the same name exactly when a symmetry takes
    one to the other."""
    name, kind = _Names(groups), thing[0]
    if kind == "flow":
        return kind, name.node(*thing[1]), name.node(*thing[2])
    if kind in ("up", "down"):
        return kind, name.node(*thing[1:])
    if kind == "blue":
        return kind, name.group(thing[1]), name.group(thing[2])
    group = name.group(thing[1])
    if kind == "green":  # g, c, r_from, r_to
        return (kind, group, name.chassis(group, thing[2]),
                name.router(group, thing[3]), name.router(group, thing[4]))
    return (kind, group, name.router(group, thing[2]),  # black: g, r, c, c
            name.chassis(group, thing[3]), name.chassis(group, thing[4]))


def links(shape: tuple[int, ...]):
    """Every directed link of ``dragonfly:G,C,R,N``, as :func:`route`
    names them."""
    g_, c_, r_, n_ = shape
    for g in range(g_):
        for c in range(c_):
            for r in range(r_):
                for n in range(n_):
                    yield "up", g, c, r, n
                    yield "down", g, c, r, n
                for q in range(r_):
                    if q != r:
                        yield "green", g, c, r, q
                for d in range(c_):
                    if d != c:
                        yield "black", g, r, c, d
        for h in range(g_):
            if h != g:
                yield "blue", g, h


@lru_cache(maxsize=8)
def all_pairs(shape: tuple[int, ...]):
    """``(flows, load, crossed)`` of the classes of a round from every
    node to every other on ``dragonfly:shape``: flows per class, ``load[c,
    t]`` flows of class ``c`` on each link of kind ``t``, and the links a
    flow of each class crosses."""
    groups = shape[0]
    kinds = Counter(canonical(link, groups) for link in links(shape))
    count: Counter = Counter()
    example: dict = {}
    for first, routers in _router_orbits(shape).values():
        src = node_coordinates(first, shape)
        for other in range(math.prod(shape)):
            if other != first:
                dst = node_coordinates(other, shape)
                key = canonical(("flow", src, dst), groups)
                count[key] += routers * shape[3]  # its orbit's sources
                example.setdefault(key, (src, dst))
    kind_of = {k: i for i, k in enumerate(kinds)}
    per_link = np.array(list(kinds.values()), dtype=float)
    hops = np.zeros((len(count), len(kinds)))
    for c, key in enumerate(count):
        for link in route(*example[key]):
            hops[c, kind_of[canonical(link, groups)]] += 1
    flows = np.array(list(count.values()), dtype=float)
    return flows, flows[:, None] * hops / per_link, hops.sum(axis=1)


def _router_orbits(shape: tuple[int, ...]) -> dict:
    """``{name: (node 0 of its first router, routers)}`` for each orbit
    of routers."""
    orbits: dict = {}
    for node in range(0, math.prod(shape), shape[3]):
        key = canonical(("up", *node_coordinates(node, shape)), shape[0])
        first, routers = orbits.get(key, (node, 0))
        orbits[key] = (first, routers + 1)
    return orbits


def round_time(nbytes: float, shape: tuple[int, ...], bandwidth: float,
               latency: float) -> float:
    """Seconds until the last flow of a round of ``nbytes`` from every
    node of ``dragonfly:shape`` to every other ends (module docstring)."""
    flows, load, crossed = all_pairs(tuple(shape))
    start = crossed * latency
    return fluid(start, TCP_GAMMA / (2 * start), np.full(len(flows),
                                                         float(nbytes)),
                 load, bandwidth)


def predict(collective: str, algorithm: str, size: int, count,
            itemsize: int, platform: Platform, gamma: float,
            **params) -> Priced:
    """What ``algorithm`` takes on ``platform`` (``dragonfly:G,C,R,N``, one
    rank on each node): the sum over its rounds of :func:`round_time`,
    plus γ per byte each round reduces. ValueError for another platform;
    NotClosedForm unless every round with messages has every rank send
    one message of one size to every other (every rank's rounds checked
    up to 64 ranks; beyond, ranks 0, ``size // 2`` and ``size - 1``)."""
    if platform.kind not in KINDS:
        raise ValueError(f"{platform.spec}: this fluid model is for "
                         "dragonfly:G,C,R,N")
    rounds = rank_rounds(collective, algorithm, size, count, itemsize,
                         platform, **params)
    checked = range(size) if size <= 64 else (0, size // 2, size - 1)
    mine = [rounds(r) for r in checked]
    if len({len(other) for other in mine}) > 1:
        raise NotClosedForm("ranks with different numbers of rounds")
    total = 0.0
    for k in range(len(mine[0])):
        sends = [other[k].sends for other in mine]
        sizes = {n for each in sends for _, n in each}
        everyone = all(sorted(q for q, _ in each)
                       == [q for q in range(size) if q != r]
                       for r, each in zip(checked, sends))
        if sizes and not (everyone and len(sizes) == 1):
            raise NotClosedForm(
                f"round {k} does not have every rank send one message of "
                "one size to every other rank (the dragonfly's fluid model "
                "takes all-pairs rounds only)")
        if sizes:
            total += round_time(sizes.pop(), platform.shape,
                                platform.bandwidth, platform.latency)
        total += gamma * mine[0][k].reduce_bytes
    return Priced(total, len(mine[0]), 1, "all-pairs")
