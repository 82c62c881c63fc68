"""Binding a schedule to arrays: spans become views, local steps callables.

:func:`bind` gives a list of :class:`BoundRound`, which the data simulator
runs as it is and the engine compiles into :class:`Step` tuples (messages
as MPI buffer specs) for its drivers. Binding is the only per-buffer cost
of a call, so the engine caches what it compiles per (schedule, buffers);
running it slices nothing and allocates nothing. Nothing here imports
mpi4py: the data simulator runs schedules without it.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, NamedTuple

import numpy as np

from mpicoll.schedule.core import Copy, Schedule, Span


class BoundRound(NamedTuple):
    sends: tuple[tuple[int, np.ndarray], ...]  # (peer, view)
    recvs: tuple[tuple[int, np.ndarray], ...]
    local: tuple[Callable[[], None], ...]


class Step(NamedTuple):
    """One round as the engine's drivers run it (made from a
    :class:`BoundRound` by the engine, or by the device layer for device
    arrays)."""

    sends: tuple  # ((message, peer), ...)
    recvs: tuple
    local: tuple  # callables run once the messages are done
    ready: object = None  # an event to complete before posting
    call: object = None  # () -> MPI.Request, posted instead of messages
    prepared: tuple = ()  # persistent requests of the messages (receives
    # first), started instead of posting them


def _bounds(x) -> tuple[int, int]:
    """``(first byte, end)`` of a 1-D contiguous host or device view."""
    interface = getattr(x, "__array_interface__", None)
    if interface is None:
        interface = x.__cuda_array_interface__
    start = interface["data"][0]
    return start, start + x.nbytes


def view(arrays: dict[str, np.ndarray], span: Span) -> np.ndarray:
    arr = arrays[span.buf]
    if not 0 <= span.start <= span.stop <= arr.shape[0]:
        raise IndexError(
            f"span {span} outside buffer {span.buf!r} of {arr.shape[0]} elements"
        )
    return arr[span.start:span.stop]


def bind(schedule: Schedule, arrays: dict[str, np.ndarray], op,
         xp=np) -> list[BoundRound]:
    """Bind ``schedule`` to 1-D ``arrays`` keyed by buffer name; ``xp`` is
    their array module (``numpy``, or a device runtime's), whose
    ``copyto`` and ufuncs the local steps call.

    Copies whose source and destination are the same memory (the first copy
    of an in-place call) are dropped here. A reduction whose output partly
    overlaps an input (which element-wise kernels cannot do right) raises
    ``ValueError``.
    """
    rounds = []
    apply = op.kernel(xp) if op is not None else None
    for rnd in schedule.rounds:
        local = []
        for step in rnd.local:
            if isinstance(step, Copy):
                src, dst = view(arrays, step.src), view(arrays, step.dst)
                if _bounds(src) != _bounds(dst):
                    local.append(partial(xp.copyto, dst, src))
            else:
                a, b, dst = (view(arrays, s) for s in step)
                out = _bounds(dst)
                for src in (a, b):
                    at = _bounds(src)
                    if src.size and dst.size and at != out and \
                            at[0] < out[1] and out[0] < at[1]:
                        raise ValueError(
                            f"{step}: output partly overlaps an input"
                        )
                local.append(partial(apply, a, b, dst))
        rounds.append(
            BoundRound(
                tuple((p, view(arrays, s)) for p, s in rnd.sends),
                tuple((p, view(arrays, s)) for p, s in rnd.recvs),
                tuple(local),
            )
        )
    return rounds
