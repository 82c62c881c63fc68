"""Vector messages as schedules see them: blocks packed back to back.

A v-collective's buffer (``[buf, counts, displs, TYPE]``, parsed by
:func:`mpicoll.args.message.vector_message`) has its blocks wherever the
displacements put them; hand-built schedules read and write packed blocks.
:func:`vector_buffer` checks the blocks against the buffer and wraps them
in a :class:`VectorBuffer`, which stages them through packed scratch when
the displacements are not the packed ones.
"""

from __future__ import annotations

from itertools import accumulate

import numpy as np

from mpicoll.device.cuda import copyto, empty_like
from mpicoll.errors import BufferSpecError


class VectorBuffer:
    """A vector specification's blocks, as the schedules see them: packed.

    With packed displacements (each block right after the previous, the
    default) ``array`` is the caller's own memory. Otherwise ``array`` is a
    packed scratch copy: :meth:`pack` copies the caller's blocks into it
    (before a send), :meth:`unpack` copies it back into the blocks (after
    a receive); ``staged`` says which case this is. Cost of staging: one
    copy of the blocks each way that is used.
    """

    def __init__(self, flat: np.ndarray, counts, displs) -> None:
        self.flat = flat
        self.counts = tuple(counts)
        self.staged = displs is not None
        self.starts = packed_displs(self.counts)
        self.displs = tuple(displs) if self.staged else self.starts
        total = sum(self.counts)
        self.array = empty_like(flat, total) if self.staged \
            else flat[:total]

    def _blocks(self, ranks):
        for q in ranks:
            n, d, s = self.counts[q], self.displs[q], self.starts[q]
            yield self.flat[d:d + n], self.array[s:s + n]

    def pack(self, ranks=None) -> None:
        """Copy the caller's blocks (all, or those of ``ranks``) in."""
        if self.staged:
            for mine, packed in self._blocks(ranks or range(len(self.counts))):
                copyto(packed, mine)

    def unpack(self) -> None:
        """Copy every packed block back to its place in the caller's buffer."""
        if self.staged:
            for mine, packed in self._blocks(range(len(self.counts))):
                copyto(mine, packed)


def packed_displs(counts) -> tuple:
    """The displacements of blocks of ``counts`` back to back."""
    return tuple(accumulate(counts[:-1], initial=0)) if counts else ()


def vector_buffer(flat: np.ndarray, counts, displs, *, receiving: bool,
                  what: str, where: dict) -> VectorBuffer:
    """Check ``displs`` (None or the packed ones: no staging) against
    ``flat`` and wrap them. Blocks must lie inside the buffer, displacements
    be non-negative, and blocks a rank receives into must not overlap
    (MPI calls that erroneous); blocks it sends may."""

    def fail(why: str):
        return BufferSpecError(f"{what}: {why}", **where)

    if displs is not None:
        displs = tuple(int(d) for d in displs)
        if len(displs) != len(counts) or min(displs, default=0) < 0:
            raise fail(f"displacements must be {len(counts)} non-negative "
                       f"offsets, got {list(displs)}")
        if displs == packed_displs(counts):
            displs = None
    ends = [d + n for d, n in zip(displs or (), counts)]
    need = max(ends, default=0) if displs is not None else sum(counts)
    if flat.size < need:
        raise fail(f"holds {flat.size} elements, the blocks need {need}")
    if displs is not None and receiving:
        used = sorted((d, d + n) for d, n in zip(displs, counts) if n)
        for (_, end), (start, _) in zip(used, used[1:]):
            if start < end:
                raise fail("receive blocks overlap (displacements "
                           f"{list(displs)}, counts {list(counts)})")
    return VectorBuffer(flat, counts, displs)
