"""Tier 2: the gradient bucketer on real MPI. Results must agree bitwise
with one ``all_reduce`` per array (integer-valued data: exact in any
reduction order), whatever order each rank marks its arrays in."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from mpicoll import ProcessGroup as PG
from mpicoll.parallel.bucketing import GradientBucketer
from mpicoll.errors import InvalidArgumentError
from mpidata import values
from scripts import load

pytestmark = pytest.mark.mpi

# (shape, dtype): 0-d, empty and multi-dimensional, dtypes interleaved.
SHAPES = [((3, 4), "float64"), ((), "float32"), ((0,), "float64"),
          ((1000,), "int32"), ((2, 0, 3), "int32"), ((17,), "complex128"),
          ((5, 5), "float32"), ((), "float64"), ((40,), "float64")]
ALGORITHMS = ["native", "ring", "recursive_doubling"]


def grads(rank: int, step: int = 0, shapes=SHAPES):
    """This rank's arrays for ``step``: unique per (rank, step, index)."""
    return [values(rank + 7 * step, int(np.prod(shape)), dtype).reshape(shape)
            for shape, dtype in shapes]


def reference(comm, arrays, algorithm):
    """One all_reduce per array, on copies."""
    out = [x.copy() for x in arrays]
    for x in out:
        PG(comm).all_reduce(x, algorithm=algorithm)
    return out


def mark_all(bucketer, n, rank, step=0):
    """Mark every array, in an order that differs between ranks."""
    order = np.random.default_rng([rank, step]).permutation(n)
    for i in order:
        bucketer.mark_ready(int(i))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_matches_per_array_all_reduce(comm, algorithm):
    arrays = grads(comm.rank)
    expected = reference(comm, arrays, algorithm)
    launched = []
    bucketer = GradientBucketer(comm, arrays, bucket_bytes=256,
                                algorithm=algorithm,
                                on_event=lambda what, b: launched.append(
                                    b) if what == "launch" else None)
    assert len(bucketer.buckets) > 3
    mark_all(bucketer, len(arrays), comm.rank)
    bucketer.wait()
    assert launched == list(range(len(bucketer.buckets)))  # in order
    for i, (got, want) in enumerate(zip(arrays, expected)):
        assert got.shape == want.shape and got.dtype == want.dtype
        assert np.array_equal(got, want), i


@pytest.mark.parametrize("average", [False, True])
def test_bucket_views(comm, average):
    shapes = [(s, d) for s, d in SHAPES if d.startswith(("float", "complex"))]
    given = grads(comm.rank, 0, shapes)
    before = [x.copy() for x in given]
    bucketer = GradientBucketer(comm, given, bucket_bytes=100,
                                average=average, algorithm="ring",
                                bucket_views=True)
    views = bucketer.arrays
    for x, b, v in zip(views, given, before):
        assert x.shape == b.shape and x.dtype == b.dtype
        assert np.array_equal(x, v)  # the given values, copied in once
        assert x.size == 0 or any(np.shares_memory(x, buf)
                                  for buf in bucketer._buffers)
    for step in range(2):
        fresh = grads(comm.rank, step + 1, shapes)
        expected = reference(comm, fresh, "native")
        if average:
            expected = [np.true_divide(x, comm.size) for x in expected]
        for i in np.random.default_rng([comm.rank, step]).permutation(
                len(views)):
            views[i][...] = fresh[i]  # computed straight into the bucket
            bucketer.mark_ready(views[i])
        bucketer.wait()
        for i, (got, want) in enumerate(zip(views, expected)):
            assert np.array_equal(got, want), (step, i)
    assert all(np.array_equal(x, v) for x, v in zip(given, before))


def test_average_and_reuse_across_steps(comm):
    shapes = [(s, d) for s, d in SHAPES if d.startswith(("float", "complex"))]
    arrays = grads(comm.rank, 0, shapes)
    group = PG(comm)  # a ProcessGroup does as well as a Comm
    bucketer = GradientBucketer(group, arrays, bucket_bytes=100,
                                average=True, algorithm="ring")
    assert bucketer.comm is comm and bucketer.group.comm is comm
    buffers = [id(b) for b in bucketer._buffers]
    for step in range(3):
        fresh = grads(comm.rank, step, shapes)
        for x, v in zip(arrays, fresh):
            x[...] = v
        expected = [np.true_divide(x, comm.size)
                    for x in reference(comm, fresh, "native")]
        # Marking by the array object itself, reverse order on even ranks.
        order = arrays[::-1] if comm.rank % 2 == 0 else arrays
        for x in order:
            bucketer.mark_ready(x)
        bucketer.wait()
        for got, want in zip(arrays, expected):
            assert np.array_equal(got, want), step
    assert [id(b) for b in bucketer._buffers] == buffers  # no reallocation


def test_incomplete_bucket_is_an_error_then_recovers(comm):
    arrays = grads(comm.rank)
    expected = reference(comm, arrays, "native")
    bucketer = GradientBucketer(comm, arrays, bucket_bytes=256)
    for i in range(len(arrays)):
        if i not in (2, 5):
            bucketer.mark_ready(i)
    with pytest.raises(InvalidArgumentError,
                       match=rf"\[rank {comm.rank}\] GradientBucketer.wait: "
                             r"arrays \[2, 5\] were not marked"):
        bucketer.wait(timeout=30)
    bucketer.mark_ready(5)
    bucketer.mark_ready(2)
    bucketer.wait(timeout=30)
    for got, want in zip(arrays, expected):
        assert np.array_equal(got, want)


def test_layouts_must_agree(comm):
    if comm.size == 1:
        pytest.skip("needs two ranks")
    n = 4 if comm.rank == comm.size - 1 else 3
    with pytest.raises(InvalidArgumentError,
                       match=rf"\[rank {comm.rank}\] GradientBucketer: .*"
                             rf"array 0 is shape \(3,\) float64 \(host\) on "
                             rf"rank 0, shape \(4,\) float64 \(host\) on rank "
                             rf"{comm.size - 1}"):
        GradientBucketer(comm, [np.ones(n)])
    bad = 0 if comm.rank == 1 else 1024
    with pytest.raises(InvalidArgumentError,
                       match=r"GradientBucketer: rank 1 passed bucket_bytes 0"):
        GradientBucketer(comm, [np.ones(3)], bucket_bytes=bad)


def test_overlap_benchmark_smoke(capsys):
    overlap = load("overlap")
    world = MPI.COMM_WORLD
    args = overlap.parse_args(["--layers", "3", "--size", "16", "--batch",
                               "4", "--steps", "2", "--bucket-kb", "1",
                               "--algorithm", "ring"])
    result = overlap.run(args, world)
    assert result.worst <= result.tolerance
    for name in ("compute", "comm", "serial", "overlapped"):
        assert getattr(result, name) > 0
    assert result.buckets == 3  # 16 x 16 float32 = 1 KiB per layer
    assert overlap.main(["--layers", "2", "--size", "8", "--batch", "2",
                         "--steps", "1"]) == 0
    out = capsys.readouterr().out
    if world.Get_rank() == 0:
        assert "overlap efficiency" in out and "OK" in out
    else:
        assert out == ""
    assert overlap.main(["--device", "cuda"]) == 2
