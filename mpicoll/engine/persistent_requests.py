"""Persistent collectives as ``MPI.Prequest`` objects, so that mpi4py's
functions take them beside their own (:mod:`mpicoll.engine.requests`
says why).

- :class:`NativePrequest`: the MPI library's own persistent request on
  host memory, with nothing to run at completion. ``MPI.Prequest.Startall``
  and ``MPI.Request.Waitall`` take it as they take mpi4py's; a start made
  that way is not in the flight recorder.
- :class:`SchedulePrequest`: a hand-built schedule prepared on host
  buffers, its messages persistent point-to-point requests (one short
  round of them runs on a :class:`~mpicoll.engine.executor.ShortRound`). Its handle
  is ``MPI.REQUEST_NULL`` while inactive, and each ``Start`` puts a new
  generalized request there, completed once the run is complete (by the
  caller's thread in ``Wait``/``Test``, or by the progress thread), so
  that mpi4py's wait and test functions take it. Only its own ``Start``
  starts it: MPI has no persistent generalized requests, so
  ``MPI.Prequest.Startall`` sees the null handle and raises the MPI
  library's "invalid request" error (:func:`mpicoll.startall` takes
  mpicoll's requests and mpi4py's), and ``req == MPI.REQUEST_NULL`` is
  true while it is inactive, where mpi4py's inactive requests are not
  null. It needs the progress thread and is made only where asked for
  (:mod:`mpicoll.engine.grequests`); else the engine makes a
  :class:`~mpicoll.engine.persistent.Persistent` instead.

Both keep the MPI rules the rest of mpicoll keeps: starting an active
request, or a freed one, raises ``MPI.ERR_REQUEST``, as does freeing an
active one.
"""

from __future__ import annotations

from mpi4py import MPI

from mpicoll.engine import grequests, progress
from mpicoll.engine.executor import Execution, needs_progress, short_round
from mpicoll.engine.requests import Settling, _Waiting
from mpicoll.errors import MPIArgumentError
from mpicoll.guard.recorder import now


def _refuse(where: dict, why: str) -> None:
    raise MPIArgumentError(why, error_class=MPI.ERR_REQUEST, **where)


STILL_ACTIVE = ("the request is still active: Wait or Test it to completion "
                "first")


class _Recorded:
    """Each ``Start`` numbered in the flight recorder (``_recorder``,
    ``_note``: None when the communicator keeps none) and the
    active-request rule (``_active``), for both classes."""

    __slots__ = ()

    def _begin(self) -> None:
        if self._freed:
            _refuse(self._where, "the request was freed")
        if self._active():
            _refuse(self._where, STILL_ACTIVE)
        self._running = True
        rec = self._recorder
        if rec is not None:  # Recorder.begin, inlined (a posted call)
            seq = rec.seq = rec.seq + 1
            i = seq % rec.slots
            rec.notes[i] = self._note
            rec.begun[i] = now()
            self._stamp = (rec, seq)

    def _ended(self) -> None:
        self._running = False
        _Waiting._ended(self)


class NativePrequest(_Recorded, _Waiting, MPI.Prequest):
    """The library's persistent request (:func:`native_prequest`)."""

    __slots__ = ("_freed", "_keep", "_note", "_recorder", "_running",
                 "_stamp", "_watch", "_where")

    def Start(self) -> None:
        self._begin()
        MPI.Prequest.Start(self)

    start = Start  # the torch-style face's spelling

    def _active(self) -> bool:
        return self._running and not self.Get_status()

    def Free(self) -> None:
        if self._active():
            _refuse(self._where, STILL_ACTIVE)
        MPI.Request.Free(self)
        self._freed = True

    free = Free

    def _block(self, status) -> None:
        MPI.Request.Wait(self, status)

    def _poll(self, status=None) -> bool:
        return MPI.Request.Test(self, status)

    def _pending(self) -> list[str]:
        return ["the MPI library's request"]

    def _position(self) -> None:
        return None


def native_prequest(where: dict, request: MPI.Prequest, keep: tuple,
                    stamp) -> NativePrequest:
    """``request`` as a :class:`NativePrequest`; ``keep``: the caller's
    buffers, alive while the request is (mpi4py's persistent collectives
    hold no reference to them: a request made on temporaries would run on
    freed memory); ``stamp``: ``(Recorder, note)`` or None."""
    prequest = NativePrequest(request)
    prequest._keep = keep
    prequest._where = where
    prequest._recorder, prequest._note = stamp or (None, None)
    prequest._stamp = prequest._watch = None
    prequest._running = prequest._freed = False
    return prequest


class SchedulePrequest(_Recorded, Settling, MPI.Prequest):
    """A prepared schedule (:func:`schedule_prequest`)."""

    __slots__ = ("_comm", "_complete", "_error", "_execution", "_finish",
                 "_free", "_freed", "_handle", "_keep", "_lazy", "_note",
                 "_recorder", "_running", "_settled", "_stage", "_stamp",
                 "_steps", "_tag", "_watch", "_where")

    def Start(self) -> None:
        self._begin()
        if self._stage is not None:
            self._stage()
        execution = self._execution
        if execution is None:
            execution = self._execution = Execution(
                self._steps, self._comm, self._tag)
        else:
            execution.restart()
        handle, self._complete = grequests.start()
        self._handle.value = handle  # this request's own handle
        self._settled = False
        self._error = None
        execution.on_finished(self._settle)
        progress.submit(execution, lazy=self._lazy)

    start = Start  # the torch-style face's spelling

    def _active(self) -> bool:
        """Started and not yet waited on (also once complete: MPI's rule,
        which the handle keeps)."""
        return self != MPI.REQUEST_NULL

    def Free(self) -> None:
        if self._freed:
            _refuse(self._where, "the request was freed")
        if self._active():
            _refuse(self._where, STILL_ACTIVE)
        self._free()
        self._freed = True

    free = Free

    def _complete_handle(self) -> None:
        self._complete()


def schedule_prequest(where: dict, steps, comm, tag: int, stage, finish,
                      owners, free, stamp) -> SchedulePrequest:
    """A :class:`SchedulePrequest` running ``steps`` (their messages
    prepared on ``comm`` and ``tag``): ``stage`` before each run,
    ``finish`` after (None: nothing), ``free`` at ``Free``; ``owners``:
    the caller's buffers, alive until then; ``stamp``: ``(Recorder,
    note)`` or None."""
    prequest = SchedulePrequest()
    prequest._handle = grequests.HANDLE.from_address(
        MPI._addressof(prequest))
    prequest._where = where
    prequest._steps, prequest._comm, prequest._tag = steps, comm, tag
    prequest._lazy = not needs_progress(steps)
    prequest._stage, prequest._finish, prequest._free = stage, finish, free
    prequest._keep = owners
    prequest._recorder, prequest._note = stamp or (None, None)
    prequest._stamp = prequest._watch = prequest._error = None
    # one short round: a ShortRound, made now; else an Execution, made at
    # the first start
    prequest._execution = short_round(steps)
    prequest._complete = None
    prequest._running = prequest._freed = False
    prequest._settled = True
    return prequest
