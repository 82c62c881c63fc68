"""Partitions of a vector into per-rank blocks."""

from __future__ import annotations

from itertools import accumulate


def block_partition(count: int, parts: int) -> tuple[int, ...]:
    """Split ``count`` elements into ``parts`` near-equal block sizes.

    The first ``count % parts`` blocks get one extra element, as in MPICH's
    reduce-scatter based algorithms. Blocks may be empty when
    ``count < parts``.
    """
    q, r = divmod(count, parts)
    return tuple(q + 1 if i < r else q for i in range(parts))


def displacements(counts) -> tuple[int, ...]:
    """Exclusive prefix sums: where each block starts."""
    return (0, *accumulate(counts))[: len(counts)]
