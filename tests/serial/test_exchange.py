"""Tier 1: the counts exchange of the v-collectives, on one rank.

A row of counts (:func:`mpicoll.guard.exchange.count_row`), gathered and
read back, gives every rank's counts as tuples of Python ints, and None
for a row that does not fit or is not counts, never a wrong row.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from mpicoll.guard import exchange


@pytest.mark.parametrize("mine,theirs,want", [
    (5, None, (5, None)),
    (np.int32(0), (3,), (0, (3,))),
    ((7,), None, ((7,), None)),
    ([np.int64(2)], [4], ((2,), (4,))),
    (((1,), (2,)), None, (((1,), (2,)), None)),
    (((0,), ()), (9,), (((0,), ()), (9,))),
    ((), None, ((), None)),
    ((1, 2, 3), None, ((1, 2, 3), None)),  # 3p ints fit
])
def test_counts_come_back_as_given(mine, theirs, want):
    got = _round_trip(mine, theirs)
    assert got == [want]
    assert all(type(n) is int for n in _ints(got))


@pytest.mark.parametrize("mine,theirs", [
    ((1, 2, 3, 4), None),  # more than 3p ints
    (((1, 2), (3,)), (5,)),
    ("12", None),
    (((1,), (2,), (3,)), None),
    ((1.5,), None),
    (1, "3"),
    (2 ** 70, None),
])
def test_what_does_not_fit_comes_back_as_none(mine, theirs):
    assert _round_trip(mine, theirs) == [None]


def _round_trip(mine, theirs):
    row = exchange.count_row(MPI.COMM_SELF.Get_size(), mine, theirs)
    return exchange.from_count_rows(
        exchange.gather_count_rows(MPI.COMM_SELF, row))


def _ints(obj):
    if isinstance(obj, (tuple, list)):
        for item in obj:
            yield from _ints(item)
    elif obj is not None:
        yield obj
