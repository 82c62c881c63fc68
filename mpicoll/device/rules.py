"""Running a collective on device arrays: streams, events, staging.

The rules, in one place (as PyTorch's ProcessGroup keeps them):

1. An event is recorded on the caller's current stream and the
   communicator's stream waits on it, so the collective reads what the
   caller's kernels wrote, whatever stream they ran on, without blocking
   the host.
2. The collective's device work (reductions, copies, staging copies) runs
   on the communicator's stream (:class:`DeviceTarget`); the host posts
   messages only once the device work they depend on has completed (see
   :mod:`mpicoll.device.steps`), and an end event is recorded after the
   last device work.
3. Completion (blocking return, ``Work.wait()``, a ``Work.test()`` that
   returns True) makes the caller's current stream wait on the end event:
   kernels the caller launches afterwards on that stream see the result,
   and the host is not blocked. ``Work.synchronize()`` blocks the host
   until the result is in place (for reading it from the host).
4. The caller's arrays, scratch and pinned mirrors stay referenced until
   the end event has completed (:func:`hold_until`), so no memory is
   freed, and reused, under a copy still in flight.

Native calls are posted by the caller's thread, which first waits for
the caller's stream to reach the call (and, staged, for the copy to the
host): MPI matches nonblocking collectives on a communicator by the order
they are posted, so a native call may not be posted later by the progress
thread, after a call made after it. Hand-built calls carry their own tag
and have no such constraint. On a CUDA-aware library the native call gets
the device memory; otherwise it is staged whole: inputs copied to pinned
host memory on the stream, the MPI call on that memory, the output copied
back on the stream.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

from mpicoll.collectives import COLLECTIVES
from mpicoll.device.steps import DeviceSteps, on_stream
from mpicoll.device.memory import address, overlap
from mpicoll.schedule.bind import Step

_held: list[tuple[object, tuple]] = []  # (event, objects) until event done


class DeviceTarget(NamedTuple):
    """Where a device collective runs: the runtime, the device, the
    communicator's stream there, and whether data is staged."""

    runtime: object
    device: int
    stream: object
    staged: bool


def hold_until(event, objects: tuple) -> None:
    """Keep ``objects`` referenced until ``event`` has completed (checked
    at every call, so released at the next device collective or later)."""
    _held[:] = [(e, o) for e, o in _held if not e.done]
    if event is not None and objects and not event.done:
        _held.append((event, objects))


def caller_ready(target: DeviceTarget):
    """An event on the caller's current stream, waited on by the
    communicator's stream: rule 1."""
    runtime, device, stream, _ = target
    ready = runtime.new_event(device)
    ready.record(runtime.current_stream(device))
    stream.wait_event(ready)
    return ready


def order_caller(target: DeviceTarget, end) -> None:
    """Rule 3: the caller's current stream waits on ``end``."""
    if end is not None:
        target.runtime.current_stream(target.device).wait_event(end)


def native_steps(target: DeviceTarget, collective: str, native, send, recv,
                 ready) -> tuple[DeviceSteps, tuple]:
    """The steps of a native call on device arrays, and the pinned
    mirrors they use (held until the end event).

    The host waits here (see the module's docstring) until the caller's
    stream has reached the call (``ready``), then CUDA-aware: one step
    posting ``native`` on the device arrays; nothing runs on the stream,
    so there is no end event. Staged: the inputs (``send``; ``recv`` too
    for a broadcast or when ``send`` lies inside it) are copied into
    pinned mirrors on the stream and waited for, the call is posted on the
    mirrors, and ``recv``'s mirror is copied back on the stream.
    """
    runtime, device, stream, staged = target
    if not staged:
        ready.synchronize()
        return DeviceSteps((Step((), (), (),
                                 call=native(True, send, recv)),),
                           None), ()
    host_recv = runtime.pinned_empty(recv.size, recv.dtype)
    if overlap(send, recv):  # in place: send is part of recv
        offset = (address(send) - address(recv)) // recv.itemsize
        host_send = host_recv[offset:offset + send.size]
        inputs = [(host_recv, recv)]
    else:
        host_send = runtime.pinned_empty(send.size, send.dtype)
        inputs = [(host_send, send)]
        if COLLECTIVES[collective].single_buffer:
            inputs.append((host_recv, recv))
    if send is recv:
        host_send = host_recv
    copied, end = runtime.new_event(device), runtime.new_event(device)
    with runtime.use(device, stream):
        for host, dev in inputs:
            if dev.size:
                runtime.copy_async(host, dev, stream)
        copied.record(stream)
    copied.synchronize()
    back = [partial(runtime.copy_async, recv, host_recv, stream)] \
        if recv.size else []
    finish = partial(on_stream, runtime, device, stream,
                     (*back, partial(end.record, stream)))
    step = Step((), (), (finish,), call=native(True, host_send, host_recv))
    return DeviceSteps((step,), end), (host_send, host_recv)
