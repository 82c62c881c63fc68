"""Persistent collectives (MPI-4's ``MPI_Allreduce_init`` and friends).

``comm.Allreduce_init(sendbuf, recvbuf, op, algorithm=...)`` (every
collective has its ``X_init``; ``ProcessGroup.prepare("all_reduce", t)``
on the torch-style face) checks the arguments, chooses the algorithm and
prepares the call once; the request it returns then runs it on every
``Start()`` and completes it with ``Wait()``/``Test()``, as often as
wanted, until ``Free()``:

- native: the MPI library's own persistent request (``X_init``), started
  and waited on as it is
  (:class:`~mpicoll.engine.persistent_requests.NativePrequest`);
- hand-built: the schedule compiled once on the caller's buffers (its
  plan held, not evicted from the plan cache), its messages persistent
  point-to-point requests (``Recv_init``/``Send_init``) on a tag of the
  request's own; each ``Start`` starts the first round's, and the
  progress thread advances the rest and completes the run's generalized
  request (:class:`~mpicoll.engine.persistent_requests.SchedulePrequest`).
  Without the progress thread, a :class:`ScheduledPersistent` (not an
  ``MPI.Request``) runs it in the caller's ``Wait``/``Test``; a schedule
  of one short round there runs on a
  :class:`~mpicoll.engine.executor.ShortRound`, with no executor loop;
- device arrays, staged or lent-op native calls and calls under a polled
  deadline: a :class:`Persistent`, each ``Start`` launching the prepared
  call as an ``I*`` call would (device work and events per start).

As in MPI, every rank starts its persistent collectives in the same order,
the buffers are read at ``Start`` and written by completion, and starting
a request that is still active is an error (``MPI.ERR_REQUEST``). In
check mode the call is checked once, when it is prepared; under a
polled deadline every ``Wait()`` is bounded; each run is numbered and
stamped in the flight recorder (:mod:`mpicoll.guard.recorder`), where the
watch thread's deadline sees it.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from mpicoll.engine import grequests, progress
from mpicoll.device.cuda import location
from mpicoll.errors import MPIArgumentError
from mpicoll.guard.recorder import note_of, now
from mpicoll.engine.executor import (
    Execution,
    ShortRound,
    free_messages,
    needs_progress,
    short_round,
    prepare_messages,
)
from mpicoll.engine.persistent_requests import native_prequest, schedule_prequest
from mpicoll.engine.work import Work, then

PERSISTENT = "persistent"  # the engine's mode for a prepared call


def form_of(async_op) -> str:
    """The form of a call launched with ``async_op``, as selection names
    it."""
    if async_op is PERSISTENT:
        return "persistent"
    return "nonblocking" if async_op else "blocking"


class Persistent:
    """A prepared collective: ``Start()``, then ``Wait()``/``Test()``
    (or ``wait(timeout)``/``test()``), any number of times; ``Free()``.

    ``start()`` makes one run and returns its :class:`~mpicoll.engine.work.Work`;
    ``free()`` releases what was prepared; ``watch`` is the communicator's
    ``(Watchdog, seq)`` when it has a deadline."""

    def __init__(self, where: dict, start, free=None, watch=None,
                 stamp=None) -> None:
        self._where = where
        self._start = start
        self._free = free
        self._watch = watch
        self._stamp = stamp  # (Recorder, note): each run recorded
        self._seq = 0  # the current run's number in the recorder
        self._work = None  # the current run, None while inactive

    def __repr__(self) -> str:
        state = "freed" if self._start is None else (
            "active" if self.active else "inactive")
        return (f"<mpicoll.Persistent {self._where['collective']} "
                f"({self._where.get('algorithm')}), {state}>")

    @property
    def active(self) -> bool:
        """Started and not yet seen complete."""
        return self._work is not None and not self._work.test()

    def _refuse_start(self, freed: bool) -> None:
        """Raise MPI's ``ERR_REQUEST`` if the request was freed or is
        still active."""
        if freed:
            raise MPIArgumentError("the request was freed",
                                   error_class=MPI.ERR_REQUEST, **self._where)
        if self.active:
            raise MPIArgumentError(
                "the request is still active: Wait or Test it to completion "
                "before starting it again", error_class=MPI.ERR_REQUEST,
                **self._where)

    def Start(self) -> None:
        """Run the prepared collective once (MPI ``Start``)."""
        self._refuse_start(self._start is None)
        stamp = self._stamp
        if stamp is not None:
            self._seq = stamp[0].begin(stamp[1], False)
        work = self._start()
        if stamp is not None:
            work.stamp(stamp[0], self._seq)
        if self._watch is not None:
            work.watch(*self._watch)
        self._work = work

    start = Start

    def Wait(self, status=None) -> bool:
        """Complete the current run (returns at once when inactive); True,
        as mpi4py's ``Prequest.Wait`` returns."""
        self.wait()
        return True

    def wait(self, timeout: float | None = None) -> None:
        """:meth:`Wait`, with ``Work.wait``'s ``timeout``."""
        if self._work is not None:
            self._work.wait(timeout)

    def Test(self, status=None) -> bool:
        """True once the current run is complete (or none is active)."""
        return self._work is None or self._work.test()

    test = Test

    def is_completed(self) -> bool:
        return self.Test()

    def Free(self) -> None:
        """Release what was prepared; the request cannot start again."""
        if self.active:
            raise MPIArgumentError(
                "the request is still active: complete it before freeing it",
                error_class=MPI.ERR_REQUEST, **self._where)
        if self._free is not None:
            self._free()
        self._start = self._free = self._work = None

    free = Free


