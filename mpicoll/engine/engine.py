"""The engine: one call record in, the collective run.

Both faces (:class:`mpicoll.Comm`, mpi4py's, and
:class:`mpicoll.ProcessGroup`, torch.distributed's) parse their arguments
into flat views and hand the engine a :class:`Call`. The engine chooses an
algorithm (once per kind of call: collective, requested algorithm, bytes,
dtype, op), then runs it:

- on host or device memory (device calls follow :mod:`mpicoll.device.rules`:
  the caller's stream is waited on, the collective's device work runs on
  the communicator's own streams);
- natively (``Call.native`` makes the MPI library's call on the private
  duplicate) or as a hand-built schedule (compiled once per buffers and
  cached by :class:`~mpicoll.engine.context.Context`);
- blocking, nonblocking (``async_op=True``: a
  :class:`~mpicoll.engine.work.Work`, for the torch-style face;
  :data:`~mpicoll.engine.requests.REQUEST`: an ``MPI.Request``, for the
  mpi4py face; hand-built schedules advance on the progress thread),
  persistent (``async_op`` is
  :data:`~mpicoll.engine.persistent.PERSISTENT`: prepared once, an
  ``MPI.Prequest`` or a :class:`~mpicoll.engine.persistent.Persistent`
  started many times) or replayed: a call remembered under its ``memo``
  runs again with no parsing and no choice, for identity checks and at
  most one dict lookup (:meth:`Engine.replayed`; on device arrays a
  :class:`~mpicoll.engine.device_calls.DeviceLaunch`, which records its
  events anew);
- recorded (:mod:`mpicoll.guard.recorder`): each call numbered, stamped
  and kept in the communicator's flight recorder, which the default
  deadline's watch thread reads (:mod:`mpicoll.guard.deadline`);
- guarded (:mod:`mpicoll.guard.guarded`, :mod:`mpicoll.engine.guarding`):
  in check mode each call's fingerprint is agreed by every rank first
  (:mod:`mpicoll.guard.check_mode`), and under a polled deadline every
  wait is bounded (:mod:`mpicoll.guard.watchdog`) and nothing replayed.

One engine serves every ``mpicoll.Comm`` and ``ProcessGroup`` built on the
same communicator object; its state is the communicator's private
:class:`~mpicoll.engine.context.Context` and small bounded caches.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, NamedTuple

import numpy as np
from mpi4py import MPI

from mpicoll.engine import grequests, progress
from mpicoll.engine.agreeing import Agreeing

from mpicoll.guard import check_mode
from mpicoll.select.choices import Choosing, log, log_to_stderr
from mpicoll.engine.context import context_of, ranks_per_node
from mpicoll.device.cuda import cuda_aware, location
from mpicoll.device.rules import DeviceTarget
from mpicoll.engine.device_calls import DeviceLaunch
from mpicoll.errors import OpTypeError
from mpicoll.guard.guarded import Guard, guard_settings
from mpicoll.args.message import named
from mpicoll.args.mpi_ops import lent_op
from mpicoll.engine.executor import Cursor, Execution, run
from mpicoll.select.policy import (
    CostModel,
    environment_cost_model,
    environment_explain,
    environment_overrides,
    environment_rules,
)
from mpicoll.engine.guarding import Guarding
from mpicoll.engine.persistent import PERSISTENT, form_of, prepare
from mpicoll.engine.likeness import Rerun
from mpicoll.engine.replay import Replays, spec_copy
from mpicoll.engine.requests import REQUEST, native_request, schedule_request
from mpicoll.guard.recorder import note_of
from mpicoll.guard.watchdog import Watchdog, bounded
from mpicoll.schedule.bind import Step
from mpicoll.engine.work import RequestWork, ScheduleWork, Work, then

class Call(NamedTuple):
    """One parsed collective call.

    ``send``/``recv`` are flat views (NumPy, or CuPy for device memory) of
    exactly the elements sent and received on this rank (empty where the
    rank has none); ``count`` is the schedule's count argument, shaped as
    the collective's row says (:mod:`mpicoll.collectives`); ``native``
    prepares the MPI library's call: ``native(nonblocking, send, recv)``
    returns a callable making it (returning a request when nonblocking);
    ``owners`` are the caller's objects behind the views (kept with a
    cached plan, and alive while in flight); ``finish`` runs once the
    result is in ``recv``; ``memo`` is the ``(name, algorithm, buf, a, b, c)`` a
    blocking call is kept for replay under (None: never replayed; see
    :meth:`Engine.replayed`).
    """

    collective: str
    algorithm: str
    send: object
    recv: object
    count: object
    op: object  # mpicoll.Op or None
    root: int
    native: Callable
    owners: tuple
    finish: Callable | None = None
    memo: tuple | None = None
    why_native: str | None = None  # a reason "auto" must run natively
    unstage: Callable | None = None  # unless ``given`` ran: copy the result
    # from scratch to where the caller wants it (a derived datatype's
    # buffer, the front of an in-place reduce-scatter's)
    given: tuple | None = None  # (mpi4py method, args): the caller's own
    # call, made as it is when the call runs natively on host memory
    inplace: bool = False  # MPI.IN_PLACE (where ``send is recv`` cannot
    # tell: a block of recv, possibly empty)
    stage: Callable | None = None  # before every run of a hand-built
    # schedule (replays and persistent starts too): refresh ``send`` from
    # the caller's buffer (in-place alltoall's input copy)
    agreement: object = None  # the count exchange the call made before
    # it (mpicoll.engine.agreeing.Agreement), made again by its replays


class Settings(NamedTuple):
    """What the environment says, read once per communicator:
    ``MPICOLL_<COLLECTIVE>_ALGORITHM`` overrides, the ``MPICOLL_RULES``
    file (a bad one raises here), ``MPICOLL_EXPLAIN``, the node map's
    ``MPICOLL_RANKS_PER_NODE``, the guard (check mode and deadline,
    :mod:`mpicoll.guard.guarded`; the face's keywords override the environment)
    and the cost model of ``MPICOLL_CALIBRATION`` or mpicoll's default."""

    overrides: dict
    rules: object
    explain: bool
    ranks_per_node: int | None  # MPICOLL_RANKS_PER_NODE (a bad one raises)
    guard: Guard = Guard()
    model: CostModel | None = None

    @classmethod
    def from_environment(cls, rank: int,
                         guard: Guard | None = None) -> Settings:
        return cls(environment_overrides(), environment_rules(),
                   environment_explain(), ranks_per_node(rank),
                   guard_settings() if guard is None else guard,
                   environment_cost_model())


class Engine(Replays, Choosing, Agreeing, Guarding):
    """Runs :class:`Call` records on one communicator (collective to
    create: it makes the communicator's private duplicate, once);
    repeated calls through :class:`~mpicoll.engine.replay.Replays`, choices
    through :class:`~mpicoll.select.choices.Choosing`, count agreements
    through :class:`~mpicoll.engine.agreeing.Agreeing`."""

    def __init__(self, comm, settings: Settings) -> None:
        Replays.__init__(self, replay=not settings.guard.polled,
                         by_likeness=not settings.guard.on)
        Choosing.__init__(self)
        guard = settings.guard
        bound = None  # a deadline bounds the private duplicate too
        if guard.timeout is not None:
            bound = partial(bounded, timeout=guard.timeout,
                            action=guard.on_timeout,
                            where={"rank": comm.Get_rank(),
                                   "collective": "first collective"})
        self.ctx = context_of(comm, settings.ranks_per_node, bound)
        self.rank = self.ctx.rank
        self.size = self.ctx.size
        self.thread_multiple = MPI.Query_thread() == MPI.THREAD_MULTIPLE
        self.overrides, self.rules, self.explain, _, guard, self.model = \
            settings
        if self.explain:
            log_to_stderr()
        self.check = guard.check
        rec = self.ctx.recorder
        #: the flight recorder calls are stamped in (None: not stamped)
        self.recorder = rec if rec.size or guard.timeout is not None or \
            guard.check else None
        if guard.watched:
            self.ctx.watch(guard.timeout)
        self.watchdog = None if not guard.polled else Watchdog(
            self.ctx.comm, self.rank, guard.timeout, guard.on_timeout,
            self.ctx.monitor_tags, rec)
        #: waits for mpicoll's own exchanges under the polled deadline;
        #: None: they are blocking calls (marked blocked for the watch
        #: thread's deadline, where there is one)
        self.bounded = self.complete if guard.polled else None
        self.checker = None if not self.check else check_mode.Checker(
            self.ctx.comm, self.bounded, self.where,
            rec if guard.watched else None)
        self.active: check_mode.Active | None = None  # the call being made
        if guard.on:  # every call checked or bounded
            self.launch = self._guarded_launch

    # --------------------------------------------------------------- run

    def launch(self, call: Call, async_op: bool):
        """Run ``call``: None when blocking, a :class:`Work` otherwise, a
        :class:`Persistent` for ``PERSISTENT`` (a guarded engine replaces
        it with :meth:`_guarded_launch`)."""
        if async_op is PERSISTENT:
            return prepare(self, call)
        form = form_of(async_op)
        alg = self.algorithm_for(call, form)
        rec = self.recorder
        if rec is None:
            return self._dispatch(call, alg, async_op)
        note = self.note = note_of(call, alg.name, form)
        seq = rec.begin(note, not async_op)
        if async_op:
            work = self._dispatch(call, alg, async_op)
            work.stamp(rec, seq)
            return work
        try:
            return self._dispatch(call, alg, async_op)
        finally:
            rec.end(seq)

    def _dispatch(self, call: Call, alg, async_op: bool):
        """:meth:`launch` of ``call`` as ``alg``, once numbered."""
        recv = call.recv
        if type(recv) is not np.ndarray:
            on_device = location(recv)
            if on_device is not None:
                return self.launch_device(call, alg, on_device, async_op)
        if alg.native:
            return self._launch_native(call, alg, async_op)
        return self._launch_hand_built(call, alg, async_op)

    def _launch_native(self, call: Call, alg, async_op: bool):
        """:meth:`launch` on host memory through the MPI library: the
        caller's own mpi4py call (``call.given``) where there is one, else
        the library's call on the parsed views. Remembered for replay
        unless an ``MPI.Op`` was lent to a Python callable for it."""
        given, finish = call.given, call.finish
        if given is not None:
            lent = None
            make = self.prepared(given[0], async_op, *given[1],
                                 kept=call.memo is not None)
        else:
            make, lent = self.native_call(call, async_op)
            if call.unstage is not None:
                finish = then(call.unstage, finish)
            if lent is not None:  # freed once the call is complete
                finish = then(lent.Free, finish)
        remember = call.memo is not None and lent is None
        if async_op:
            start = partial(self._native_started, make, finish, async_op,
                            self.where_alg(call, alg), call.owners)
            if remember:
                self._remember(self._restarts, call.memo, start)
            return start()
        make()
        if remember:
            self._remember(self._replays, call.memo, then(make, finish),
                           call.agreement)
            if given is not None and finish is None:
                self.remember(call.memo, getattr(self.ctx.comm, given[0]),
                              given[1], agreement=call.agreement)
        if finish is not None:
            finish()
        return None

    def _native_started(self, make, finish, mode, where, owners):
        """A native nonblocking call made: its request in the form
        ``mode`` asks for (:mod:`mpicoll.engine.requests`)."""
        if mode is not REQUEST:
            return RequestWork(where, make, finish, owners)
        if finish is None:
            return native_request(where, make, owners)
        if not grequests.usable():
            return Work(where=where, request=make(), finish=finish,
                        keep=owners)
        execution = Execution((Step((), (), (), call=make),), self.ctx.comm,
                              0)
        progress.submit(execution, lazy=True)  # MPI progresses the call
        return schedule_request(where, execution, finish, owners)

    def _launch_hand_built(self, call: Call, alg, async_op: bool):
        """:meth:`launch` of a schedule on host memory: its compiled plan
        (cached per buffers by the context) run blocking, or started as a
        :class:`Work` advanced by the progress thread; remembered for
        replay (``call.stage`` refreshes mpicoll's copies of the input for
        a call made again; this call's own were made when parsed)."""
        finish = call.finish
        if call.unstage is not None:
            finish = then(call.unstage, finish)
        plan = self.ctx.plan(alg, call.count, call.root, call.op, call.send,
                             call.recv, call.owners)
        if async_op:
            start = partial(self._started, plan, mode=async_op,
                            where=self.where_alg(call, alg),
                            release=partial(_release, plan, finish),
                            owners=call.owners)
            if call.memo is not None:
                self._remember(self._restarts, call.memo,
                               partial(start, call.stage))
            return start(None)
        run_steps = partial(self._run_steps, plan.steps)
        run_steps()
        if call.memo is not None:
            self._remember(self._replays, call.memo,
                           then(then(call.stage, run_steps), finish),
                           call.agreement)
            if finish is None and call.stage is None and \
                    call.agreement is None:
                self.remember(call.memo, Rerun(
                    self.ctx, alg, call.count, call.root, call.op),
                    (call.send, call.recv), flat=True)
        if finish is not None:
            finish()
        return None

    def _started(self, plan, stage, mode, where, release, owners):
        """``plan`` launched as a nonblocking call (None while a previous
        launch of it is still in flight: the caller then plans anew), on
        the plan's last execution restarted if it had one, in the form
        ``mode`` asks for (:mod:`mpicoll.engine.requests`); ``release``
        (:func:`_release`) runs at completion."""
        if plan.busy:
            return None
        plan.busy = True
        tag = self.ctx.next_tag()
        if stage is not None:
            stage()
        execution = plan.execution
        if execution is None:
            execution = plan.execution = Execution(plan.steps, self.ctx.comm,
                                                   tag)
        else:
            execution.restart(tag)
        if mode is REQUEST and grequests.usable() and (
                execution.finished or progress.submit(
                    execution, lazy=not plan.background)):
            return schedule_request(where, execution, release, owners)
        work = ScheduleWork(where, execution, release, owners)
        if plan.background:
            progress.submit(execution)
        return work

    def native_call(self, call: Call, mode):
        """``(make, lent)``: the prepared native call of ``call`` on its
        views (``mode``: False, True or ``PERSISTENT``), and the ``MPI.Op``
        lent to a Python callable for it (the caller frees it once the
        call is complete), else None."""
        op = call.op
        lent = lent_op(op)
        try:
            return call.native(mode, call.send, call.recv), lent
        finally:
            if lent is not None:
                op.mpi_op = None

    def explain_prepared(self, call: Call, alg, what: str) -> None:
        """Explain mode's line for a prepared (persistent) call."""
        if self.explaining():
            log.info("[rank %d] %s: prepared %s (%s)", self.rank,
                     call.collective, alg.name, what)

    def where_alg(self, call: Call, alg) -> dict:
        return {**self.where(call.collective), "algorithm": alg.name}

    def launch_device(self, call: Call, alg, on_device, async_op: bool):
        """:meth:`launch` for device arrays, by the rules of
        :mod:`mpicoll.device.rules` (:mod:`mpicoll.engine.device_calls`);
        kept for replay under ``call.memo`` (every run records its own
        events)."""
        where = self.where_alg(call, alg)
        op = call.op
        if op is not None and op.ufunc is None and (
                alg.native or op.host_only):
            raise OpTypeError(
                f"operation {op.name!r} on device arrays: only built-in "
                f"operations run natively, and a user MPI.Op only on host "
                f"memory; pass a Python callable (it is given CuPy arrays) "
                f"with a hand-built algorithm, e.g. "
                f"algorithm='recursive_doubling'", **where)
        runtime, device = on_device
        launch = DeviceLaunch(self.ctx, call, alg, DeviceTarget(
            runtime, device, self.ctx.streams(runtime, device).main,
            not cuda_aware()), where)
        if call.memo is not None:
            if async_op:
                self._remember(self._restarts, call.memo,
                               partial(launch.again, async_op))
            else:
                self._remember(self._replays, call.memo,
                               partial(launch.again, False), call.agreement)
        return launch.run(async_op)

    def prepared(self, name: str, nonblocking: bool, *args,
                 kept: bool = True) -> partial:
        """The private communicator's call ``name`` (mpi4py's name, or its
        ``I`` or ``_init`` twin) with ``args`` bound, not yet made. A call
        ``kept`` for replay is made directly again, so arrays are bound
        as :func:`~mpicoll.args.message.named` messages, and message
        specs as copies (:func:`~mpicoll.engine.replay.spec_copy`);
        otherwise ``args`` are bound as they are."""
        if nonblocking is PERSISTENT:
            name += "_init"
        elif nonblocking:
            name = "I" + name[0].lower() + name[1:]
        if kept:
            args = [named(spec_copy(arg)) for arg in args]
        return partial(getattr(self.ctx.comm, name), *args)

    def _run_steps(self, steps) -> None:
        rec = self.recorder
        if rec is None:
            run(steps, self.ctx.comm, self.ctx.next_tag())
            return
        rec.inflight = cursor = Cursor(steps)  # the recorder's round, peer
        try:
            run(steps, self.ctx.comm, self.ctx.next_tag(), cursor)
        finally:
            rec.inflight = None


def _release(plan, finish) -> None:
    """A nonblocking run of ``plan`` is complete: free the plan for the
    next, then ``finish`` (None: nothing)."""
    plan.busy = False
    if finish is not None:
        finish()
