"""Tier 1: a mesh's layout as pure arithmetic (``mpicoll.parallel.mesh.Layout``) and
the ``python -m mpicoll.mesh`` command that prints it. ``test_mesh_mpi.py``
checks that MPI's ``Create_cart`` and ``Sub`` agree with this arithmetic."""

from __future__ import annotations

import math
import subprocess
import sys
from itertools import product

import pytest

from mpicoll.parallel.mesh import Layout, main

DP_PP_TP = ("dp", "pp", "tp")


def test_row_major_last_dimension_fastest():
    m = Layout.resolve(24, (2, 3, 4), ("a", "b", "c"))
    assert [m.coords(r) for r in (0, 1, 4, 12, 23)] == [
        (0, 0, 0), (0, 0, 1), (0, 1, 0), (1, 0, 0), (1, 2, 3)]
    assert m.rank((1, 2, 3)) == 23


@pytest.mark.parametrize("shape", [(1,), (7,), (2, 3), (3, 1, 2), (2, 2, 2),
                                   (1, 4, 1, 2)])
def test_coords_and_rank_are_inverse(shape):
    m = Layout.resolve(math.prod(shape), shape)
    seen = [m.coords(r) for r in range(m.size)]
    assert seen == list(product(*map(range, shape)))  # row-major order
    assert [m.rank(c) for c in seen] == list(range(m.size))


def test_groups_of_a_2x2x2_mesh():
    m = Layout.resolve(8, (2, 2, 2), DP_PP_TP)
    assert m.group(5, ("tp",)) == (4, 5)
    assert m.group(5, ("pp",)) == (5, 7)
    assert m.group(5, ("dp",)) == (1, 5)
    assert m.group(5, ("dp", "pp")) == (1, 3, 5, 7)
    assert m.group(5, DP_PP_TP) == tuple(range(8))


@pytest.mark.parametrize("shape", [(6,), (2, 3), (3, 2, 2), (2, 1, 3)])
def test_groups_partition_the_ranks(shape):
    names = tuple(f"d{i}" for i in range(len(shape)))
    m = Layout.resolve(math.prod(shape), shape, names)
    for k in range(1, len(shape) + 1):
        for dims in product(names, repeat=k):
            if list(dims) != sorted(set(dims)):
                continue
            groups = {m.group(r, dims) for r in range(m.size)}
            size = math.prod(shape[names.index(d)] for d in dims)
            assert all(len(g) == size for g in groups)
            assert sorted(r for g in groups for r in g) == list(range(m.size))
            # A rank sits in its group at its coordinates along ``dims``,
            # row-major: the order of its Comm.
            along = Layout.resolve(size, [shape[names.index(d)]
                                          for d in dims])
            for r in range(m.size):
                mine = [m.coords(r)[names.index(d)] for d in dims]
                assert m.group(r, dims)[along.rank(mine)] == r


def test_resolve_infers_one_dimension_and_fills_defaults():
    m = Layout.resolve(12, (2, -1, 3))
    assert m.shape == (2, 2, 3)
    assert m.names == ("dim0", "dim1", "dim2")
    assert m.periods == (False, False, False)
    assert Layout.resolve(4, 4, "x", True) == Layout((4,), ("x",), (True,))
    assert Layout.resolve(4, [-1], periods=[True]).shape == (4,)


@pytest.mark.parametrize(("args", "message"), [
    ((8, (3, 3)), "holds 9 ranks, the communicator 8"),
    ((8, (3, -1)), "8 is not a multiple of 3"),
    ((8, (-1, -1, 2)), "at most one -1"),
    ((8, (0, 8)), "positive sizes"),
    ((8, ()), "positive sizes"),
    ((8, (2.0, 4)), "sequence of ints"),
    ((8, "24"), "sequence of ints"),
    ((8, (2, 4), ("a",)), "2 distinct identifiers"),
    ((8, (2, 4), ("a", "a")), "distinct"),
    ((8, (2, 4), ("a", "b-c")), "identifiers"),
    ((8, (2, 4), ("a", "_b")), "identifiers"),
    ((8, (2, 4), ("a", "for")), "identifiers"),
    ((8, (2, 4), None, (True,)), "one bool, or 2 bools"),
    ((8, (2, 4), None, (1, 0)), "bools"),
])
def test_resolve_says_what_is_wrong(args, message):
    with pytest.raises(ValueError, match=message):
        Layout.resolve(*args)


CLI_2X2X2 = """\
mesh dp=2 x pp=2 x tp=2 on 8 ranks, row-major: tp varies fastest
rank  dp  pp  tp  dp group  pp group  tp group
   0   0   0   0  0,4       0,2       0,1
   1   0   0   1  1,5       1,3       0,1
   2   0   1   0  2,6       0,2       2,3
   3   0   1   1  3,7       1,3       2,3
   4   1   0   0  0,4       4,6       4,5
   5   1   0   1  1,5       5,7       4,5
   6   1   1   0  2,6       4,6       6,7
   7   1   1   1  3,7       5,7       6,7
"""


def test_cli_prints_every_rank_and_its_groups(capsys):
    main(["--shape", "2,2,2", "--names", "dp,pp,tp"])
    assert capsys.readouterr().out == CLI_2X2X2


def test_cli_infers_from_size_and_names_by_default(capsys):
    main(["--shape=-1,2", "--size", "6"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("mesh dim0=3 x dim1=2 on 6 ranks, row-major: dim1 "
                        "varies fastest")
    assert lines[1].split() == ["rank", "dim0", "dim1", "dim0", "group",
                                "dim1", "group"]
    assert lines[2].split() == ["0", "0", "0", "0,2,4", "0,1"]
    assert lines[7].split() == ["5", "2", "1", "1,3,5", "4,5"]


@pytest.mark.parametrize(("argv", "message"), [
    (["--shape", "2,2", "--size", "5"], "holds 4 ranks, the communicator 5"),
    (["--shape", "2,x"], "comma-separated ints"),
    (["--shape=-1,2"], "give the world size"),
    (["--shape", "2,2", "--names", "a"], "distinct identifiers"),
])
def test_cli_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_cli_as_a_module():
    """``python -m mpicoll.mesh`` runs without an MPI launch, and without
    runpy's warning about a module its package already imported."""
    done = subprocess.run(
        [sys.executable, "-W", "error", "-m", "mpicoll.mesh", "--shape",
         "2,2,2", "--names", "dp,pp,tp"],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == CLI_2X2X2