class _Direct(Persistent):
    """A prepared collective started and completed directly, with no
    :class:`~mpicoll.engine.work.Work` made per run and no deadline; a flag keeps
    the active-request rule. Subclasses say how a run begins
    (``_begin``), is waited for (``_block``) and tested (``_poll``)."""

    def __init__(self, where: dict, free, stamp) -> None:
        super().__init__(where, None, free)
        self._recorder, self._note = stamp or (None, None)
        self._inflight = None  # a hand-built run's position, recorded
        self._running = False
        self._freed = False

    @property
    def active(self) -> bool:
        return self._running and not self.Test()

    def Start(self) -> None:
        if self._running or self._freed:
            self._refuse_start(self._freed)
        self._begin()
        self._running = True
        rec = self._recorder
        if rec is not None:  # Recorder.begin, inlined (a posted call)
            seq = self._seq = rec.seq = rec.seq + 1
            i = seq % rec.slots
            rec.notes[i] = self._note
            rec.begun[i] = now()

    start = Start

    def _completed(self) -> None:
        self._running = False
        rec = self._recorder
        if rec is not None:
            rec.ended[self._seq % rec.slots] = now()

    def Wait(self, status=None) -> bool:
        if self._running:
            rec = self._recorder
            if rec is None:
                self._block()
            else:  # this rank is blocked in the run meanwhile
                rec.blocked = self._seq
                rec.inflight = self._inflight
                try:
                    self._block()
                finally:
                    rec.blocked = 0
                    rec.inflight = None
            self._completed()
        return True

    def wait(self, timeout: float | None = None) -> None:
        if timeout is None or not self._running:
            self.Wait()
        else:  # raises CollectiveTimeoutError when the time is up
            Work(where=self._where, **self._in_flight()).wait(timeout)
            self._completed()

    def Test(self, status=None) -> bool:
        if self._running and self._poll():
            self._completed()
        return not self._running

    test = Test

    def Free(self) -> None:
        super().Free()
        self._freed = True

    free = Free


