"""Tier 2: ``mpicoll.Mesh`` on real MPI, at whatever world size runs it.

MPI's ``Create_cart`` / ``Cart_sub`` / ``Cart_shift`` must agree with the
pure arithmetic of :class:`mpicoll.parallel.mesh.Layout` (what ``python -m
mpicoll.parallel.mesh`` prints); collectives run on each dimension's Comm; a mesh
that differs between ranks raises the same error on every rank.
"""

from __future__ import annotations

import math
from itertools import product

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll import ProcessGroup as PG
from mpicoll.errors import InvalidArgumentError
from mpicoll.parallel.mesh import Layout

pytestmark = pytest.mark.mpi

WORLD = MPI.COMM_WORLD
P = WORLD.Get_size()


def factorizations(size: int, ndim: int):
    return [s for s in product(range(1, size + 1), repeat=ndim)
            if math.prod(s) == size]


# Every 1-D and 2-D shape, and 3-D ones that split all three ways first.
SHAPES = [(P,), *factorizations(P, 2),
          *sorted(factorizations(P, 3), key=lambda s: -min(s))[:3]]


@pytest.fixture(scope="module")
def world():
    return mpicoll.Comm(WORLD)


def members(comm) -> list[int]:
    """The world ranks of ``comm``'s ranks, in its order."""
    return MPI.Intracomm(comm).allgather(WORLD.Get_rank())


def moved(layout: Layout, coords, d: int, disp: int):
    """The rank ``disp`` steps from ``coords`` along dimension ``d`` (None
    past an open edge): what ``MPI_Cart_shift`` answers."""
    c, n = coords[d] + disp, layout.shape[d]
    if layout.periods[d]:
        c %= n
    elif not 0 <= c < n:
        return None
    return layout.rank([*coords[:d], c, *coords[d + 1:]])


