"""Named meshes of ranks: ``mpicoll.Mesh``, like torch's ``DeviceMesh``.

A mesh arranges the ranks of a communicator in an n-dimensional array with
a name per dimension, row-major with the last dimension fastest (MPI's
Cartesian order), so ranks that differ only in the last coordinate are
consecutive: put the dimension that talks most (tensor parallelism) last
and it stays inside a node::

    mesh = mpicoll.Mesh(comm, shape=(2, 2, 2), names=("dp", "pp", "tp"))
    mesh.coords                  # Coords(dp=1, pp=0, tp=1) on rank 5
    mesh["tp"].all_reduce(x)     # the Comm along one dimension
    mesh.sub(("dp", "pp"))       # the Comm spanning several
    mesh.rank_at((1, 1, 0))      # 6: the rank at those coordinates
    mesh.shift("pp", 1)          # (source, dest): neighbours along pp

The mesh is ``Create_cart`` (``reorder=False``: ranks keep their numbers)
with ``Sub`` per dimension. :class:`Layout` is the same arrangement as pure
arithmetic, which ``python -m mpicoll.mesh`` prints without MPI::

    python -m mpicoll.mesh --shape 2,2,2 --names dp,pp,tp [--size N]
"""

from __future__ import annotations

import argparse
import keyword
import math
from collections import namedtuple
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import product

from mpi4py import MPI

from mpicoll.api.comm import Comm
from mpicoll.api.process_group import ProcessGroup
from mpicoll.errors import InvalidArgumentError, spans


