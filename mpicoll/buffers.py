"""mpi4py buffer specifications turned into flat NumPy views, checked.

Accepted, as mpi4py accepts them for the calls mpicoll wraps:

- any object with the buffer protocol or NumPy's array interface (a NumPy
  array, ``bytearray``, ``array.array``, ``memoryview``), typed by its
  format;
- ``[buf, MPI.TYPE]`` and ``(buf, MPI.TYPE)``;
- ``[buf, count, MPI.TYPE]``: the first ``count`` elements of that type.

The result is a 1-D NumPy view sharing the caller's memory, so hand-built
algorithms work on it in place and native calls pass it on (mpi4py infers
the datatype from the dtype). Device arrays (CuPy, or anything with
``__cuda_array_interface__``; see :mod:`mpicoll.cuda`) are accepted in the
same forms and give a 1-D device view. Buffers must be contiguous; output buffers
writable; datatypes basic (those that
:func:`mpi4py.util.dtlib.to_numpy_dtype` maps to a scalar dtype).
Anything else is a :class:`~mpicoll.errors.BufferSpecError` naming the
rank and the call.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI
from mpi4py.util import dtlib

from mpicoll.cuda import copyto, empty_like, runtime_of
from mpicoll.errors import BufferSpecError


def as_buffer(spec, *, what: str, writable: bool, where: dict) -> np.ndarray:
    """Parse ``spec`` (a buffer argument called ``what``) into a flat view."""

    if type(spec) is np.ndarray and spec.flags.c_contiguous and (
            spec.flags.writeable or not writable) and spec.dtype.isbuiltin:
        # The common case, kept cheap: the array itself when already flat
        # (mpi4py takes a base array's buffer faster than a view's).
        return spec if spec.ndim == 1 else spec.reshape(-1)

    def fail(why: str):
        return BufferSpecError(f"{what}: {why}", **where)

    count = datatype = None
    if isinstance(spec, (list, tuple)):
        if not 1 <= len(spec) <= 3:
            raise fail(f"expected [buf], [buf, type] or [buf, count, type], "
                       f"got a sequence of {len(spec)} items")
        obj, *rest = spec
        if rest and isinstance(rest[-1], MPI.Datatype):
            datatype = rest.pop()
        if rest:
            count = rest.pop()
            if not isinstance(count, (int, np.integer)) or count < 0:
                raise fail(f"count must be a non-negative integer, "
                           f"got {count!r}")
        if rest:
            raise fail("expected [buf, count, type]")
    else:
        obj = spec
    runtime = runtime_of(obj)
    try:
        if runtime is not None:
            array = runtime.as_array(obj)
        elif isinstance(obj, np.ndarray):
            array = np.asarray(obj)
        else:
            array = np.asarray(memoryview(obj))
    except TypeError:
        raise fail(f"{type(obj).__name__} is not a buffer") from None
    if not (array.flags.c_contiguous or array.flags.f_contiguous):
        raise fail("buffer is not contiguous")
    if writable and not getattr(array.flags, "writeable", True):  # CuPy
        raise fail("buffer is read-only")
    if datatype is not None:
        dtype = _numpy_dtype(datatype, fail)
        raw = array.reshape(-1, order="A").view(np.uint8)
        usable = raw.size - raw.size % dtype.itemsize
        array = raw[:usable].view(dtype)
    else:
        if array.dtype.hasobject or array.dtype.fields is not None:
            raise fail(f"dtype {array.dtype} has no MPI datatype")
        array = array.reshape(-1, order="A")
    if count is not None:
        if count > array.size:
            raise fail(f"count {count} exceeds the buffer's "
                       f"{array.size} elements")
        array = array[:count]
    return array


def _numpy_dtype(datatype: MPI.Datatype, fail) -> np.dtype:
    try:
        dtype = dtlib.to_numpy_dtype(datatype)
    except (ValueError, TypeError, KeyError):
        dtype = None
    if dtype is None or dtype.fields is not None or dtype.subdtype is not None:
        raise fail("only basic (named) MPI datatypes are supported")
    return dtype


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
        self.starts = tuple(np.cumsum((0, *self.counts[:-1]), dtype=int))
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
        if displs == tuple(np.cumsum((0, *counts[:-1]), dtype=int)):
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