@pytest.mark.parametrize("periodic", [False, True], ids=["open", "periodic"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_mesh_agrees_with_the_layout(world, shape, periodic):
    names = ("dp", "pp", "tp")[-len(shape):]
    mesh = mpicoll.Mesh(world, shape, names, periods=periodic)
    layout = Layout.resolve(P, shape, names, periodic)
    r = world.rank
    assert (mesh.shape, mesh.names, mesh.periods) == (
        layout.shape, layout.names, layout.periods)
    assert tuple(mesh.coords) == layout.coords(r)
    assert mesh.coords._fields == names
    assert mesh.rank_at(mesh.coords) == r
    assert mesh.rank_at(dict(zip(names, mesh.coords))) == r
    assert [mesh.rank_at(layout.coords(q)) for q in range(P)] == \
        list(range(P))
    assert members(mesh.comm) == list(range(P))
    for d, name in enumerate(names):
        along = mesh[name]
        assert along is mesh.sub((name,))
        assert isinstance(along, mpicoll.Comm)
        assert members(along) == list(layout.group(r, (name,)))
        assert along.rank == mesh.coords[d]
        group = mesh.get_group(name)  # the torch-style face of mesh[name]
        assert isinstance(group, mpicoll.ProcessGroup)
        assert group.comm is along and group.rank() == along.rank
        x = np.array([r], np.int64)
        group.all_reduce(x, algorithm="ring")
        assert x[0] == sum(layout.group(r, (name,)))
        for disp in (1, -1, 2):
            assert mesh.shift(name, disp) == (
                moved(layout, mesh.coords, d, -disp),
                moved(layout, mesh.coords, d, disp))
    for first, second in zip(names, names[1:]):
        both = mesh[first, second]
        assert both is mesh.sub((first, second))
        assert mesh.get_group((first, second)).comm is both
        assert members(both) == list(layout.group(r, (first, second)))
    assert members(mesh.sub(names)) == list(range(P))
    if periodic:
        assert mesh.rank_at([-1] * len(shape)) == P - 1
    mesh.free()


def test_shape_is_inferred_and_names_default(world):
    mesh = mpicoll.Mesh(world, (1, -1))
    assert mesh.shape == (1, P) and mesh.names == ("dim0", "dim1")
    assert mesh.coords.dim1 == world.rank
    assert mesh["dim1"].size == P and mesh["dim0"].size == 1
    mesh.free()
    line = mpicoll.Mesh(WORLD)  # default: one dimension of every rank
    assert line.shape == (P,)
    line.free()


def test_mesh_of_a_split_counts_ranks_in_that_communicator(world):
    half = world.split(world.rank % 2)
    mesh = mpicoll.Mesh(half, (-1,), ("x",), periods=True)
    assert mesh.coords.x == half.rank
    assert mesh.rank_at((half.rank,)) == half.rank
    assert mesh.shift("x", 1) == ((half.rank - 1) % half.size,
                                  (half.rank + 1) % half.size)
    x = np.ones(4)
    PG(mesh["x"]).all_reduce(x)
    assert np.all(x == half.size)
    mesh.free()
    half.Free()


def same_error_everywhere(info, *fragments) -> None:
    text = str(info.value)
    assert f"[rank {WORLD.Get_rank()}] Mesh: " in text
    for fragment in fragments:
        assert fragment in info.value.what
    assert len(set(WORLD.allgather(info.value.what))) == 1


def test_a_differing_mesh_raises_the_same_error_everywhere(world):
    """Rank 0 asks for another mesh than the rest: every rank raises,
    none hangs in Create_cart, and the communicator still works."""
    if P == 1:
        pytest.skip("needs two ranks")
    first = world.rank == 0
    with pytest.raises(InvalidArgumentError) as info:
        mpicoll.Mesh(world, (1, P) if first else (P, 1), ("a", "b"))
    same_error_everywhere(
        info, "the mesh differs between ranks",
        f"rank 0: shape (1, {P})",
        f"rank 1: shape ({P}, 1)" if P == 2 else f"ranks 1-{P - 1}: shape "
                                                 f"({P}, 1)")
    with pytest.raises(InvalidArgumentError) as info:
        mpicoll.Mesh(world, (P,), ("a",) if first else ("b",))
    same_error_everywhere(info, "names ('a',)", "names ('b',)")
    with pytest.raises(InvalidArgumentError) as info:
        mpicoll.Mesh(world, (P,), periods=first)
    same_error_everywhere(info, "periods (True,)", "periods (False,)")
    x = np.ones(2)
    PG(world).all_reduce(x)
    assert np.all(x == P)


def test_a_bad_mesh_on_one_rank_fails_every_rank(world):
    last = world.size - 1
    with pytest.raises(InvalidArgumentError) as info:
        mpicoll.Mesh(world, (P + 1,) if world.rank == last else (P,))
    same_error_everywhere(info, f"rank {last} asked for a bad mesh: shape "
                                f"({P + 1},) holds {P + 1} ranks, the "
                                f"communicator {P}")
    with pytest.raises(InvalidArgumentError) as info:
        mpicoll.Mesh(world, (P,), ("tp", "dp"))
    same_error_everywhere(info, "rank 0 asked for a bad mesh: names")


def test_local_errors_name_the_call(world):
    mesh = mpicoll.Mesh(world, (1, P, 1), ("dp", "pp", "tp"))
    r = world.rank
    with pytest.raises(InvalidArgumentError, match=rf"\[rank {r}\] Mesh.sub: "
                       r"'ep' is not a dimension"):
        mesh["ep"]
    with pytest.raises(InvalidArgumentError, match="in the mesh's order"):
        mesh.sub(("tp", "dp"))
    with pytest.raises(InvalidArgumentError, match="in the mesh's order"):
        mesh.sub(("dp", "dp"))
    with pytest.raises(InvalidArgumentError, match=rf"\[rank {r}\] "
                       r"Mesh.rank_at: coordinates \(0, .*\) are outside"):
        mesh.rank_at((0, P, 0))
    with pytest.raises(InvalidArgumentError, match="must name each of"):
        mesh.rank_at({"dp": 0})
    with pytest.raises(InvalidArgumentError, match="sequence of ints"):
        mesh.rank_at((0, 0.5, 0))
    with pytest.raises(InvalidArgumentError, match=r"disp 1\.0 must be an int"):
        mesh.shift("pp", 1.0)
    mesh.free()
