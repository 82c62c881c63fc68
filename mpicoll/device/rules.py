"""Running a collective on device arrays: streams, events, staging.

The rules, in one place (as PyTorch's ProcessGroup keeps them):

1. An event is recorded on the caller's current stream and the
   communicator's stream waits on it, so the collective reads what the
   caller's kernels wrote, whatever stream they ran on, without blocking
   the host.
2. The collective's device work (reductions, copies, staging copies) runs
   on a stream of the communicator's (:class:`DeviceTarget`: its main
   stream for a blocking call, one lent to a nonblocking call while it is
   in flight, :mod:`mpicoll.device.streams`); the host posts
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

A *blocking* native call (:class:`BlockingNative`) keeps to rules 1 and 3
with less: since the host waits for it anyway, its copies run on the
caller's current stream itself, where they are ordered after the
caller's kernels and before its next ones without any event between two
streams (one event record and one wait per call, CUDA-aware; staged, the
copies and two records).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

from mpicoll.collectives import COLLECTIVES
from mpicoll.device import steps as device_steps
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
                 ready, mirrors: tuple | None = None
                 ) -> tuple[DeviceSteps, tuple]:
    """The steps of a nonblocking native call on device arrays, and the
    pinned mirrors they use (held until the end event).

    The host waits here (see the module's docstring) until the caller's
    stream has reached the call (``ready``), then CUDA-aware: one step
    posting ``native`` on the device arrays; nothing runs on the stream,
    so there is no end event. Staged: the inputs are copied into pinned
    mirrors on the stream and the call posted on them, in pipelined
    chunks where the collective allows (:func:`staged_chunks`): each
    chunk's call is posted, here, as soon as its own copy is done, while
    the next chunk's copy runs; each chunk's result is copied back on the
    stream as soon as its call completes, while the next one's messages
    move. ``mirrors``: the ``(send, recv)`` mirrors an earlier run of the
    same call returned, reused (that run's copies back from them are
    ordered before this run's copies on the stream), else new ones
    (:func:`staging_mirrors`).
    """
    runtime, device, stream, staged = target
    if not staged:
        ready.synchronize()
        return DeviceSteps((Step((), (), (),
                                 call=native(True, send, recv)),),
                           None), ()
    if mirrors is None:
        mirrors = staging_mirrors(runtime, send, recv)
    chunks = staged_chunks(collective, native, send, recv, mirrors)
    copied = [runtime.new_event(device) for _ in chunks]
    end = runtime.new_event(device)
    requests = post_chunks(runtime, device, stream, chunks, copied)
    steps = []
    for (_, _, back), request in zip(chunks, requests):
        work = [partial(runtime.copy_async, *back, stream)] if back else []
        steps.append(Step((), (), (partial(on_stream, runtime, device,
                                           stream, tuple(work)),),
                          call=partial(_posted, request)))
    last = steps[-1]
    steps[-1] = last._replace(local=(*last.local, partial(
        on_stream, runtime, device, stream, (partial(end.record, stream),))))
    return DeviceSteps(tuple(steps), end), mirrors


def _posted(request):
    """A step's ``call`` for a request posted already."""
    return request


def staging_mirrors(runtime, send, recv) -> tuple:
    """``(host_send, host_recv)``: pinned host arrays the size of ``send``
    and ``recv``; where ``send`` lies in ``recv`` (in place), a view of
    ``host_recv`` at the same offset (the very array when ``send is
    recv``, which the native call passes as ``MPI.IN_PLACE``)."""
    host_recv = runtime.pinned_empty(recv.size, recv.dtype)
    if send is recv:
        return host_recv, host_recv
    if overlap(send, recv):
        offset = (address(send) - address(recv)) // recv.itemsize
        return host_recv[offset:offset + send.size], host_recv
    return runtime.pinned_empty(send.size, send.dtype), host_recv


def staged_inputs(collective: str, send, recv, mirrors) -> list:
    """The ``(mirror, device array)`` pairs to copy to the host before a
    staged native call: ``send`` (``recv`` whole where ``send`` lies in
    it), and ``recv`` too for a collective with a single buffer (a
    broadcast's root data); empty arrays left out."""
    host_send, host_recv = mirrors
    if overlap(send, recv):
        pairs = [(host_recv, recv)]
    else:
        pairs = [(host_send, send)]
        if COLLECTIVES[collective].single_buffer:
            pairs.append((host_recv, recv))
    return [(h, d) for h, d in pairs if d.size]


def staged_chunks(collective: str, native, send, recv, mirrors) -> list:
    """A staged native call as ``(inputs, make, back)`` chunks: the
    ``(mirror, device array)`` pairs to copy to the host, the maker of
    the nonblocking call on the mirrors, and the ``(device array,
    mirror)`` to copy back (None: nothing). One chunk, unless the
    collective works element by element (its row's counts are
    ``"whole"``: allreduce, reduce, bcast, scan, exscan) and the message
    is longer than :data:`~mpicoll.device.steps.PIECE_BYTES`: then one
    chunk per piece of that size, each a call of its own on its part of
    every buffer (an in-place call stays in place, chunk by chunk)."""
    host_send, host_recv = mirrors
    inputs = staged_inputs(collective, send, recv, mirrors)
    n = max(send.size, recv.size)
    step = max(1, device_steps.PIECE_BYTES // max(send.itemsize,
                                                  recv.itemsize))
    if COLLECTIVES[collective].counts != "whole" or n <= step:
        return [(inputs, native(True, host_send, host_recv),
                 (recv, host_recv) if recv.size else None)]
    chunks = []
    for a in range(0, n, step):
        part = slice(a, a + step)
        hr = host_recv[part]
        hs = hr if host_send is host_recv else host_send[part]
        chunks.append(([(h[part], d[part]) for h, d in inputs
                        if d[part].size],
                       native(True, hs, hr),
                       (recv[part], hr) if recv[part].size else None))
    return chunks


def post_chunks(runtime, device: int, stream, chunks: list,
                copied: list) -> list:
    """Copy every chunk's inputs to the host on ``stream``, each chunk's
    followed by its event of ``copied``; then, in order, wait for each
    chunk's event and make its call (posted here, in the caller's thread,
    so in the same order on every rank). What the calls returned: a
    request each, or None from a blocking call."""
    with runtime.use(device, stream):
        for (inputs, _, _), event in zip(chunks, copied):
            for host, dev in inputs:
                runtime.copy_async(host, dev, stream)
            event.record(stream)
    made = []
    for (_, make, _), event in zip(chunks, copied):
        event.synchronize()
        made.append(make())
    return made


class BlockingNative:
    """A blocking native call on device arrays, made again and again on
    the same arrays (a replayed call), with the least device work: all
    of it on the caller's current stream, with no stream of mpicoll's in
    between, since the host waits anyway.

    CUDA-aware: an event recorded on the caller's stream is waited for,
    then the MPI call runs on the device arrays. Staged: the inputs are
    copied into pinned mirrors (made once) on the caller's stream, an
    event behind them waited for, the MPI call made on the mirrors, and
    ``recv``'s mirror copied back on the caller's stream, which orders it
    before the caller's next kernels (rules 1 and 3 hold by construction).
    Per run: one event record and one wait, plus staged two or three
    copies and a second record (the end event the mirrors are held
    until); no event or pinned memory is allocated. A long message of an
    element-wise collective goes in pipelined chunks
    (:func:`staged_chunks`): every chunk's copy is enqueued, each chunk's
    nonblocking call posted once its copy is done, and each chunk's result
    copied back once its call is complete.
    """

    def __init__(self, target: DeviceTarget, collective: str, native, send,
                 recv) -> None:
        runtime, device, _, staged = target
        self._runtime, self._device = runtime, device
        self.end = None
        self._stream = None  # the caller's stream of the last run
        if not staged:
            self._chunks = [((), native(False, send, recv), None)]
            self._copied = [runtime.new_event(device)]
            return
        mirrors = staging_mirrors(runtime, send, recv)
        self._chunks = staged_chunks(collective, native, send, recv,
                                     mirrors)
        if len(self._chunks) == 1:  # one blocking call
            inputs, _, back = self._chunks[0]
            self._chunks = [(inputs, native(False, *mirrors), back)]
        self._copied = [runtime.new_event(device) for _ in self._chunks]
        self.end = runtime.new_event(device)

    def run(self):
        """Make the call; the end event (None CUDA-aware: nothing is left
        on the stream)."""
        runtime, device = self._runtime, self._device
        caller = runtime.current_stream(device)
        if caller is not self._stream:
            if self.end is not None and self._stream is not None:
                # The last run's copies back from the mirrors, on the
                # stream the caller had then, come before this run's
                # writes to them.
                caller.wait_event(self.end)
            self._stream = caller
        chunks = self._chunks
        made = post_chunks(runtime, device, caller, chunks, self._copied)
        with runtime.use(device, caller):
            for (_, _, back), request in zip(chunks, made):
                if request is not None:
                    request.Wait()
                if back is not None:
                    runtime.copy_async(*back, caller)
            if self.end is not None:
                self.end.record(caller)
        return self.end
