"""Gradient bucketing: many small all-reduces fused into a few large ones.

A training step produces one gradient per parameter, last layer first.
All-reducing each on its own pays the per-call latency once per array;
all-reducing them all at the end leaves the network idle during the
backward pass. :class:`GradientBucketer` does what PyTorch DDP's
``Reducer`` and Horovod's tensor fusion do: it packs the arrays, in
reverse order, into a few fusion buffers ("buckets") of about
``bucket_bytes`` each, and launches a bucket's nonblocking all-reduce as
soon as every array in it is marked ready::

    bucketer = GradientBucketer(comm, grads, average=True)
    for layer in reversed(range(n)):      # backward pass
        compute_grad(layer)               # writes grads[layer]
        bucketer.mark_ready(layer)        # may launch a bucket's all-reduce
    bucketer.wait()                       # results back in grads; reusable

The packing plan is :func:`plan_buckets`, a pure function.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mpicoll.api.process_group import ProcessGroup
from mpicoll.device.cuda import copyto, empty_like, location, runtime_of
from mpicoll.errors import InvalidArgumentError
from mpicoll.schedule.ops import builtin_op
from mpicoll.engine.work import Work

DEFAULT_BUCKET_BYTES = 25 * 2**20  # PyTorch DDP's bucket_cap_mb default
_SUM = builtin_op("sum")


@dataclass(frozen=True)
class Bucket:
    """One fusion buffer of the plan: ``members`` are indices into the
    caller's list, in packing order; member ``members[k]`` occupies the
    elements ``offsets[k]`` to ``offsets[k] + counts[k]``."""

    dtype: np.dtype
    device: str
    members: tuple[int, ...]
    offsets: tuple[int, ...]
    counts: tuple[int, ...]

    @property
    def count(self) -> int:
        """Elements in the whole buffer."""
        return self.offsets[-1] + self.counts[-1]

    @property
    def nbytes(self) -> int:
        return self.count * self.dtype.itemsize


def plan_buckets(counts: Sequence[int], dtypes: Sequence, bucket_bytes: int,
                 devices: Sequence[str] | None = None) -> tuple[Bucket, ...]:
    """Assign arrays (``counts[i]`` elements of ``dtypes[i]``, on
    ``devices[i]``, default all ``"host"``) to buckets.

    Arrays are taken last first (the order in which a backward pass makes
    gradients). Each (dtype, device) pair has one open bucket; an array
    joins the open bucket of its pair unless that would take the bucket
    past ``bucket_bytes``, in which case the open bucket is closed and a
    new one opened. So buckets never mix dtypes or devices, an array
    larger than ``bucket_bytes`` gets a bucket of its own, and arrays in a
    bucket are adjacent in ready order. Buckets are numbered in the order
    they were opened, which is the order of their first-ready array.
    Cost: O(number of arrays).
    """
    if devices is None:
        devices = ["host"] * len(counts)
    if not len(counts) == len(dtypes) == len(devices):
        raise ValueError("counts, dtypes and devices differ in length")
    if not _is_int(bucket_bytes) or bucket_bytes <= 0:
        raise ValueError(f"bucket_bytes must be a positive integer, got "
                         f"{bucket_bytes!r}")
    opened: list[list] = []  # [dtype, device, members, offsets, counts]
    open_by_kind: dict[tuple, list] = {}
    for i in reversed(range(len(counts))):
        dtype = np.dtype(dtypes[i])
        kind = (dtype, devices[i])
        bucket = open_by_kind.get(kind)
        used = 0 if bucket is None else bucket[3][-1] + bucket[4][-1]
        if bucket is None or (used + counts[i]) * dtype.itemsize > \
                bucket_bytes:
            bucket = [dtype, devices[i], [], [], []]
            opened.append(bucket)
            open_by_kind[kind] = bucket
            used = 0
        bucket[2].append(i)
        bucket[3].append(used)
        bucket[4].append(int(counts[i]))
    return tuple(Bucket(d, dev, tuple(m), tuple(o), tuple(c))
                 for d, dev, m, o, c in opened)


def array_module(x):
    """``numpy``, or the device runtime's module (CuPy) for a device
    array: whose ``divide`` averages a bucket where it lives."""
    runtime = runtime_of(x)
    return np if runtime is None else runtime.xp


class GradientBucketer:
    """Fused, overlapped all-reduce of a fixed list of arrays, step after
    step (DDP's ``Reducer``, Horovod's tensor fusion).

    ``comm``: an ``MPI.Intracomm``, :class:`mpicoll.Comm` or
    :class:`mpicoll.ProcessGroup`.
    ``arrays``: NumPy or CuPy arrays (a device array's bucket is on its
    device, and its copies and averaging run on the caller's current
    stream, ordered with the all-reduce by :mod:`mpicoll.device.rules`),
    C-contiguous, any shapes (0-d and empty
    included) and numeric dtypes; they are reduced in place, ``"sum"``, or
    the mean over ranks with ``average=True`` (floating and complex dtypes
    only: integer means are refused rather than floored). The packing is
    :func:`plan_buckets`; ``algorithm`` is the all-reduce's, as in
    :meth:`mpicoll.ProcessGroup.all_reduce`. ``on_event(what, bucket)``, if given,
    is called with ``"launch"`` right after a bucket's all-reduce starts
    and ``"done"`` when it is first seen complete (for timelines).

    **Collective construction**: every rank passes the same shapes,
    dtypes, ``bucket_bytes``, ``average`` and ``algorithm``; one small
    allgather checks this, and a bad or differing argument raises the same
    :class:`~mpicoll.errors.InvalidArgumentError` on every rank. The
    buckets are allocated here, once (memory: one copy of the arrays).

    **Each step** every rank marks every array ready once
    (:meth:`mark_ready`, in any order, which may differ between ranks),
    then calls :meth:`wait`. Buckets launch strictly in bucket order (a
    bucket completed early waits for the ones before it), so every rank
    issues the same all-reduces in the same order whatever its marking
    order. Cost per step: each array copied into its bucket and back, one
    all-reduce per bucket (``len(buckets)`` calls instead of
    ``len(arrays)``), and one ``test()`` of every bucket in flight per
    :meth:`mark_ready`, which is what advances hand-built algorithms
    between layers.

    An array must not be written between its :meth:`mark_ready` and the
    end of :meth:`wait` (its value was copied at marking; :meth:`wait`
    overwrites it with the result).

    ``bucket_views=True`` (DDP's ``gradient_as_bucket_view``) saves both
    copies: :attr:`arrays` then become views into the buckets (the given
    arrays' values copied in once, here), the caller writes each step's
    gradients into those views, marking copies nothing and :meth:`wait`
    leaves the results in place (``average`` divides each bucket once).
    The arrays given are then left as they were.
    """

    def __init__(self, comm, arrays: Sequence, *,
                 bucket_bytes: int = DEFAULT_BUCKET_BYTES,
                 average: bool = False, algorithm: str = "auto",
                 bucket_views: bool = False,
                 on_event: Callable[[str, int], None] | None = None) -> None:
        self.group = ProcessGroup(
            comm.comm if isinstance(comm, ProcessGroup) else comm)
        self.comm = comm = self.group.comm
        self.average = average
        self.algorithm = algorithm
        self.arrays = list(arrays)
        problem = _problem(self.arrays, bucket_bytes, average)
        layout = (bucket_bytes, bool(average), algorithm,
                  tuple((tuple(x.shape), x.dtype.str, _device(x))
                        for x in self.arrays) if problem is None else None)
        layouts = comm._agreed("GradientBucketer", problem, layout)
        _check_same(layouts, comm)
        self.buckets = plan_buckets([x.size for x in self.arrays],
                                    [x.dtype for x in self.arrays],
                                    bucket_bytes,
                                    [_memory(x) for x in self.arrays])
        self._on_event = on_event
        self._flat = [x.reshape(-1) for x in self.arrays]  # views
        self._slot = [(0, 0)] * len(self.arrays)  # i -> (bucket, offset)
        self._xp = [array_module(self.arrays[b.members[0]])
                    for b in self.buckets]
        self._buffers = [empty_like(self.arrays[b.members[0]], b.count,
                                    b.dtype) for b in self.buckets]
        for b, bucket in enumerate(self.buckets):
            for i, offset in zip(bucket.members, bucket.offsets):
                self._slot[i] = (b, offset)
        self.bucket_views = bucket_views
        if bucket_views:
            for i, x in enumerate(self.arrays):
                b, offset = self._slot[i]
                view = self._buffers[b][offset:offset + x.size]
                copyto(view, self._flat[i])
                self._flat[i] = view
                self.arrays[i] = view.reshape(x.shape)
        self._index_of = {id(x): i for i, x in enumerate(self.arrays)}
        self._reset()

    def _reset(self) -> None:
        self._marked = [False] * len(self.arrays)
        self._pending = [len(b.members) for b in self.buckets]
        self._next = 0  # the next bucket to launch
        self._works: list[tuple[int, Work]] = []  # launched, in order
        self._seen_done = [False] * len(self.buckets)

    def _where(self, call: str) -> dict:
        return {"rank": self.comm.rank,
                "collective": f"GradientBucketer.{call}"}

    def mark_ready(self, which) -> None:
        """Array ``which`` (its index in the list, or the array itself)
        holds this step's gradient: copy it into its bucket; launch every
        bucket, in order, whose arrays are all marked; test the buckets in
        flight. Local checks only (an unknown array, or one marked twice
        this step, raises before anything is copied or sent)."""
        i = self._index(which)
        if self._marked[i]:
            raise InvalidArgumentError(
                f"array {i} was already marked ready this step (wait() "
                f"ends a step)", **self._where("mark_ready"))
        self._marked[i] = True
        b, offset = self._slot[i]
        if not self.bucket_views:
            flat = self._flat[i]
            copyto(self._buffers[b][offset:offset + flat.size], flat)
        self._pending[b] -= 1
        while self._next < len(self.buckets) and \
                self._pending[self._next] == 0:
            self._launch(self._next)
            self._next += 1
        for b, work in self._works:
            if not self._seen_done[b] and work.test():
                self._done(b)

    def _index(self, which) -> int:
        if _is_int(which):
            if 0 <= which < len(self.arrays):
                return int(which)
            what = f"index {which} (there are {len(self.arrays)} arrays)"
        elif id(which) in self._index_of:
            return self._index_of[id(which)]
        else:
            what = (f"{type(which).__name__}: not one of the bucketer's "
                    f"arrays (pass its index or the array object itself)")
        raise InvalidArgumentError(f"unknown array {what}",
                                   **self._where("mark_ready"))

    def _launch(self, b: int) -> None:
        self._works.append((b, self.group.all_reduce(
            self._buffers[b], algorithm=self.algorithm, async_op=True)))
        if self._on_event is not None:
            self._on_event("launch", b)

    def _done(self, b: int) -> None:
        self._seen_done[b] = True
        if self._on_event is not None:
            self._on_event("done", b)

    def missing(self) -> list[int]:
        """Indices of the arrays not yet marked ready this step."""
        return [i for i, marked in enumerate(self._marked) if not marked]

    def wait(self, timeout: float | None = None) -> None:
        """Wait for every bucket, write the results (divided by the number
        of ranks with ``average=True``) into the arrays, and start the next
        step.

        Every array must have been marked this step; that is checked here,
        locally, before waiting: otherwise an ``InvalidArgumentError``
        names the missing arrays and the step stays open (mark them and
        call ``wait()`` again). It is the caller's contract that all ranks
        mark all arrays: a rank that skips one raises here while the
        others wait for its bucket (run under ``python -m mpi4py`` so the
        error ends the job). ``timeout``: seconds for all buckets together,
        else :class:`~mpicoll.errors.CollectiveTimeoutError` (the step
        stays open and may be waited on again).
        """
        missing = self.missing()
        if missing:
            buckets = sorted({self._slot[i][0] for i in missing})
            raise InvalidArgumentError(
                f"arrays {missing} were not marked ready this step, so "
                f"bucket(s) {buckets} never started; every rank must mark "
                f"every array each step (mark them, then wait again)",
                **self._where("wait"))
        deadline = None if timeout is None else time.monotonic() + timeout
        for b, work in self._works:
            if not self._seen_done[b]:
                work.wait(timeout=None if deadline is None else
                          max(0.0, deadline - time.monotonic()))
                self._done(b)
        for b, bucket in enumerate(self.buckets):
            buffer, xp = self._buffers[b], self._xp[b]
            if self.bucket_views:  # the results are the arrays already
                if self.average:
                    xp.divide(buffer, self.comm.size, out=buffer)
                continue
            for i, offset, n in zip(bucket.members, bucket.offsets,
                                    bucket.counts):
                if self.average:
                    xp.divide(buffer[offset:offset + n], self.comm.size,
                              out=self._flat[i])
                else:
                    copyto(self._flat[i], buffer[offset:offset + n])
        self._reset()


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _device(x) -> str:
    """``"host"`` or the device runtime's name: what every rank must
    agree on (ranks may use different GPUs)."""
    where = location(x)
    return "host" if where is None else where[0].name


def _memory(x) -> str:
    """Which memory ``x`` is in: a bucket never mixes two."""
    where = location(x)
    return "host" if where is None else f"{where[0].name}:{where[1]}"


def _problem(arrays, bucket_bytes, average) -> str | None:
    """What is wrong with this rank's arguments, if anything."""
    if not _is_int(bucket_bytes) or bucket_bytes <= 0:
        return f"passed bucket_bytes {bucket_bytes!r}: a positive integer " \
               f"is needed"
    for i, x in enumerate(arrays):
        if not (hasattr(x, "dtype") and hasattr(x, "flags")):
            return f"passed array {i} of type {type(x).__name__}: NumPy " \
                   f"or CuPy arrays are needed"
        what = f"array {i} (shape {tuple(x.shape)}, {x.dtype})"
        if not x.flags.c_contiguous:
            return f"passed {what}, which is not C-contiguous: buckets " \
                   f"copy through a flat view of the array's memory"
        if not getattr(x.flags, "writeable", True):  # CuPy's always are
            return f"passed {what}, which is read-only"
        if not _SUM.supports(x.dtype):
            return f"passed {what}: sum is not defined for {x.dtype}"
        if average and x.dtype.kind in "iu":
            return f"passed {what} with average=True: an integer mean " \
                   f"would be floored; average floating arrays, or sum " \
                   f"and divide yourself"
    ids = {}
    for i, x in enumerate(arrays):
        if id(x) in ids:
            return f"passed the same array as arrays {ids[id(x)]} and {i}"
        ids[id(x)] = i
    return None


def _check_same(layouts: list, comm) -> None:
    """Raise on every rank if any rank's layout differs from rank 0's."""
    differ = [q for q, layout in enumerate(layouts) if layout != layouts[0]]
    if not differ:
        return
    q = differ[0]
    mine, theirs = layouts[0], layouts[q]
    names = ("bucket_bytes", "average", "algorithm")
    for name, a, b in zip(names, mine, theirs):
        if a != b:
            detail = f"{name} {a!r} on rank 0, {b!r} on rank {q}"
            break
    else:
        if len(mine[3]) != len(theirs[3]):
            detail = (f"{len(mine[3])} arrays on rank 0, {len(theirs[3])} "
                      f"on rank {q}")
        else:
            i = next(i for i, (a, b) in enumerate(zip(mine[3], theirs[3]))
                     if a != b)
            detail = (f"array {i} is {_describe(mine[3][i])} on rank 0, "
                      f"{_describe(theirs[3][i])} on rank {q}")
    raise InvalidArgumentError(
        f"the arrays or settings differ between ranks (ranks "
        f"{differ} differ from rank 0): {detail}",
        rank=comm.rank, collective="GradientBucketer")


def _describe(entry) -> str:
    shape, dtype, device = entry
    return f"shape {shape} {np.dtype(dtype)} ({device})"
