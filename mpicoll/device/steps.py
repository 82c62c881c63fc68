"""Steps for device arrays: a schedule ordered by a stream and events.

A hand-built schedule on CUDA arrays runs its local steps (copies and
reductions) as kernels on the communicator's stream, never through the
host, and its messages are posted by the host once the device work they
depend on is done. Two ways to move the bytes, one shape of plan:

- **CUDA-aware MPI**: messages are posted on the device memory itself.
- **Staged**: every buffer has a pinned host mirror. Before a round, the
  pieces of its sends are copied device → mirror on the stream, with an
  event behind each piece; piece ``j`` is posted once its event has
  completed, so the copy of piece ``j + 1`` overlaps the transfer of
  piece ``j``. Each received piece is copied mirror → device on the
  stream as soon as it has arrived, overlapping the next piece's
  transfer; the round's kernels follow on the stream.

Messages are cut into pieces of :data:`PIECE_BYTES` in both modes, so that
ranks that stage and ranks that do not still match message for message.

Fences: every step that posts messages has a ``ready`` event, recorded on
the stream after all device work enqueued before it (the previous round's
kernels and copies). The host posts only after it completed, so MPI never
reads memory a kernel is still writing, nor receives into memory a copy is
still reading. The caller's work is ordered before all of it by the
launcher (:mod:`mpicoll.device.rules`), which makes the stream wait on an
event recorded on the caller's stream; ``end`` is recorded after the last
device work, for the caller's stream to wait on.

This module sees device arrays only through the runtime object
(:mod:`mpicoll.device.cuda`), so it imports no CUDA library.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import numpy as np

from mpicoll.schedule.core import Schedule
from mpicoll.schedule.bind import Step, bind, view

PIECE_BYTES = 1 << 20  # must be the same on every rank


class DeviceSteps(NamedTuple):
    steps: tuple[Step, ...]
    end: object  # the event after the last device work


def on_stream(runtime, device, stream, work) -> None:
    with runtime.use(device, stream):
        for fn in work:
            fn()


def _pieces(nbytes: int) -> int:
    return max(1, -(-nbytes // PIECE_BYTES))


def _piece(raw, j: int):
    return raw[j * PIECE_BYTES:(j + 1) * PIECE_BYTES]


def compile_device(schedule: Schedule, arrays: dict, op, runtime,
                   device: int, stream, mirrors: dict | None) -> DeviceSteps:
    """Steps running ``schedule`` on device ``arrays`` (keyed by buffer
    name, as :func:`~mpicoll.schedule.bind.bind` takes them), staged
    through the pinned host ``mirrors`` (same keys and sizes) or, when
    ``mirrors`` is None, on device memory directly."""
    bound = bind(schedule, arrays, op, xp=runtime.xp)
    launch = partial(on_stream, runtime, device, stream)

    staged = mirrors is not None

    def raw(views, pairs):
        return [(peer, view(views, span).view(np.uint8))
                for peer, span in pairs]

    def record():
        event = runtime.new_event(device)
        return event, partial(event.record, stream)

    def copy(dst, src, j):
        return partial(runtime.copy_async, _piece(dst, j), _piece(src, j),
                       stream)

    steps: list[Step] = []
    work: list = []  # device work to enqueue before the next fence
    for rnd, kernels in zip(schedule.rounds, bound):
        send_spans = [(m.peer, m.span) for m in rnd.sends]
        recv_spans = [(m.peer, m.span) for m in rnd.recvs]
        if not send_spans and not recv_spans:  # stream-ordered work only
            work.extend(kernels.local)
            continue
        sends, recvs = raw(arrays, send_spans), raw(arrays, recv_spans)
        posted_sends, posted_recvs = (
            (raw(mirrors, send_spans), raw(mirrors, recv_spans)) if staged
            else (sends, recvs))
        pieces = max(_pieces(b.nbytes) for _, b in sends + recvs)
        readies = []
        for j in range(pieces):
            if staged:
                work.extend(copy(h, d, j) for (_, h), (_, d)
                            in zip(posted_sends, sends) if _piece(d, j).size)
            if staged or j == 0:
                event, record_it = record()
                work.append(record_it)
                readies.append(event)
        _enqueue(steps, launch, work)
        work = []
        for j in range(pieces):
            back = [copy(d, h, j) for (_, h), (_, d)
                    in zip(posted_recvs, recvs) if staged and
                    _piece(d, j).size]
            steps.append(Step(
                _moving(posted_sends, j), _moving(posted_recvs, j),
                (partial(launch, tuple(back)),) if back else (),
                ready=readies[j if staged else 0]))
        work.extend(kernels.local)
    end, record_end = record()
    work.append(record_end)
    _enqueue(steps, launch, work)
    return DeviceSteps(tuple(steps), end)


def _moving(pairs, j: int) -> tuple:
    """Piece ``j`` of each message as ``(bytes, peer)``; a zero-length
    (synchronising) message travels as piece 0."""
    return tuple((_piece(b, j), p) for p, b in pairs
                 if _piece(b, j).size or (j == 0 and not b.size))


def _enqueue(steps: list[Step], launch, work: list) -> None:
    """Have ``work`` launched on the stream once ``steps`` so far are done:
    as the last local step of the last step, or as a first, message-free
    step."""
    if not work:
        return
    call = partial(launch, tuple(work))
    if steps:
        last = steps[-1]
        steps[-1] = last._replace(local=(*last.local, call))
    else:
        steps.append(Step((), (), (call,)))
