"""What a nonblocking collective on :class:`mpicoll.Comm` returns: an
``MPI.Request``.

mpi4py programs wait on lists of requests (``MPI.Request.Waitall``,
``Waitany``, ``Waitsome``, ``Testall``) that mix collectives with
point-to-point calls. Those functions take ``MPI.Request`` objects only,
and complete them by their MPI handle alone: no Python code of mpicoll's
runs. So what an ``I*`` call on the mpi4py face returns is an
``MPI.Request`` whose handle completes only once the result is in place:

- :class:`NativeRequest`, for a native call on host memory with nothing
  to run at completion: the MPI library's own request (its handle, in a
  subclass). Nothing is added to the wait.
- :class:`ScheduleRequest`, for a hand-built schedule, or a native call
  with work to do at completion (a staged result to copy into place, a
  lent ``MPI.Op`` to free): a generalized request
  (:mod:`mpicoll.engine.grequests`),
  completed once the schedule has run and that work is done, by
  whichever thread gets there first: the caller's, in the request's own
  ``Wait``/``Test``, or the progress thread (:mod:`mpicoll.engine.progress`),
  which is what completes it while the caller waits in mpi4py's list
  functions. Without the progress thread (a thread level below
  ``MPI_THREAD_MULTIPLE``, or ``MPICOLL_PROGRESS_THREAD=0``) nothing
  would, and they are made only where asked for (``MPICOLL_GREQUESTS=1``,
  experimental: :mod:`mpicoll.engine.grequests`); else the engine returns a
  :class:`~mpicoll.engine.work.Work` instead: mpi4py's list functions
  refuse it with a ``TypeError`` rather than wait forever. Cost: one
  ``MPI_Grequest_start`` and its completion per call
  (``bench/call_overhead.py``).

Both keep mpi4py's methods and add what mpicoll's guards need: their own
``Wait``/``Test`` (and mpi4py's lowercase ``wait``, ``test``, returning
what mpi4py's return: None and ``(flag, None)``) mark this rank blocked
in the flight recorder (:mod:`mpicoll.guard.recorder`), are bounded by a
polled deadline, and ``wait(timeout=seconds)`` raises
:class:`~mpicoll.errors.CollectiveTimeoutError` naming the peers still
pending. A wait through mpi4py's list functions is outside what mpicoll
sees: no polled deadline bounds it, and the recorder shows a native call
completed that way as never ended. An error met while running a schedule
(a user op that raised) is raised by the request's own
``Wait``/``Test``; met by the progress thread, it is also written to
``stderr`` at once, since the generalized request completes without it.
"""

from __future__ import annotations

import sys
import threading

from mpi4py import MPI

from mpicoll.engine import grequests
from mpicoll.engine.executor import Execution, poll
from mpicoll.errors import CollectiveTimeoutError


#: the engine's mode for a nonblocking call on the mpi4py face (truthy, as
#: ``async_op=True`` is, which makes a :class:`~mpicoll.engine.work.Work`)
REQUEST = "request"


class _Waiting:
    """``Wait``/``Test`` and mpicoll's extras for both request classes,
    which say how to block (``_block``), test (``_poll``), what is
    pending (``_pending``) and where a schedule is (``_position``)."""

    __slots__ = ()

    def watch(self, watchdog, seq: int) -> None:
        """Bound waits without a timeout of their own by ``watchdog``'s
        polled deadline (:mod:`mpicoll.guard.watchdog`); ``seq``: the
        call's number."""
        self._watch = (watchdog, seq)

    def _ended(self) -> None:
        stamp = self._stamp
        if stamp is not None:
            self._stamp = None
            stamp[0].end(stamp[1])

    def Wait(self, status: MPI.Status | None = None) -> bool:
        if self._stamp is None and self._watch is None:
            self._block(status)
        else:
            self._guarded_wait(status, None)
        return True

    def Test(self, status: MPI.Status | None = None) -> bool:
        done = self._poll(status)
        if done:
            self._ended()
        return done

    def wait(self, status: MPI.Status | None = None, *,
             timeout: float | None = None) -> None:
        """mpi4py's ``wait`` (None for a collective); with ``timeout``
        seconds, raise :class:`~mpicoll.errors.CollectiveTimeoutError`
        naming the peers still pending instead of blocking forever (the
        call stays in flight and may be waited on again)."""
        if timeout is None:
            self.Wait(status)
        else:
            self._guarded_wait(status, timeout)

    def test(self, status: MPI.Status | None = None) -> tuple[bool, None]:
        """mpi4py's ``test``: ``(flag, None)`` for a collective."""
        return self.Test(status), None

    def is_completed(self) -> bool:
        """True once complete (advances, as ``Test``)."""
        return self.Test()

    def _guarded_wait(self, status, timeout: float | None) -> None:
        """Wait marked blocked in the recorder, under the polled deadline
        or ``timeout``."""
        stamp = self._stamp
        if stamp is not None:
            recorder, seq = stamp
            recorder.blocked = seq
            recorder.inflight = self._position()
        try:
            if timeout is not None:
                if not poll(self._poll, timeout):
                    pending = self._pending()
                    raise CollectiveTimeoutError(
                        f"not complete after {timeout:g} s; still pending: "
                        f"{', '.join(pending)}", pending=pending,
                        **self._where)
            elif self._watch is not None:
                watchdog, seq = self._watch
                where = self._where
                watchdog.wait(self._poll, seq, where["collective"], where,
                              self._pending)
            self._block(status)
        finally:
            if stamp is not None and recorder.blocked == seq:
                recorder.blocked = 0
                recorder.inflight = None
        self._ended()


