"""Collectives on device arrays: one parsed call, run by the rules of
:mod:`mpicoll.device.rules`, and run again without parsing.

A device call records its own events at every run: the communicator's
stream waits on a new event of the caller's stream, and a new end event
is recorded for the caller's stream to wait on. What a call repeated on
the same objects can skip is everything else: parsing its arguments,
choosing its algorithm, compiling its plan (a hand-built one's is cached
by the context under its buffers' addresses) and, for a staged native
call, allocating its pinned mirrors, which :class:`DeviceLaunch` keeps and
reuses while no earlier run of it is in flight. The engine keeps a
:class:`DeviceLaunch` under the call's memo as it keeps a host call
(:mod:`mpicoll.engine.replay`: the same objects, compared by identity, and
their dtypes); a kept launch declines (the call takes the full path) when
CUDA-awareness changed since (``MPICOLL_CUDA_AWARE`` is read at every
call), since the plan and mirrors belong to one mode.
"""

from __future__ import annotations

from functools import partial

from mpicoll.device.cuda import cuda_aware
from mpicoll.device.rules import (
    BlockingNative,
    DeviceTarget,
    caller_ready,
    hold_until,
    native_steps,
    order_caller,
)
from mpicoll.engine import progress
from mpicoll.engine.agreeing import Declined
from mpicoll.engine.executor import Execution, run
from mpicoll.engine.work import Work, then


class DeviceLaunch:
    """``call`` (a :class:`~mpicoll.engine.engine.Call` on device views)
    as algorithm ``alg`` on ``target``: :meth:`run` launches it, blocking
    (None) or not (a :class:`~mpicoll.engine.work.Work`, on a stream
    borrowed from the communicator's :class:`~mpicoll.device.streams.
    StreamPool` until it completes); :meth:`again` is what a replay
    runs."""

    __slots__ = ("_alg", "_blocking", "_busy", "_call", "_ctx", "_end",
                 "_mirrors", "_stream", "_target", "_where")

    def __init__(self, ctx, call, alg, target: DeviceTarget,
                 where: dict) -> None:
        self._ctx = ctx
        self._call = call
        self._alg = alg
        self._target = target
        self._where = where
        self._mirrors = None  # a staged native call's, kept for the next
        self._busy = False  # a run of it is in flight (its mirrors in use)
        self._blocking = None  # BlockingNative, made at the first such run
        self._stream = None  # the stream the last nonblocking run borrowed
        self._end = None  # the end event of the last run with the mirrors

    def again(self, async_op):
        """Run again (``call.stage`` first refreshes mpicoll's copy of the
        input, where it has one); blocking: raise
        :class:`~mpicoll.engine.agreeing.Declined`, nonblocking: return
        None, when CUDA-awareness changed since the call was kept."""
        if cuda_aware() is self._target.staged:
            if async_op:
                return None
            raise Declined
        if self._call.stage is not None:
            self._call.stage()
        return self.run(async_op)

    def run(self, async_op):
        """Launch the call: None when blocking, else a
        :class:`~mpicoll.engine.work.Work`."""
        call, target, ctx = self._call, self._target, self._ctx
        if not async_op and self._alg.native:
            blocking = self._blocking
            if blocking is None:
                blocking = self._blocking = BlockingNative(
                    target, call.collective, call.native, call.send,
                    call.recv)
            hold_until(blocking.run(), (*call.owners, blocking))
            if call.unstage is not None:
                call.unstage()
            if call.finish is not None:
                call.finish()
            return None
        if async_op:  # a stream of its own while in flight
            pool = ctx.streams(target.runtime, target.device)
            stream = pool.lend(self._stream)
            if stream is not self._stream and self._end is not None and \
                    not self._busy:
                # The last run's copies back from the mirrors this run
                # reuses were on another stream: they come first.
                stream.wait_event(self._end)
            self._stream = stream
            target = target._replace(stream=stream)
        ready = caller_ready(target)
        plan = None
        if self._alg.native:
            mirrors = None if self._busy else self._mirrors
            (steps, end), held = native_steps(target, call.collective,
                                              call.native, call.send,
                                              call.recv, ready, mirrors)
            if mirrors is None and not self._busy:
                self._mirrors = held or None
            if held is self._mirrors:
                self._end = end
        else:
            plan = ctx.plan(self._alg, call.count, call.root, call.op,
                            call.send, call.recv, call.owners, target)
            steps, end, held = plan.steps, plan.end, (plan,)
        tag = ctx.next_tag()
        keep = (*call.owners, *held)
        finish = call.finish
        if call.unstage is not None:
            finish = then(call.unstage, finish)
        if not async_op:
            run(steps, ctx.comm, tag)
            order_caller(target, end)
            hold_until(end, keep)
            if finish is not None:
                finish()
            return None
        if plan is not None:
            plan.busy = True
        self._busy = True

        def release():
            self._busy = False
            if plan is not None:
                plan.busy = False
            if finish is not None:
                finish()

        execution = Execution(steps, ctx.comm, tag)
        # Its device work all enqueued, a later call may use the stream.
        execution.on_finished(partial(pool.give_back, stream))
        work = Work(where=self._where, execution=execution, finish=release,
                    keep=keep, device=(target, end))
        if plan is not None:  # a native call's request needs no thread
            progress.submit(execution, at_once=True)
        return work
