"""Platforms from short specs: the network a simulated collective runs on.

A spec names a topology and its sizes; :func:`parse` turns it into a
:class:`Platform`, :meth:`Platform.xml` into a SimGrid platform file (one
SimGrid ``<cluster>``, wrapped in a ``<zone routing="Full">`` as SimGrid 4.x
requires; every host is one *node*)::

    flat:N                     N nodes on a non-blocking crossbar (ideal: α-β)
    ring:P                     P nodes in a bidirectional ring (TORUS "P")
    torus:AxBxC                a torus of any number of dimensions
    hypercube:d                2**d nodes (TORUS "2,2,...,2")
    fattree:L;d1,..;u1,..;c1,..  SimGrid's FAT_TREE: L levels, down ports
                               and up ports per level, parallel links per
                               level (a level's links carry c times the
                               link bandwidth); prod(d) nodes
    dragonfly:G,C,R,N          G groups of C chassis of R routers with N
                               nodes each (one link per pair of groups,
                               chassis and routers; minimal routing); G <= R

Links: every link has ``bandwidth`` (bytes/s) and ``latency`` (s); they are
full-duplex (SimGrid's SPLITDUPLEX), so a node sends and receives at full
speed at once. A message's latency is the sum over the links it crosses:
on ``flat`` that is the sender's and the receiver's link, so α = 2 ×
``latency``. Defaults: 12.5 GB/s (100 Gb/s) and 0.5 µs per link.

Nodes: ``ranks_per_node`` ranks share a node (ranks are placed in blocks:
rank r on node r // ranks_per_node, the map topology-aware algorithms get
as ``nodes=``). They share the node's links; messages between them cross
the node's loopback link instead (``intra_bandwidth``, ``intra_latency``;
a SimGrid FATPIPE: every such message gets the full intra-node bandwidth).
Defaults: 50 GB/s and 0.2 µs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

_KINDS = ("flat", "ring", "torus", "hypercube", "fattree", "dragonfly")


class PlatformError(ValueError):
    """A platform spec that does not describe a network."""


@dataclass(frozen=True)
class Platform:
    """A parsed spec plus the node size and link speeds."""

    kind: str
    shape: tuple  # flat/ring: (n,); torus: dims; fattree: 4 tuples; dragonfly: 4
    ranks_per_node: int = 1
    bandwidth: float = 12.5e9
    latency: float = 0.5e-6
    intra_bandwidth: float = 50e9
    intra_latency: float = 0.2e-6

    @property
    def nodes(self) -> int:
        """Hosts (nodes) the topology has."""
        if self.kind == "fattree":
            return math.prod(self.shape[1])
        return math.prod(self.shape)

    @property
    def capacity(self) -> int:
        """Ranks the platform holds."""
        return self.nodes * self.ranks_per_node

    def node_map(self, size: int) -> tuple[int, ...]:
        """The node of every one of ``size`` ranks (blocks of ranks per node)."""
        if size > self.capacity:
            raise PlatformError(
                f"{size} ranks do not fit {self.nodes} nodes of "
                f"{self.ranks_per_node} ranks ({self.spec})")
        return tuple(r // self.ranks_per_node for r in range(size))

    @property
    def spec(self) -> str:
        """The spec string this platform parses from."""
        if self.kind == "torus":
            return "torus:" + "x".join(map(str, self.shape))
        if self.kind == "hypercube":
            return f"hypercube:{len(self.shape)}"
        if self.kind == "fattree":
            levels, *lists = self.shape
            return "fattree:" + ";".join(
                [str(levels)] + [",".join(map(str, v)) for v in lists])
        return f"{self.kind}:" + ",".join(map(str, self.shape))

    def topology(self) -> tuple[str | None, str]:
        """SimGrid's cluster ``topology`` and ``topo_parameters``."""
        if self.kind == "flat":
            return None, ""
        if self.kind in ("ring", "torus", "hypercube"):
            return "TORUS", ",".join(map(str, self.shape))
        if self.kind == "fattree":
            levels, *lists = self.shape
            return "FAT_TREE", ";".join(
                [str(levels)] + [",".join(map(str, v)) for v in lists])
        g, c, r, n = self.shape
        return "DRAGONFLY", f"{g},1;{c},1;{r},1;{n}"

    def xml(self, nodes: int | None = None) -> str:
        """The SimGrid platform file. Hosts are ``node0``, ``node1``, ...;
        ``nodes`` (default all) only checks that the topology has enough."""
        if nodes is not None and nodes > self.nodes:
            raise PlatformError(f"{nodes} nodes needed, {self.spec} has "
                                f"{self.nodes}")
        topology, params = self.topology()
        topo = (f' topology="{topology}" topo_parameters="{params}"'
                if topology else "")
        return (
            "<?xml version='1.0'?>\n"
            '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
            '<platform version="4.1">\n'
            '<zone id="world" routing="Full">\n'
            f'  <cluster id="net" prefix="node" suffix="" '
            f'radical="0-{self.nodes - 1}" speed="1f" '
            f'bw="{self.bandwidth!r}Bps" lat="{self.latency!r}s" '
            f'sharing_policy="SPLITDUPLEX" '
            f'loopback_bw="{self.intra_bandwidth!r}Bps" '
            f'loopback_lat="{self.intra_latency!r}s"{topo}/>\n'
            "</zone>\n</platform>\n")


