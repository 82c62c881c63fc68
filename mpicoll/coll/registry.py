"""The algorithm registry: every algorithm of every collective, with its limits.

An :class:`Algorithm` is a name, a schedule builder and the constraints it
declares. ``"native"`` is registered for every collective like any other
algorithm; it has no builder (the MPI layer calls the library instead).
Selection asks :meth:`Algorithm.unmet` before any message moves.

Builders are pure functions ``build(rank, size, count, **params)``
returning a :class:`~mpicoll.schedule.core.Schedule`. What a collective is
comes from its row in :data:`mpicoll.collectives.COLLECTIVES`: rooted
collectives' builders also get ``root=``; reducing collectives' builders
get ``commutative=`` (an order-keeping schedule may differ from the fastest
one). ``count`` comes as the row's ``counts`` shapes it
(:mod:`mpicoll.schedule.layout`): per-rank counts and alltoallv's matrix
as tuples. One builder may serve a collective and its form with per-rank
counts (reduce_scatter_block and reduce_scatter, allgather and allgatherv,
gather and gatherv, scatter and scatterv, alltoall and alltoallv):
registered for both, it is written for the wider shape and gets every
call's ``count`` in it, the equal-blocks collective's ``count`` turned
into ``(count,) * p`` (per-rank counts) or ``((count,) * p,) * p`` (the
matrix), so the builder and its docstring exist once. Topology-aware builders
(registered with ``topology=True``) also get ``nodes=``, the node of every
rank (:func:`~mpicoll.topo.canonical_nodes`: a tuple, nodes numbered in
order of their lowest rank; one node when the caller has no map);
builders registered with ``cartesian=True`` also get ``dims=``, the
dimensions of the caller's Cartesian communicator (``Get_topo``, MPI's
order: the last coordinate varies fastest), or of the grid a simulation
names, None when there are none. Schedules are cached per argument tuple.

An algorithm that runs two collectives one after the other (van de Geijn's
broadcast: a scatter, then an allgather) may declare them (``phases=``, a
function of ``(size, count, root=, **params)`` returning its
:class:`Phase` list, or None where the schedule is not their
concatenation): its schedule then sends exactly their messages, phase after
phase, up to empty rounds (tested), which lets the network simulator take
each phase with its own shortcuts (the allgather's symmetry) where the
whole schedule has none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import import_module
import itertools
from typing import Callable, NamedTuple
from collections.abc import Mapping

from mpicoll.collectives import COLLECTIVES
from mpicoll.schedule.core import Schedule
from mpicoll.topo import canonical_nodes


class Phase(NamedTuple):
    """One registered collective's algorithm that a composed algorithm
    runs (:attr:`Algorithm.phases`), with its count and parameters."""

    collective: str
    algorithm: str
    count: object
    params: Mapping[str, object]

    @property
    def rooted(self) -> bool:
        """Whether the phase's collective has a root (which breaks every
        relabelling of ranks the simulator's symmetry looks for)."""
        return COLLECTIVES[self.collective].rooted


@dataclass(frozen=True, eq=False)  # registry singletons: hash by identity
class Algorithm:
    collective: str
    name: str
    build: Callable[..., Schedule] | None  # None: the MPI library's own call
    commutative_only: bool = False
    params: Mapping[str, object] = field(default_factory=dict)
    topology: bool = False  # the builder takes nodes= (which rank is where)
    # the builder's count where it serves the per-rank form too (module
    # doc): "per_rank" or "matrix"; None: the collective's own
    takes: str | None = None
    cartesian: bool = False  # the builder takes dims= (a Cartesian grid)
    phases: Callable[..., list[Phase] | None] | None = None  # see module doc

    @property
    def native(self) -> bool:
        return self.build is None

    @property
    def summary(self) -> str:
        """First line of the builder's docstring."""
        if self.build is None:
            return "the MPI library's own implementation"
        return (self.build.__doc__ or "").strip().splitlines()[0]

    def unmet(self, *, commutative: bool = True) -> str | None:
        """Why this algorithm cannot run for these arguments, or None."""
        if self.commutative_only and not commutative:
            return "needs a commutative operation"
        return None

    def schedule(self, rank: int, size: int, count, *, root: int = 0,
                 commutative: bool = True, nodes=None, dims=None,
                 cached: bool = True, **params) -> Schedule:
        """The schedule of ``rank``; ``params`` override defaults.

        ``nodes`` (the node of every rank, None: one node) reaches
        topology-aware builders only, ``dims`` (a Cartesian grid's
        dimensions, None: none) Cartesian ones only; the others run the
        same everywhere. ``cached``: keep it in the registry's cache of
        4,096 schedules, for the MPI layer's repeated calls; False builds
        it afresh and keeps nothing, for a caller that builds each rank's
        once (the network simulator, whose thousands of ranks' schedules
        the cache would otherwise hold: gigabytes at 4,096 ranks).
        """
        merged = tuple(sorted({**self.params, **params}.items()))
        shape = COLLECTIVES[self.collective].counts
        if shape == "per_rank":
            count = tuple(count)
        elif shape == "matrix":
            count = tuple(map(tuple, count))
        nodes = canonical_nodes(nodes, size) if self.topology else None
        dims = tuple(dims) if self.cartesian and dims is not None else None
        build = _build if cached else _build.__wrapped__
        return build(self, rank, size, count, root, commutative, nodes, dims,
                     merged)

    def phases_of(self, size: int, count, *, root: int = 0, nodes=None,
                  dims=None, **params) -> list[Phase] | None:
        """The collectives this algorithm's schedule runs one after the
        other for these arguments (``params`` override defaults), or None:
        none declared, or the schedule is not their concatenation here.
        ``nodes`` and ``dims`` are taken as :meth:`schedule` takes them;
        no algorithm that declares phases reads them."""
        if self.phases is None:
            return None
        return self.phases(size, count, root=root,
                           **{**self.params, **params})


