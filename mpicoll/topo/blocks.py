"""Partitions of a vector into per-rank blocks."""

from __future__ import annotations

from itertools import accumulate

from mpicoll.topo.trees import floor_pow2


def block_partition(count: int, parts: int) -> tuple[int, ...]:
    """Split ``count`` elements into ``parts`` near-equal block sizes.

    The first ``count % parts`` blocks get one extra element, as in MPICH's
    reduce-scatter based algorithms. Blocks may be empty when
    ``count < parts``.
    """
    q, r = divmod(count, parts)
    return tuple(q + 1 if i < r else q for i in range(parts))


def block_bounds(counts) -> tuple[int, ...]:
    """Where each block starts, then where the last one ends: block ``i``
    is ``[bounds[i], bounds[i + 1])`` (``len(counts) + 1`` entries)."""
    return (0, *accumulate(counts))


def fold_bounds(bounds) -> tuple[int, ...]:
    """:func:`block_bounds` of the power-of-two core, from those of the ranks.

    After folding (:func:`~mpicoll.topo.fold_rank`), core rank ``c`` stands
    for a contiguous range of original ranks, so its blocks form one range
    of the vector: ``[result[c], result[c + 1])``, ``pof2 + 1`` bounds in all.
    """
    size = len(bounds) - 1
    pof2 = floor_pow2(size)
    rem = size - pof2
    # The first original rank of core rank c is 2c for c < rem, else c + rem.
    return tuple(bounds[min(2 * c, c + rem)] for c in range(pof2 + 1))