def _ints(text: str, sep: str, what: str, spec: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(sep))
    except ValueError:
        raise PlatformError(f"{spec!r}: {what} must be integers "
                            f"separated by {sep!r}") from None
    if any(v < 1 for v in values):
        raise PlatformError(f"{spec!r}: {what} must be positive")
    return values


def _shape(kind: str, body: str, spec: str) -> tuple:
    if kind in ("flat", "ring"):
        (n,) = _counted(_ints(body, ",", "the node count", spec), 1, spec)
        if kind == "ring" and n < 3:
            raise PlatformError(f"{spec!r}: a ring needs at least 3 nodes")
        return (n,)
    if kind == "torus":
        return _ints(body, "x", "the dimensions (AxBxC)", spec)
    if kind == "hypercube":
        (d,) = _counted(_ints(body, ",", "the dimension", spec), 1, spec)
        return (2,) * d
    if kind == "dragonfly":
        g, c, r, n = _counted(_ints(body, ",", "groups,chassis,routers,nodes",
                                    spec), 4, spec)
        if g > r:
            raise PlatformError(
                f"{spec!r}: SimGrid's dragonfly links each pair of groups "
                f"through distinct routers: groups ({g}) must not exceed "
                f"routers per chassis ({r})")
        return (g, c, r, n)
    parts = body.split(";")
    if len(parts) != 4:
        raise PlatformError(f"{spec!r}: fattree:LEVELS;DOWN;UP;PARALLEL "
                            "(e.g. fattree:2;4,4;1,2;1,2)")
    (levels,) = _counted(_ints(parts[0], ",", "the level count", spec), 1,
                         spec)
    lists = tuple(_counted(_ints(p, ",", what, spec), levels, spec)
                  for p, what in zip(parts[1:], ("down ports", "up ports",
                                                 "parallel links")))
    return (levels, *lists)


def _counted(values: tuple[int, ...], n: int, spec: str) -> tuple[int, ...]:
    if len(values) != n:
        raise PlatformError(f"{spec!r}: expected {n} number"
                            f"{'s' if n > 1 else ''}, got {len(values)}")
    return values


def parse(spec: str, *, ranks_per_node: int = 1, **speeds) -> Platform:
    """The :class:`Platform` of ``spec`` (see the module docstring);
    ``speeds``: ``bandwidth``, ``latency``, ``intra_bandwidth``,
    ``intra_latency`` (bytes/s and seconds). Raises :class:`PlatformError`
    with the reason for a malformed spec."""
    kind, sep, body = spec.strip().partition(":")
    if not sep or kind not in _KINDS:
        raise PlatformError(f"{spec!r}: expected KIND:SIZES with KIND one of "
                            f"{', '.join(_KINDS)}")
    if ranks_per_node < 1:
        raise PlatformError(f"ranks_per_node must be positive, got "
                            f"{ranks_per_node}")
    for name, value in speeds.items():
        if name not in ("bandwidth", "latency", "intra_bandwidth",
                        "intra_latency"):
            raise TypeError(f"parse() got an unexpected keyword {name!r}")
        if not value > 0 or math.isinf(value):
            raise PlatformError(f"{name} must be positive and finite, "
                                f"got {value}")
    return Platform(kind, _shape(kind, body.replace(" ", ""), spec),
                    ranks_per_node, **speeds)
