"""``Work``: the handle an ``async_op=True`` or ``I*`` call returns.

On device arrays, completion (``wait``, or a ``test`` that returns True)
makes the caller's current CUDA stream wait on the collective's end event
and returns without blocking the host on the device; ``synchronize()``
also blocks the host until the result is in place
(:mod:`mpicoll.device.rules`).

Like torch.distributed's ``Work``: ``wait(timeout=None)``, ``test()``,
``is_completed()``; and like an mpi4py request: ``Wait()``, ``Test()``, with
:func:`waitall` and :func:`testall` for lists. A hand-built algorithm's
schedule advances on the progress thread (:mod:`mpicoll.engine.progress`) while
the caller computes, and whenever the handle is tested or waited on (the
only way when the thread is off); a native call wraps the MPI library's own
nonblocking request. Either way ``finish`` (copying a staged result to
where the caller wants it, and releasing scratch) runs exactly once, in the
caller's thread, in the first ``test``/``wait`` that sees the operation
complete; an error raised while advancing (a user op's) is raised by
``test``/``wait`` instead, every time."""

from __future__ import annotations

import time

from mpi4py import MPI

from mpicoll.device.rules import hold_until, order_caller
from mpicoll.errors import CollectiveTimeoutError
from mpicoll.engine import progress
from mpicoll.engine.executor import Execution, poll


class Work:
    """A collective in flight. The caller's buffers must stay untouched (and
    alive: the handle keeps them referenced) until it completes."""

    def __init__(self, *, where: dict, execution: Execution | None = None,
                 request: MPI.Request | None = None, finish=None,
                 keep=(), device=None) -> None:
        self._where = where  # rank, collective, algorithm (for errors)
        self._execution = execution
        self._request = request
        self._finish = finish
        self._keep = keep  # buffers kept alive while in flight
        self._device = device  # (DeviceTarget, end event) for device arrays
        self._watch = None  # (Watchdog, seq): the communicator's deadline
        self._completed = False
        if execution is not None and execution.done:
            self._complete()

    _stamp = None  # (Recorder, seq): the call in the flight recorder

    def stamp(self, recorder, seq: int) -> None:
        """This call is ``seq`` in ``recorder``
        (:mod:`mpicoll.guard.recorder`): its waits mark this rank blocked
        in it, its completion ends it."""
        if self._completed:
            recorder.end(seq)
        else:
            self._stamp = (recorder, seq)

    def _complete(self) -> None:
        if not self._completed:
            self._completed = True
            if self._stamp is not None:
                self._stamp[0].end(self._stamp[1])
            if self._device is not None:
                target, end = self._device
                order_caller(target, end)
                hold_until(end, self._keep)
            if self._finish is not None:
                self._finish()
            self._keep = ()

    def watch(self, watchdog, seq: int) -> None:
        """Bound :meth:`wait` without a timeout of its own by
        ``watchdog``'s deadline (:mod:`mpicoll.guard.watchdog`); ``seq`` is the
        call's sequence number."""
        self._watch = (watchdog, seq)

    def synchronize(self, timeout: float | None = None) -> None:
        """:meth:`wait`, then block the host until the result is in place:
        for reading a device result from the host. For host arrays it is
        :meth:`wait`."""
        self.wait(timeout)
        if self._device is not None and self._device[1] is not None:
            self._device[1].synchronize()

    def test(self) -> bool:
        """Advance without blocking; True once the operation is complete."""
        if not self._completed:
            if self._execution is not None:
                done = self._execution.test()
            else:
                done = self._request.Test()
            if done:
                self._complete()
        return self._completed

    def is_completed(self) -> bool:
        """True once complete (advances progress, like ``test``)."""
        return self.test()

    def Test(self, status=None) -> bool:
        """mpi4py's spelling of :meth:`test` (``status`` is not filled)."""
        return self.test()

    def Wait(self, status=None) -> bool:
        """mpi4py's spelling of :meth:`wait` (``status`` is not filled);
        True, as mpi4py's ``Request.Wait`` returns."""
        self.wait()
        return True

    def wait(self, timeout: float | None = None) -> None:
        """Block until complete. With ``timeout`` seconds, raise
        :class:`~mpicoll.errors.CollectiveTimeoutError` naming the peers
        still pending instead of blocking forever; the operation stays in
        flight and may be waited on again. Without one, the
        communicator's deadline applies if it has one (its watchdog asks
        the peers where they are, then aborts or raises)."""
        if self._completed:
            return
        stamp = self._stamp
        if stamp is None:
            self._wait(timeout)
            return
        recorder, seq = stamp
        recorder.blocked = seq
        recorder.inflight = self._execution  # round and peer, hand-built
        try:
            self._wait(timeout)
        finally:
            if recorder.blocked == seq:
                recorder.blocked = 0
                recorder.inflight = None

    def _wait(self, timeout: float | None) -> None:
        if timeout is None and self._watch is not None:
            watchdog, seq = self._watch
            watchdog.wait(self.test, seq, self._where["collective"],
                          self._where, self._pending)
            return
        if timeout is None:
            execution = self._execution
            if execution is not None and self._device is not None and \
                    execution.queued:
                # The progress thread posts its rounds as their device
                # work completes: wait for it to finish them rather than
                # compete with it for the GIL and the MPI library.
                progress.wait_for(execution)
                execution.wait()  # raises its error, if any
            elif execution is not None:
                execution.wait()
            else:
                self._request.Wait()
            self._complete()
            return
        if not poll(self.test, timeout):
            pending = self._pending()
            raise CollectiveTimeoutError(
                f"not complete after {timeout:g} s; still pending: "
                f"{', '.join(pending)}", pending=pending, **self._where)

    def _pending(self) -> list[str]:
        """What this rank still waits for, in words."""
        if self._execution is not None:
            return self._execution.pending()
        return ["the MPI library's request"]