class NativeRequest(_Waiting, MPI.Request):
    """The MPI library's own request of a native call on host memory
    (:func:`native_request` makes it)."""

    __slots__ = ("_keep", "_stamp", "_watch", "_where")

    def stamp(self, recorder, seq: int) -> None:
        """This call is ``seq`` in ``recorder``: its waits mark this rank
        blocked in it, its completion ends it."""
        self._stamp = (recorder, seq)

    def _block(self, status) -> None:
        MPI.Request.Wait(self, status)

    def _poll(self, status=None) -> bool:
        return MPI.Request.Test(self, status)

    def _pending(self) -> list[str]:
        return [] if self == MPI.REQUEST_NULL else \
            ["the MPI library's request"]

    def _position(self) -> None:
        return None


def native_request(where: dict, make, keep: tuple) -> NativeRequest:
    """Make the native call (``make()`` returns its request) and return
    its request as a :class:`NativeRequest`; ``keep``: the caller's
    buffers, alive while the request is."""
    request = NativeRequest(make())
    request._where = where
    request._keep = keep
    request._stamp = request._watch = None
    return request


class Settling(_Waiting):
    """What a generalized request on a schedule adds to :class:`_Waiting`:
    completion by whichever thread finishes the execution
    (:meth:`_settle`), then the wait on the handle. Subclasses say how the
    handle is completed (``_complete_handle``)."""

    __slots__ = ()

    def stamp(self, recorder, seq: int) -> None:
        """As :meth:`NativeRequest.stamp`; at once if already complete."""
        if self._settled:
            recorder.end(seq)
        else:
            self._stamp = (recorder, seq)

    def _settle(self) -> None:
        """The execution has finished (its lock held, in whichever thread
        finished it): run ``finish``, then complete the handle. The
        execution is not touched again by this run (its plan may run the
        next call)."""
        error = self._execution.error
        if error is None and self._finish is not None:
            try:
                self._finish()
            except Exception as exc:
                error = exc
        if error is not None and \
                threading.current_thread().name == "mpicoll-progress":
            sys.stderr.write(
                f"mpicoll: rank {self._where['rank']}: "
                f"{self._where['collective']} "
                f"({self._where.get('algorithm')}) failed: {error!r} "
                f"(raised by the request's own Wait/Test; a wait through "
                f"MPI.Request's functions cannot carry it)\n")
        self._error = error
        self._settled = True
        self._ended()
        self._complete_handle()

    def _block(self, status) -> None:
        if not self._settled:
            try:
                self._execution.wait()
            except Exception:  # kept by _settle, raised below
                pass
        MPI.Request.Wait(self, status)
        if self._error is not None:
            raise self._error

    def _poll(self, status=None) -> bool:
        if not self._settled:
            try:
                self._execution.test()
            except Exception:  # kept by _settle, raised below
                pass
            if not self._settled:
                return False
        done = MPI.Request.Test(self, status)
        if self._error is not None:
            raise self._error
        return done

    def _pending(self) -> list[str]:
        return [] if self._settled else self._execution.pending()

    def _position(self) -> Execution | None:
        return None if self._settled else self._execution


class ScheduleRequest(Settling, MPI.Request):
    """A generalized request completed once its
    :class:`~mpicoll.engine.executor.Execution` has run and ``finish``
    has (:func:`schedule_request` makes it)."""

    __slots__ = ("_complete", "_error", "_execution", "_finish", "_keep",
                 "_settled", "_stamp", "_watch", "_where")

    def _complete_handle(self) -> None:
        self._keep = ()
        self._complete()


def schedule_request(where: dict, execution: Execution, finish,
                     keep: tuple) -> ScheduleRequest:
    """A :class:`ScheduleRequest` on ``execution`` (just started, and
    handed to the progress thread by the caller), ``finish`` (None:
    nothing) to run once it is complete; ``keep``: the caller's buffers,
    alive until then."""
    request = ScheduleRequest()
    handle, request._complete = grequests.start()
    grequests.put(request, handle)
    request._where = where
    request._keep = keep
    request._stamp = request._watch = request._error = None
    request._execution = execution
    request._finish = finish
    request._settled = False
    execution.on_finished(request._settle)
    return request
