"""Binomial trees and power-of-two folding."""

from __future__ import annotations


def floor_pow2(n: int) -> int:
    """Largest power of two not above ``n`` (``n >= 1``)."""
    return 1 << (n.bit_length() - 1)


def binomial_parent(vrank: int) -> int | None:
    """Parent of ``vrank`` in the binomial tree rooted at virtual rank 0.

    The parent clears the lowest set bit; the root has none.
    """
    return None if vrank == 0 else vrank & (vrank - 1)


def binomial_children(vrank: int, size: int) -> list[int]:
    """Children of ``vrank``, nearest first (``vrank + 1, + 2, + 4 ...``).

    A child ``vrank + m`` exists for every power of two ``m`` below the
    lowest set bit of ``vrank`` (any ``m`` for the root) with
    ``vrank + m < size``. The subtree of child ``vrank + m`` holds virtual
    ranks ``[vrank + m, min(vrank + 2m, size))``.
    """
    low = vrank & -vrank if vrank else 1 << size.bit_length()
    children = []
    m = 1
    while m < low and vrank + m < size:
        children.append(vrank + m)
        m <<= 1
    return children


def fold_rank(rank: int, size: int) -> int | None:
    """Rank in the power-of-two core after folding the surplus ranks in.

    With ``pof2 = floor_pow2(size)`` and ``rem = size - pof2``, each of the
    first ``rem`` even ranks hands its data to the odd rank above it and
    sits out (``None``); the others are renumbered ``0 .. pof2-1`` in rank
    order, so every core rank holds a contiguous range of original ranks
    (what keeps non-commutative folds in order).
    """
    rem = size - floor_pow2(size)
    if rank < 2 * rem:
        return None if rank % 2 == 0 else rank // 2
    return rank - rem


def unfold_rank(core_rank: int, size: int) -> int:
    """Inverse of :func:`fold_rank` for a rank of the power-of-two core."""
    rem = size - floor_pow2(size)
    return core_rank * 2 + 1 if core_rank < rem else core_rank + rem