class RequestWork(Work):
    """A :class:`Work` on one request of the MPI library's own and nothing
    else (no schedule, no device events): a native nonblocking call on
    host memory. ``make()`` makes the call and returns its request.
    Lighter than :class:`Work` to make and to wait on (positional
    arguments, class-level defaults, no dispatch in :meth:`wait`), since a
    repeated ``I*`` call makes one per call
    (:meth:`~mpicoll.engine.replay.Replays.restarted`)."""

    _execution = None
    _device = None
    _watch = None

    def __init__(self, where: dict, make, finish, keep) -> None:
        self._where = where
        self._request = make()
        self._finish = finish
        self._keep = keep
        self._completed = False

    def wait(self, timeout: float | None = None) -> None:
        if timeout is None and self._watch is None and self._stamp is None:
            if not self._completed:  # Work._complete, inlined (no device
                self._request.Wait()  # events here): 0.05 us per call
                self._completed = True
                if self._finish is not None:
                    self._finish()
                self._keep = ()
        else:
            Work.wait(self, timeout)

    wait.__doc__ = Work.wait.__doc__


class ScheduleWork(Work):
    """A :class:`Work` on a hand-built schedule's host
    :class:`~mpicoll.engine.executor.Execution` (no request, no device
    events): made from positional arguments with class-level defaults, as
    :class:`RequestWork` is, since a repeated ``I*`` call makes one per
    call."""

    _request = None
    _device = None
    _watch = None

    def __init__(self, where: dict, execution: Execution, finish,
                 keep) -> None:
        self._where = where
        self._execution = execution
        self._finish = finish
        self._keep = keep
        self._completed = False
        if execution.done:
            self._complete()


def waitall(works, timeout: float | None = None) -> None:
    """Wait for every :class:`Work` or mpicoll request
    (:mod:`mpicoll.engine.requests`) in ``works``; with ``timeout``,
    seconds for all of them together (which ``MPI.Request.Waitall``, also
    taking mpicoll's requests, has not)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    for work in works:
        left = None if deadline is None else max(0.0,
                                                  deadline - time.monotonic())
        work.wait(timeout=left)


def testall(works) -> bool:
    """Advance every :class:`Work` or mpicoll request; True when all are
    complete."""
    return all([work.Test() for work in works])


def then(first, after):
    """``first()`` then ``after()``; either may be None (nothing)."""
    if first is None or after is None:
        return after if first is None else first

    def both():
        first()
        after()

    return both