class ScheduledPersistent(_Direct):
    """A hand-built schedule prepared on host buffers where the progress
    thread is off (else a
    :class:`~mpicoll.engine.persistent_requests.SchedulePrequest`, which
    needs it): its messages are
    persistent requests on the request's own tag
    (:func:`~mpicoll.engine.executor.prepare_messages`), one
    :class:`~mpicoll.engine.executor.Execution` runs them again on each
    ``Start`` (posting the first round; the progress thread advances the
    rest only where :func:`~mpicoll.engine.executor.needs_progress`),
    and ``Wait``/``Test`` complete it. A schedule of one short round runs
    on a :class:`~mpicoll.engine.executor.ShortRound` instead, made with the
    request (:func:`~mpicoll.engine.executor.short_round`)."""

    def __init__(self, where: dict, steps, comm, tag: int, stage, finish,
                 owners, free, stamp=None) -> None:
        super().__init__(where, free, stamp)
        self._steps = steps
        self._comm = comm
        self._tag = tag
        self._owners = owners  # the caller's buffers, alive until freed
        self._stage = stage  # before each run (in-place alltoall's copy)
        self._finish = finish  # once each run is complete
        self._background = needs_progress(steps)
        # one short round: a ShortRound, made now; else an Execution, made at
        # the first start
        self._execution: Execution | ShortRound | None = short_round(steps)

    def _begin(self) -> None:
        if self._stage is not None:
            self._stage()
        execution = self._execution
        if execution is None:
            execution = self._execution = self._inflight = Execution(
                self._steps, self._comm, self._tag)
        else:
            execution.restart()
        if self._background:
            progress.submit(execution)

    def _block(self) -> None:
        self._execution.wait()

    def _poll(self) -> bool:
        return self._execution.test()

    def _in_flight(self) -> dict:
        return {"execution": self._execution}

    def _completed(self) -> None:
        super()._completed()
        if self._finish is not None:
            self._finish()


def prepare(engine, call, watch=None) -> Persistent:
    """``call`` prepared once (:mod:`mpicoll.engine.persistent`): the MPI
    library's persistent request, or the schedule compiled on the
    caller's buffers; device arrays launch anew on each start.
    ``watch``: the ``(Watchdog, seq)`` every run's wait is bounded by."""
    alg = engine.algorithm_for(call, "persistent")
    where = engine.where_alg(call, alg)
    stamp = None if engine.recorder is None else (
        engine.recorder, note_of(call, alg.name, PERSISTENT))
    recv, finish, owners = call.recv, call.finish, call.owners
    on_device = None if type(recv) is np.ndarray else location(recv)
    free = None
    if on_device is not None:
        again = call._replace(memo=None)

        def start():
            if again.stage is not None:
                again.stage()
            return engine.launch_device(again, alg, on_device, True)
    elif alg.native:
        lent = None
        if call.given is None:
            make, lent = engine.native_call(call, PERSISTENT)
            request = make()
            if call.unstage is not None:
                finish = then(call.unstage, finish)
        else:
            request = engine.prepared(call.given[0], PERSISTENT,
                                      *call.given[1])()
        free = request.Free if lent is None else then(request.Free, lent.Free)
        stage = call.stage if call.given is None else None
        if finish is None and watch is None and lent is None and \
                stage is None:
            engine.explain_prepared(call, alg, "the MPI library's "
                                    "persistent request")
            return native_prequest(where, request, owners, stamp)

        def start():
            if stage is not None:  # the request reads mpicoll's copy
                stage()
            request.Start()
            return Work(where=where, request=request, finish=finish,
                        keep=owners)
    else:
        if call.unstage is not None:
            finish = then(call.unstage, finish)
        plan = engine.ctx.plan(alg, call.count, call.root, call.op,
                             call.send, recv, owners)
        plan.busy = True  # this request's own, until freed
        ctx = engine.ctx
        tag = ctx.persistent_tag()
        steps = prepare_messages(plan.steps, ctx.comm, tag)

        def free():
            free_messages(steps)
            plan.busy = False

        if watch is None:
            engine.explain_prepared(call, alg, f"schedule of {len(steps)} "
                                    f"steps, its messages persistent requests")
            made = schedule_prequest if grequests.usable() else \
                ScheduledPersistent
            return made(where, steps, ctx.comm, tag, call.stage, finish,
                        owners, free, stamp)

        def start():
            if call.stage is not None:
                call.stage()
            execution = Execution(steps, ctx.comm, tag)
            work = Work(where=where, execution=execution, finish=finish,
                        keep=owners)
            progress.submit(execution)
            return work
    engine.explain_prepared(
        call, alg, "device: launched on each start" if on_device else
        "the MPI library's persistent request" if alg.native
        else f"schedule of {len(steps)} steps, its messages persistent "
        "requests")
    return Persistent(where, start, free, watch, stamp)


def startall(requests) -> None:
    """``Start()`` every prepared collective of ``requests`` in order
    (``MPI.Prequest.Startall``'s counterpart)."""
    for request in requests:
        request.Start()