def _widened(alg: Algorithm, size: int, count):
    """``count`` as ``alg``'s builder takes it: an equal-blocks collective's
    ``count`` as the per-rank tuple or the matrix where the builder serves
    the per-rank form too (:attr:`Algorithm.takes`); any other as it is."""
    if alg.takes is None or COLLECTIVES[alg.collective].counts != "block":
        return count
    row = (count,) * size
    return row if alg.takes == "per_rank" else (row,) * size


@lru_cache(maxsize=4096)
def _build(alg: Algorithm, rank, size, count, root, commutative, nodes,
           dims, params) -> Schedule:
    count = _widened(alg, size, count)  # after the cache: a cheap key
    kwargs = dict(params)
    row = COLLECTIVES[alg.collective]
    if row.rooted:
        kwargs["root"] = root
    if row.reducing:
        kwargs["commutative"] = commutative
    if alg.topology:
        kwargs["nodes"] = nodes
    if alg.cartesian:
        kwargs["dims"] = dims
    return alg.build(rank, size, count, **kwargs)


_REGISTRY: dict[str, dict[str, Algorithm]] = {
    c: {"native": Algorithm(c, "native", None)} for c in COLLECTIVES
}
#: The modules of mpicoll.coll whose import registers the hand-built
#: algorithms: imported the first time any algorithm but ``native`` is
#: asked for, so that a program whose calls all run natively loads none.
BUILDERS = ("allgather", "allreduce", "alltoall", "barrier", "bcast",
            "gather", "hierarchical", "hierarchical_alltoall", "reduce",
            "reduce_scatter", "scan", "scatter", "torus")
_loaded = False
#: (collective, name) -> (its module's place in BUILDERS, registration
#: count): the order algorithms() lists, whatever order modules load in.
_ORDER: dict[tuple[str, str], tuple[int, int]] = {}
_registered = itertools.count()


def _load_builders() -> None:
    """Import :data:`BUILDERS` once (their imports register them), then
    list each collective's algorithms in :data:`_ORDER`."""
    global _loaded
    if not _loaded:
        for module in BUILDERS:
            import_module(f"mpicoll.coll.{module}")
        for collective, algs in _REGISTRY.items():
            _REGISTRY[collective] = dict(sorted(
                algs.items(),
                key=lambda item: _ORDER.get((collective, item[0]), (-1, 0))))
        _loaded = True


def register(collectives, name: str, *, commutative_only: bool = False,
             topology: bool = False, cartesian: bool = False, phases=None,
             **params):
    """Decorator: register a builder under ``name`` for one or more
    collectives (a collective and its form with per-rank counts: the
    builder then takes the wider ``count``); ``topology=True`` for builders
    that take ``nodes=``, ``cartesian=True`` for those that take ``dims=``,
    ``phases`` for those that run registered collectives one after the
    other (all in the module docstring)."""
    if isinstance(collectives, str):
        collectives = (collectives,)
    shapes = {COLLECTIVES[c].counts for c in collectives}
    takes = next((s for s in ("matrix", "per_rank") if s in shapes), None)

    def deco(build):
        module = build.__module__.rpartition(".")[2]
        place = BUILDERS.index(module) if module in BUILDERS else len(BUILDERS)
        for c in collectives:
            if name in _REGISTRY[c]:
                raise ValueError(f"{c} algorithm {name!r} registered twice")
            _ORDER[c, name] = (place, next(_registered))
            _REGISTRY[c][name] = Algorithm(
                c, name, build, commutative_only, dict(params), topology,
                takes, cartesian, phases
            )
        return build

    return deco


def algorithms(collective: str) -> list[str]:
    """Names of the algorithms available for ``collective``, ``"native"`` first."""
    _load_builders()
    return list(_REGISTRY[collective])


def lookup(collective: str, name: str) -> Algorithm | None:
    """``collective``'s algorithm ``name``, None if there is none."""
    if name != "native":
        _load_builders()
    return _REGISTRY.get(collective, {}).get(name)
