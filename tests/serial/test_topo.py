"""Unit tests of mpicoll.topo: block partitions, binomial trees, folding."""

import numpy as np
import pytest

from mpicoll.topo import (
    binomial_children,
    binomial_parent,
    block_partition,
    block_bounds,
    floor_pow2,
    fold_rank,
    unfold_rank,
)

SIZES = range(1, 41)


def lowbit(v: int) -> int:
    return v & -v


# --- block_partition / block_bounds ----------------------------------------

@pytest.mark.parametrize("parts", [1, 2, 3, 4, 5, 7, 8, 16, 17, 33])
@pytest.mark.parametrize("count", [0, 1, 2, 5, 16, 17, 100, 1001])
def test_block_partition(count, parts):
    blocks = block_partition(count, parts)
    assert isinstance(blocks, tuple)
    assert len(blocks) == parts
    assert sum(blocks) == count
    assert all(b >= 0 for b in blocks)
    assert max(blocks) - min(blocks) <= 1
    # The first count % parts blocks carry the extra element (MPICH order),
    # which is also NumPy's array_split convention.
    q, r = divmod(count, parts)
    assert blocks == tuple([q + 1] * r + [q] * (parts - r))
    split = np.array_split(np.arange(count), parts)
    assert blocks == tuple(len(s) for s in split)


def test_block_partition_fewer_elements_than_parts():
    assert block_partition(3, 5) == (1, 1, 1, 0, 0)
    assert block_partition(0, 4) == (0, 0, 0, 0)


@pytest.mark.parametrize(
    "counts",
    [(), (0,), (5,), (1, 2, 3), (0, 0, 4, 0, 2), (3, 3, 3, 3), (0, 7, 0)],
)
def test_block_bounds(counts):
    bounds = block_bounds(counts)
    assert isinstance(bounds, tuple)
    assert len(bounds) == len(counts) + 1
    assert bounds[-1] == sum(counts)
    displ = bounds[:-1]
    expected = tuple(int(x) for x in np.concatenate(([0], np.cumsum(counts)))[:-1])
    assert displ == expected
    # Blocks laid end to end tile [0, sum(counts)) without gaps or overlap.
    if counts:
        assert displ[0] == 0
        assert displ[-1] + counts[-1] == sum(counts)
    for i in range(1, len(counts)):
        assert displ[i] == displ[i - 1] + counts[i - 1]


def test_block_bounds_of_a_partition_tile_the_vector():
    for count in (0, 1, 9, 100):
        for parts in (1, 3, 8, 13):
            blocks = block_partition(count, parts)
            displ = block_bounds(blocks)[:-1]
            covered = np.zeros(count, dtype=int)
            for d, b in zip(displ, blocks):
                covered[d:d + b] += 1
            assert (covered == 1).all()


# --- floor_pow2 -------------------------------------------------------------

def test_floor_pow2():
    for n in range(1, 300):
        f = floor_pow2(n)
        assert f & (f - 1) == 0, n  # a power of two
        assert f <= n < 2 * f, n
    got = [floor_pow2(n) for n in (1, 2, 3, 4, 5, 8, 9, 33)]
    assert got == [1, 2, 2, 4, 4, 8, 8, 32]


# --- binomial tree ----------------------------------------------------------

def test_binomial_parent():
    assert binomial_parent(0) is None
    assert [binomial_parent(v) for v in range(1, 9)] == [0, 0, 2, 0, 4, 4, 6, 0]
    for v in range(1, 200):
        p = binomial_parent(v)
        assert p < v
        assert p == v - lowbit(v)


def test_binomial_children_examples():
    assert binomial_children(0, 1) == []
    assert binomial_children(0, 8) == [1, 2, 4]
    assert binomial_children(0, 5) == [1, 2, 4]
    assert binomial_children(0, 6) == [1, 2, 4]
    assert binomial_children(4, 8) == [5, 6]
    assert binomial_children(4, 6) == [5]
    assert binomial_children(6, 8) == [7]
    assert binomial_children(1, 8) == []


@pytest.mark.parametrize("size", SIZES)
def test_binomial_tree_spans_ranks(size):
    children = {v: binomial_children(v, size) for v in range(size)}
    # Children and parent agree, and every child is in range, nearest first.
    for v, cs in children.items():
        assert cs == sorted(cs)
        for c in cs:
            assert v < c < size
            assert binomial_parent(c) == v
            assert (c - v) & (c - v - 1) == 0  # distance a power of two
    # Every non-root rank is exactly one rank's child: a tree on 0..size-1.
    all_children = [c for cs in children.values() for c in cs]
    assert sorted(all_children) == list(range(1, size))
    for v in range(1, size):
        assert v in children[binomial_parent(v)]

    def subtree(v):
        out = [v]
        for c in children[v]:
            out += subtree(c)
        return out

    # Reachable from the root: a spanning tree rooted at 0.
    assert sorted(subtree(0)) == list(range(size))
    # The subtree of child c is the contiguous range [c, min(c + lowbit(c), size)).
    for v in range(1, size):
        assert sorted(subtree(v)) == list(range(v, min(v + lowbit(v), size))), v


@pytest.mark.parametrize("size", SIZES)
def test_binomial_tree_depth_is_logarithmic(size):
    def depth(v):
        d = 0
        while v:
            v = binomial_parent(v)
            d += 1
        return d

    # Each hop clears one set bit: depth is the popcount, at most
    # ceil(log2(size)) (the number of rounds of a binomial bcast).
    for v in range(size):
        assert depth(v) == bin(v).count("1")
    assert max(depth(v) for v in range(size)) <= (size - 1).bit_length()


# --- fold / unfold ----------------------------------------------------------

@pytest.mark.parametrize("size", SIZES)
def test_fold_unfold(size):
    pof2 = floor_pow2(size)
    rem = size - pof2
    folded = [fold_rank(r, size) for r in range(size)]
    core = [c for c in folded if c is not None]
    # The core is 0 .. pof2-1, numbered in rank order.
    assert core == list(range(pof2))
    # Exactly the first rem even ranks sit out.
    assert [r for r, c in enumerate(folded) if c is None] == list(range(0, 2 * rem, 2))
    for r, c in enumerate(folded):
        if c is None:
            # Its partner is the odd rank above it, which is in the core.
            assert fold_rank(r + 1, size) is not None
        else:
            assert unfold_rank(c, size) == r
    for c in range(pof2):
        assert fold_rank(unfold_rank(c, size), size) == c


@pytest.mark.parametrize("size", SIZES)
def test_fold_core_ranks_hold_contiguous_ranges(size):
    """Core rank c stands for a contiguous range of original ranks, the
    ranges in order: what keeps non-commutative folds in rank order."""
    pof2 = floor_pow2(size)
    ranges = []
    for c in range(pof2):
        r = unfold_rank(c, size)
        absorbed = [r - 1] if r >= 1 and fold_rank(r - 1, size) is None else []
        ranges.append([*absorbed, r])
    flat = [r for rng in ranges for r in rng]
    assert flat == list(range(size))
    for rng in ranges:
        assert rng == list(range(rng[0], rng[-1] + 1))
        assert 1 <= len(rng) <= 2
