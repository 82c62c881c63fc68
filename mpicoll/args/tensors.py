"""The torch-style face's arguments: tensors parsed into flat views,
ops, roots, lists of tensors and split sizes checked, lists staged through
one flat buffer.

:class:`TensorArguments` is a base of :class:`mpicoll.ProcessGroup`; its
errors name the rank and the collective (``self._where``) and are
raised before any message moves.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from mpicoll.collectives import COLLECTIVES
from mpicoll.device.cuda import copyto, empty_like
from mpicoll.errors import (
    BufferSpecError,
    BufferSpecTypeError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    OpTypeError,
)
from mpicoll.args.message import message
from mpicoll.args.mpi_ops import as_op
from mpicoll.schedule.ops import Op


class TensorArguments:
    """Parsing and checking of a ProcessGroup call's arguments."""

    def _tensor(self, x, collective, what, writable=True):
        """A flat view of tensor ``x``'s memory (NumPy, or CuPy for device
        memory), parsed as mpi4py parses a buffer: the buffer protocol,
        DLPack or the CUDA array interface; zero-copy."""
        if type(x) is np.ndarray and x.flags.c_contiguous and (
                x.flags.writeable or not writable) and x.dtype.isbuiltin:
            return x.reshape(-1)  # the common case, kept cheap
        if isinstance(x, (list, tuple)) or x is None:  # torch: TypeError
            raise BufferSpecTypeError(f"{what} must be a tensor, got "
                                      f"{type(x).__name__}",
                                      **self._where(collective))
        if getattr(x, "requires_grad", False):
            x = x.detach()  # the same memory; DLPack refuses grad tensors
        m = message(x, readonly=not writable, where=self._where(collective))
        if m.datatype == MPI.BYTE and COLLECTIVES[collective].reducing:
            # a type MPI has no name for (bfloat16, ...) travels as bytes,
            # which no reduction may be applied to
            raise OpTypeError(f"{what}: no MPI datatype for its element "
                              f"type, so it cannot be reduced",
                              **self._where(collective))
        return m.array

    def _op(self, op, collective) -> Op:
        try:
            return as_op(op)
        except TypeError as exc:  # not an op at all: torch's TypeError
            raise InvalidArgumentTypeError(
                str(exc), **self._where(collective)) from None
        except ValueError as exc:  # an unknown name
            raise InvalidArgumentError(str(exc),
                                       **self._where(collective)) from None

    def _root(self, root, collective) -> int:
        if not isinstance(root, (int, np.integer)) or not \
                0 <= root < self._engine.size:
            raise InvalidArgumentError(
                f"root {root!r} is not a rank of this communicator "
                f"(size {self._engine.size})", **self._where(collective))
        return int(root)

    def _tensors(self, xs, collective, what, writable=True) -> list:
        if not isinstance(xs, (list, tuple)) or len(xs) != self._engine.size:
            raise BufferSpecError(
                f"{what} must list {self._engine.size} tensors, got "
                f"{len(xs) if isinstance(xs, (list, tuple)) else xs!r}",
                **self._where(collective))
        flats = [self._tensor(x, collective, f"{what}[{q}]", writable)
                 for q, x in enumerate(xs)]
        if any(f.dtype != flats[0].dtype for f in flats):
            raise BufferSpecError(f"{what}: every tensor must have one dtype",
                                  **self._where(collective))
        return flats

    def _whole_blocks(self, whole, block, collective, whole_name,
                      block_name) -> None:
        self._same_memory(whole, block, collective)
        size = self._engine.size
        if whole.dtype != block.dtype or whole.size != block.size * size:
            raise BufferSpecError(
                f"{whole_name} must be {size} x {block.size} elements of "
                f"{block.dtype} (the size of {block_name}), got "
                f"{whole.size} of {whole.dtype}", **self._where(collective))

    def _splits(self, splits, buf, row: int, what) -> tuple[int, ...]:
        """Per-rank element counts of ``buf`` from split sizes in rows of
        ``row`` elements, checked; None: equal blocks."""
        c = "alltoallv"
        size = self._engine.size
        if splits is None:
            if buf.size % size:
                raise BufferSpecError(
                    f"{buf.size} elements do not split into {size} equal "
                    f"blocks; pass {what}", **self._where(c))
            return (buf.size // size,) * size
        counts = tuple(int(n) * row for n in splits)
        if len(counts) != size or min(counts) < 0 or sum(counts) != buf.size:
            raise BufferSpecError(
                f"{what} {list(splits)} must be {size} non-negative sizes "
                f"summing to the first dimension", **self._where(c))
        return counts


def row_elements(tensor) -> int:
    """Elements per index of a tensor's first dimension."""
    shape = tuple(tensor.shape)
    if not shape or shape[0] == 0:
        return 1
    return int(np.prod(shape[1:], dtype=np.int64))


def stage_tensors(flats, counts):
    """``(staging, restage)``: the flat views ``flats`` copied end to end
    into one new buffer, and a function copying them into it again (the
    call's ``stage``: a prepared call's every start reads the tensors
    anew)."""
    staging = empty_like(flats[0], sum(counts))

    def restage():
        start = 0
        for f, n in zip(flats, counts):
            copyto(staging[start:start + n], f)
            start += n

    restage()
    return staging, restage


def unstage_tensors(flats, staging, counts):
    """A ``finish`` copying ``staging``'s blocks back into ``flats``."""
    def finish():
        start = 0
        for f, n in zip(flats, counts):
            copyto(f, staging[start:start + n])
            start += n

    return finish
