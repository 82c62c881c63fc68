"""Tier 1: the bucketing plan (a pure function) and the bucketer's local
errors, on a one-rank communicator (plain pytest, no mpiexec)."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.parallel.bucketing import GradientBucketer, plan_buckets
from mpicoll.errors import InvalidArgumentError


def layout(buckets):
    return [(b.dtype.str, b.members, b.offsets) for b in buckets]


def test_reverse_order_and_offsets():
    # 4-byte elements, 40-byte buckets: 10 elements each.
    got = plan_buckets([3, 4, 5, 6], ["f4"] * 4, 40)
    assert layout(got) == [("<f4", (3,), (0,)),
                           ("<f4", (2, 1), (0, 5)),
                           ("<f4", (0,), (0,))]
    assert [b.count for b in got] == [6, 9, 3]
    assert [b.nbytes for b in got] == [24, 36, 12]


def test_exactly_full_bucket_and_next_one():
    got = plan_buckets([5, 5, 5], ["f8"] * 3, 80)  # 10 float64 per bucket
    assert layout(got) == [("<f8", (2, 1), (0, 5)), ("<f8", (0,), (0,))]


def test_dtypes_never_mix():
    got = plan_buckets([1, 1, 1, 1], ["f4", "f8", "f4", "f8"], 1 << 20)
    assert layout(got) == [("<f8", (3, 1), (0, 1)), ("<f4", (2, 0), (0, 1))]


def test_devices_never_mix():
    got = plan_buckets([1, 1], ["f4", "f4"], 1 << 20,
                       devices=["numpy", "cupy"])
    assert [(b.device, b.members) for b in got] == [("cupy", (1,)),
                                                     ("numpy", (0,))]


def test_big_array_gets_its_own_bucket():
    got = plan_buckets([2, 100, 2, 3], ["i4"] * 4, 20)  # 5 int32 per bucket
    assert layout(got) == [("<i4", (3, 2), (0, 3)), ("<i4", (1,), (0,)),
                           ("<i4", (0,), (0,))]
    got = plan_buckets([1, 100, 1], ["i4"] * 3, 20)
    assert [b.members for b in got] == [(2,), (1,), (0,)]


def test_empty_arrays_and_no_arrays():
    got = plan_buckets([0, 0, 4], ["f4"] * 3, 16)
    assert layout(got) == [("<f4", (2, 1, 0), (0, 4, 4))]
    assert got[0].count == 4
    assert plan_buckets([], [], 16) == ()


@pytest.mark.parametrize("bad", [0, -1, 2.5, None])
def test_plan_refuses_bad_bucket_bytes(bad):
    with pytest.raises(ValueError, match="bucket_bytes"):
        plan_buckets([1], ["f4"], bad)


def test_plan_every_array_once():
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 50, 40)
    dtypes = rng.choice(["f4", "f8", "i2", "c16"], 40)
    got = plan_buckets(counts, dtypes, 100)
    seen = sorted(i for b in got for i in b.members)
    assert seen == list(range(40))
    for b in got:
        assert all(np.dtype(dtypes[i]) == b.dtype for i in b.members)
        assert b.nbytes <= 100 or len(b.members) == 1 or \
            sum(counts[i] > 0 for i in b.members) == 1
        # members are in reverse index order, packed back to back
        assert list(b.members) == sorted(b.members, reverse=True)
        ends = np.cumsum([counts[i] for i in b.members])
        assert list(b.offsets) == [0, *ends[:-1]]


@pytest.fixture
def self_comm():
    return mpicoll.Comm(MPI.COMM_SELF)


def test_one_rank_sum_and_average_reuse(self_comm):
    a, b = np.arange(6.0).reshape(2, 3), np.array(5, np.int64)
    bucketer = GradientBucketer(self_comm, [a, b], bucket_bytes=8)
    for _ in range(2):
        bucketer.mark_ready(b)
        bucketer.mark_ready(0)
        bucketer.wait()
        assert np.array_equal(a, np.arange(6.0).reshape(2, 3))
        assert b == 5
    c = np.array([3.0])
    avg = GradientBucketer(self_comm, [c], average=True)
    avg.mark_ready(0)
    avg.wait()
    assert c[0] == 3.0


@pytest.mark.parametrize(("kwargs", "arrays", "match"), [
    ({"bucket_bytes": 0}, [np.ones(2)], "bucket_bytes 0"),
    ({"bucket_bytes": -5}, [np.ones(2)], "bucket_bytes -5"),
    ({}, [np.ones((4, 4))[:, ::2]], r"array 0 \(shape \(4, 2\).*C-contiguous"),
    ({}, [np.ones((4, 4)).T], "not C-contiguous"),
    ({}, [[1.0, 2.0]], "array 0 of type list"),
    ({"average": True}, [np.ones(2), np.ones(2, np.int32)],
     "array 1.*average=True"),
    ({}, [np.ones(2, bool)], "sum is not defined for bool"),
])
def test_construction_errors(self_comm, kwargs, arrays, match):
    with pytest.raises(InvalidArgumentError,
                       match=r"\[rank 0\] GradientBucketer: rank 0 " + "passed"):
        GradientBucketer(self_comm, arrays, **kwargs)
    with pytest.raises(InvalidArgumentError, match=match):
        GradientBucketer(self_comm, arrays, **kwargs)


def test_same_array_twice_refused(self_comm):
    x = np.ones(3)
    with pytest.raises(InvalidArgumentError, match="arrays 0 and 1"):
        GradientBucketer(self_comm, [x, x])


def test_read_only_refused(self_comm):
    x = np.ones(3)
    x.flags.writeable = False
    with pytest.raises(InvalidArgumentError, match="read-only"):
        GradientBucketer(self_comm, [x])


def test_mark_ready_errors(self_comm):
    x, y = np.ones(3), np.ones(2)
    bucketer = GradientBucketer(self_comm, [x, y])
    for bad, match in [(2, "unknown array index 2"),
                       (-1, "unknown array index -1"),
                       (np.ones(3), "unknown array ndarray"),
                       ("x", "unknown array str")]:
        with pytest.raises(InvalidArgumentError,
                           match=r"GradientBucketer.mark_ready: " + match):
            bucketer.mark_ready(bad)
    bucketer.mark_ready(x)
    with pytest.raises(InvalidArgumentError, match="array 0 was already"):
        bucketer.mark_ready(0)
    bucketer.mark_ready(1)
    bucketer.wait()
    bucketer.mark_ready(0)  # a new step


def test_wait_names_missing_arrays_and_step_stays_open(self_comm):
    arrays = [np.full(2, float(i)) for i in range(4)]
    bucketer = GradientBucketer(self_comm, arrays, bucket_bytes=16)
    bucketer.mark_ready(3)
    bucketer.mark_ready(0)
    assert bucketer.missing() == [1, 2]
    with pytest.raises(InvalidArgumentError,
                       match=r"GradientBucketer.wait: arrays \[1, 2\] were "
                             r"not marked.*bucket\(s\) \[1, 2\]"):
        bucketer.wait()
    bucketer.mark_ready(1)
    bucketer.mark_ready(2)
    bucketer.wait()
    assert [a[0] for a in arrays] == [0.0, 1.0, 2.0, 3.0]
    assert bucketer.missing() == [0, 1, 2, 3]