@dataclass(frozen=True)
class Layout:
    """A mesh as arithmetic: ``shape``, ``names`` and ``periods`` (one per
    dimension), ranks numbered row-major with the last dimension fastest.
    Build one with :meth:`resolve`, which checks the description."""

    shape: tuple[int, ...]
    names: tuple[str, ...]
    periods: tuple[bool, ...]

    @classmethod
    def resolve(cls, size: int, shape, names=None, periods=False) -> Layout:
        """The layout of ``size`` ranks as ``shape`` (one entry may be -1:
        inferred, as in NumPy), named ``names`` (default ``dim0``,
        ``dim1``, ...), periodic where ``periods`` (one bool, or one per
        dimension). Raises ValueError saying what is wrong."""
        shape = _ints(shape, "shape")
        if not shape or any(n < 1 and n != -1 for n in shape) \
                or shape.count(-1) > 1:
            raise ValueError(f"shape {shape} must be positive sizes, with at "
                             f"most one -1 (inferred)")
        known = math.prod(n for n in shape if n != -1)
        if -1 in shape:
            if size % known:
                raise ValueError(f"shape {shape} cannot hold {size} ranks: "
                                 f"{size} is not a multiple of {known}")
            shape = tuple(size // known if n == -1 else n for n in shape)
        elif known != size:
            raise ValueError(f"shape {shape} holds {known} ranks, the "
                             f"communicator {size}")
        ndim = len(shape)
        if names is None:
            names = tuple(f"dim{i}" for i in range(ndim))
        elif isinstance(names, str):
            names = (names,)
        names = tuple(names)
        if len(names) != ndim or len(set(names)) != ndim or not all(
                isinstance(n, str) and n.isidentifier() and n[0] != "_"
                and not keyword.iskeyword(n) for n in names):
            raise ValueError(f"names {names} must be {ndim} distinct "
                             f"identifiers (not starting with _), one per "
                             f"dimension of shape {shape}")
        if isinstance(periods, bool):
            periods = (periods,) * ndim
        periods = tuple(periods)
        if len(periods) != ndim or not all(isinstance(p, bool)
                                           for p in periods):
            raise ValueError(f"periods {periods} must be one bool, or {ndim} "
                             f"bools")
        return cls(shape, names, periods)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def coords(self, rank: int) -> tuple[int, ...]:
        """The coordinates of ``rank``."""
        out = []
        for n in reversed(self.shape):
            rank, c = divmod(rank, n)
            out.append(c)
        return tuple(reversed(out))

    def rank(self, coords) -> int:
        """The rank at ``coords`` (each within its dimension)."""
        rank = 0
        for n, c in zip(self.shape, coords):
            rank = rank * n + c
        return rank

    def group(self, rank: int, names) -> tuple[int, ...]:
        """The ranks that share ``rank``'s coordinates outside the
        dimensions ``names``: its group along them, in the order of their
        ``Comm`` (row-major over those dimensions)."""
        dims = [self.names.index(n) for n in names]
        mine = self.coords(rank)
        out = []
        for picked in product(*(range(self.shape[d]) for d in dims)):
            coords = list(mine)
            for d, c in zip(dims, picked):
                coords[d] = c
            out.append(self.rank(coords))
        return tuple(out)

    def describe(self) -> str:
        """Every rank's coordinates and group along each dimension: the
        table ``python -m mpicoll.mesh`` prints."""
        head = ["rank", *self.names, *(f"{n} group" for n in self.names)]
        rows = [[str(r), *map(str, self.coords(r)),
                 *(",".join(map(str, self.group(r, (n,))))
                   for n in self.names)] for r in range(self.size)]
        widths = [max(len(row[i]) for row in [head, *rows])
                  for i in range(len(head))]
        shape = " x ".join(f"{n}={s}" for n, s in zip(self.names, self.shape))
        lines = [f"mesh {shape} on {self.size} ranks, row-major: "
                 f"{self.names[-1]} varies fastest"]
        for row in [head, *rows]:
            lines.append("  ".join(cell.rjust(w) if i <= len(self.names)
                                   else cell.ljust(w)
                                   for i, (cell, w) in
                                   enumerate(zip(row, widths))).rstrip())
        return "\n".join(lines)


def _ints(seq, what) -> tuple[int, ...]:
    items = (seq,) if isinstance(seq, int) else seq
    try:
        out = tuple(items)
    except TypeError:
        out = None
    if out is None or not all(isinstance(n, int) and not isinstance(n, bool)
                              for n in out):
        raise ValueError(f"{what} {seq!r} must be a sequence of ints")
    return out


class Mesh:
    """The ranks of ``comm`` (an ``MPI.Intracomm`` or ``mpicoll.Comm``,
    default ``MPI.COMM_WORLD``) as an array of ``shape`` with named
    dimensions; see :meth:`Layout.resolve` for ``shape``, ``names`` and
    ``periods``.

    Collective over ``comm``: every rank builds the same mesh. Cost: one
    small allgather (every rank's description, so that a bad or differing
    one raises the same error on every rank instead of hanging), one
    ``Create_cart`` and one ``Sub`` per dimension, and a ``Dup`` per Comm
    made (the private context of each). :meth:`sub` of several dimensions
    is collective on first use. :meth:`free` releases every communicator.

    Attributes: ``comm`` (the whole mesh as a ``Comm``; ranks keep their
    numbers), ``coords`` (this rank's, a named tuple:
    ``mesh.coords.tp``), ``layout`` (the :class:`Layout`), ``shape``,
    ``names``, ``periods``.
    """

    def __init__(self, comm=None, shape=(-1,), names=None,
                 periods=False) -> None:
        base = comm if isinstance(comm, Comm) else Comm(comm)
        try:
            layout, problem = Layout.resolve(base.size, shape, names,
                                             periods), None
        except ValueError as exc:
            layout, problem = None, f"asked for a bad mesh: {exc}"
        described = None if layout is None else \
            (layout.shape, layout.names, layout.periods)
        layouts = [got if got is None else Layout(*got)
                   for got in base._agreed("Mesh", problem, described)]
        if any(got != layout for got in layouts):
            asked: dict[Layout, list[int]] = {}
            for q, got in enumerate(layouts):
                asked.setdefault(got, []).append(q)
            raise InvalidArgumentError(
                "the mesh differs between ranks: " + "; ".join(
                    f"{'ranks' if len(qs) > 1 else 'rank'} {spans(qs)}: "
                    f"shape {m.shape}, names {m.names}, periods {m.periods}"
                    for m, qs in asked.items()),
                rank=base.rank, collective="Mesh")
        self.layout = layout
        self.comm = base.Create_cart(layout.shape, layout.periods,
                                     reorder=False)
        self.coords = namedtuple("Coords", layout.names)(
            *self.comm.Get_coords(self.comm.rank))
        self._subs: dict[tuple[str, ...], Comm] = {layout.names: self.comm}
        for name in layout.names:
            self.sub((name,))

    @property
    def shape(self) -> tuple[int, ...]:
        return self.layout.shape

    @property
    def names(self) -> tuple[str, ...]:
        return self.layout.names

    @property
    def periods(self) -> tuple[bool, ...]:
        return self.layout.periods

    def __repr__(self) -> str:
        dims = ", ".join(f"{n}={s}" for n, s in zip(self.names, self.shape))
        return f"<mpicoll.Mesh ({dims}) rank {self.comm.rank} at {self.coords}>"

    def __getitem__(self, names) -> Comm:
        """``mesh["tp"]``: the Comm along one dimension (made with the
        mesh); ``mesh["dp", "pp"]`` is :meth:`sub`."""
        return self.sub((names,) if isinstance(names, str) else names)

    def sub(self, names) -> Comm:
        """The Comm of the ranks that share this rank's coordinates outside
        the dimensions ``names`` (distinct, in mesh order, as torch asks),
        ranked row-major over them. One dimension's Comm exists from the
        start; others are made on first use, which is collective over the
        mesh (one ``Sub`` and one ``Dup``), then cached."""
        names = (names,) if isinstance(names, str) else tuple(names)
        comm = self._subs.get(names)
        if comm is None:
            dims = [self._dim(n, "Mesh.sub") for n in names]
            if not dims or dims != sorted(set(dims)):
                raise InvalidArgumentError(
                    f"dimensions {names} must be distinct and in the mesh's "
                    f"order {self.names}", rank=self.comm.rank,
                    collective="Mesh.sub")
            comm = self._subs[names] = self.comm.Sub(
                [d in dims for d in range(len(self.shape))])
        return comm

    def get_group(self, names) -> ProcessGroup:
        """The torch-style face of :meth:`sub` (``names``: one dimension's
        name, or several), as torch's ``DeviceMesh.get_group``."""
        return ProcessGroup(self.sub(names))

    def rank_at(self, coords) -> int:
        """The rank (in ``comm`` and in :attr:`comm`) at ``coords``, a
        sequence in dimension order or a mapping by name; periodic
        dimensions wrap around. Local: no communication."""
        where = {"rank": self.comm.rank, "collective": "Mesh.rank_at"}
        if isinstance(coords, Mapping):
            if set(coords) != set(self.names):
                raise InvalidArgumentError(
                    f"coordinates {dict(coords)} must name each of "
                    f"{self.names}", **where)
            coords = [coords[n] for n in self.names]
        try:
            coords = _ints(coords, "coordinates")
        except ValueError as exc:
            raise InvalidArgumentError(str(exc), **where) from None
        if len(coords) != len(self.shape) or not all(
                p or 0 <= c < n
                for c, n, p in zip(coords, self.shape, self.periods)):
            raise InvalidArgumentError(
                f"coordinates {coords} are outside the mesh {self.shape} "
                f"(periodic: {self.periods})", **where)
        return self.comm.Get_cart_rank(coords)

    def shift(self, name: str, disp: int = 1):
        """``(source, dest)``: the ranks ``disp`` steps before and after
        this one along dimension ``name`` (``MPI_Cart_shift``), in ``comm``
        and :attr:`comm`; None past the edge of a non-periodic dimension.
        Local: no communication. (In ``mesh[name]``, the Comm along that
        dimension, a rank's number is its coordinate there.)"""
        dim = self._dim(name, "Mesh.shift")
        if not isinstance(disp, int) or isinstance(disp, bool):
            raise InvalidArgumentError(
                f"disp {disp!r} must be an int", rank=self.comm.rank,
                collective="Mesh.shift")
        return tuple(None if r == MPI.PROC_NULL else r
                     for r in self.comm.Shift(dim, disp))

    def free(self) -> None:
        """Free the mesh's communicators (collective over the mesh)."""
        for comm in self._subs.values():
            comm.free()
        self._subs.clear()

    def _dim(self, name, call) -> int:
        if name not in self.names:
            raise InvalidArgumentError(
                f"{name!r} is not a dimension of the mesh {self.names}",
                rank=self.comm.rank, collective=call)
        return self.names.index(name)


def main(argv=None) -> None:
    """``python -m mpicoll.mesh``: print a mesh's layout, computed without
    MPI, for a world of ``--size`` ranks."""
    p = argparse.ArgumentParser(
        prog="python -m mpicoll.mesh",
        description="Where each rank sits in a mesh, and its group along "
                    "each dimension (row-major, last dimension fastest).")
    p.add_argument("--shape", required=True,
                   help="sizes, comma-separated; one may be -1 (inferred "
                        "from --size: write --shape=-1,2)")
    p.add_argument("--names", help="names, comma-separated (default dim0,..)")
    p.add_argument("--size", type=int,
                   help="world size (default: the product of --shape)")
    args = p.parse_args(argv)
    try:
        shape = tuple(int(s) for s in args.shape.split(","))
    except ValueError:
        p.error(f"--shape {args.shape!r}: comma-separated ints expected")
    names = args.names.split(",") if args.names else None
    size = math.prod(shape) if args.size is None else args.size
    if size < 1:
        p.error(f"--size {size}: give the world size (with a -1 in --shape)")
    try:
        layout = Layout.resolve(size, shape, names)
    except ValueError as exc:
        p.error(str(exc))
    print(layout.describe())

