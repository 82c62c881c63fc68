"""Running a compiled plan on MPI, blocking or as a nonblocking handle.

Every message of one collective call carries the call's tag on the
library's private communicator, so calls never match each other's messages
and the non-overtaking rule orders messages between a pair of ranks the way
the simulator assumes.

Two drivers, one plan format:

- :func:`run` is the blocking loop. A round with one send and one receive is
  a single ``Sendrecv``; one-sided rounds are ``Send``/``Recv``; others post
  everything and ``Waitall``. Then the round's local steps run.
- :class:`Execution` is the nonblocking state machine behind ``async_op`` and
  ``I*`` calls: ``test()`` advances as far as messages allow without
  blocking; ``wait(timeout)`` blocks (``Waitall``), or polls until the
  deadline and reports whether it finished (``pending()`` then names the
  peers still outstanding). The progress thread of
  :mod:`mpicoll.engine.progress` advances it too, so rounds move on while the
  caller computes.

Messages travel as bytes (``MPI.BYTE``): schedules never convert types, and
dtypes MPI has no name for (``float16``) move as well as any other.

Steps on device arrays (:mod:`mpicoll.device.steps`) add two things: a
``ready`` event that must have completed before the step's messages are
posted (the device work that wrote them, or will next touch the memory
they use), and ``call``, a prepared nonblocking MPI call (a native
collective) posted instead of messages. Both drivers honour them: the
blocking one synchronizes the event, the nonblocking one queries it and
stays where it is until it has completed.
"""

from __future__ import annotations

import threading
import time

import numpy as np
from mpi4py import MPI

from mpicoll.schedule.bind import BoundRound, Step


#: A started schedule whose only round of messages is at most this long
#: (bytes, all messages together) completes without the progress thread:
#: MPI delivers such messages eagerly, so nothing is left to advance but
#: the final local steps, which the wait runs.
EAGER_BYTES = 64 * 1024


def compile_plan(plan: list[BoundRound]) -> tuple[Step, ...]:
    """Turn a bound host plan into the steps the drivers run: each message
    an ``[MPI.buffer, MPI.BYTE]`` spec of its bytes, which mpi4py takes
    without inferring a datatype (about 0.1 us less per message than the
    array itself)."""

    def raw(pairs):
        return tuple(([MPI.buffer(v.view(np.uint8)), MPI.BYTE], peer)
                     for peer, v in pairs)

    return tuple(Step(raw(r.sends), raw(r.recvs), r.local) for r in plan)


def prepare_messages(steps: tuple[Step, ...], comm: MPI.Comm,
                     tag: int) -> tuple[Step, ...]:
    """``steps`` with each round's messages made persistent requests once
    (``Recv_init``/``Send_init`` on ``tag``), for a schedule that runs
    again and again on the same buffers and tag (a persistent
    collective). :func:`free_messages` frees them."""
    return tuple(step._replace(prepared=tuple(
        [comm.Recv_init(b, p, tag) for b, p in step.recvs]
        + [comm.Send_init(b, p, tag) for b, p in step.sends]))
        for step in steps)


def free_messages(steps: tuple[Step, ...]) -> None:
    """Free the persistent requests of :func:`prepare_messages`."""
    for step in steps:
        for request in step.prepared:
            request.Free()


def needs_progress(steps: tuple[Step, ...]) -> bool:
    """Whether a started host schedule needs advancing while the caller
    computes (by the progress thread): more than one round of messages, or
    one longer than :data:`EAGER_BYTES`."""
    rounds = [s for s in steps if s.sends or s.recvs]
    return len(rounds) > 1 or any(
        sum(len(spec[0]) for spec, _ in (*s.sends, *s.recvs)) > EAGER_BYTES
        for s in rounds)


def short_round(steps: tuple[Step, ...]) -> ShortRound | None:
    """A :class:`ShortRound` for host ``steps`` prepared by
    :func:`prepare_messages` whose messages are one short round (no
    progress needed, :func:`needs_progress`), else None."""
    if needs_progress(steps) or any(s.ready is not None or s.call is not None
                                    for s in steps):
        return None
    at = next((i for i, s in enumerate(steps) if s.prepared), len(steps))
    if at == len(steps):  # no messages: every local step at the start
        return ShortRound([fn for s in steps for fn in s.local], (), [], [])
    step = steps[at]
    return ShortRound([fn for s in steps[:at] for fn in s.local], step.prepared,
                 [fn for s in steps[at:] for fn in s.local],
                 _message_names(step))


def _message_names(step: Step) -> list[str]:
    """What each of ``step``'s message requests is, in words, in their
    order (receives, then sends)."""
    return [f"receive from rank {p}" for _, p in step.recvs] + [
        f"send to rank {p}" for _, p in step.sends]


class Cursor:
    """Where a blocking :func:`run` is: its ``steps`` and the index of
    the step it is at (``at``), for the flight recorder
    (:mod:`mpicoll.guard.recorder`) to read while the call is blocked.
    An :class:`Execution` reads the same way."""

    __slots__ = ("at", "steps")

    def __init__(self, steps: tuple[Step, ...]) -> None:
        self.steps = steps
        self.at = 0


def run(steps: tuple[Step, ...], comm: MPI.Comm, tag: int,
        cursor: Cursor | None = None) -> None:
    """Run ``steps`` to completion, blocking (``cursor``, if given, kept
    at the step being run)."""
    waitall = MPI.Request.Waitall
    for at, (sends, recvs, local, ready, call, _) in enumerate(steps):
        if cursor is not None:
            cursor.at = at
        if ready is not None:
            ready.synchronize()
        if call is not None:
            call().Wait()
        elif sends and recvs:
            if len(sends) == 1 and len(recvs) == 1:
                (sbuf, dst), (rbuf, src) = sends[0], recvs[0]
                comm.Sendrecv(sbuf, dst, tag, rbuf, src, tag)
            else:
                waitall([comm.Irecv(b, p, tag) for b, p in recvs]
                        + [comm.Isend(b, p, tag) for b, p in sends])
        elif recvs:
            if len(recvs) == 1:
                comm.Recv(recvs[0][0], recvs[0][1], tag)
            else:
                waitall([comm.Irecv(b, p, tag) for b, p in recvs])
        elif sends:
            if len(sends) == 1:
                comm.Send(sends[0][0], sends[0][1], tag)
            else:
                waitall([comm.Isend(b, p, tag) for b, p in sends])
        for step in local:
            step()


def poll(test, timeout: float) -> bool:
    """Call ``test()`` with backing-off pauses until it returns True (then
    True) or ``timeout`` seconds pass (then False)."""
    deadline = time.monotonic() + timeout
    pause = 1e-6
    while not test():
        if time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 1e-3)
    return True


class _Advancing:
    """What both drivers of a started schedule share.

    Any thread may advance it, one at a time (a lock per run): :meth:`wait`
    takes the lock; :meth:`test` and the progress thread's
    :meth:`advance_if_free` (:mod:`mpicoll.engine.progress`) only try it,
    skipping a run another thread is advancing, so neither ever waits for
    the other's reduction. An exception raised while advancing (a user
    op's, say) ends the run: it is kept in ``error`` and raised again by
    every later ``test``/``wait``. Subclasses say how a run starts
    (``restart``), advances (``_advance(block)``) and where it is
    (``at``)."""

    due = 0.0  # the progress thread's: when it may advance this
    queued = False  # in the progress thread's list
    fence = None  # the event of device work it stopped at, not yet done
    waited = False  # a caller waits for the progress thread to finish it

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._then = ()  # on_finished's callables, for this run
        self.done = True
        self.error: Exception | None = None

    @property
    def finished(self) -> bool:
        """Complete or failed: nothing left for any thread to advance."""
        return self.done or self.error is not None

    def on_finished(self, then) -> None:
        """Call ``then()`` once this run has finished (now, if it has),
        in the thread that finishes it, holding the lock: what a
        generalized request (:mod:`mpicoll.engine.requests`) completes
        on, a device call's stream is given back on, and a device
        ``Work.wait`` waits for."""
        with self._lock:
            self._then = (*self._then, then)
            if self.finished:
                self._finished()

    def _finished(self) -> None:
        thens, self._then = self._then, ()
        for then in thens:
            then()

    def _guarded(self, block: bool) -> None:
        """Advance; keep and raise an error. The caller holds the lock."""
        if self.error is not None:
            raise self.error
        try:
            self._advance(block)
        except Exception as exc:
            self.error = exc
            self._finished()
            raise
        if self.done and self._then:
            self._finished()

    def test(self) -> bool:
        """Advance without blocking; True once complete. While another
        thread is advancing it (the progress thread running a round's
        reduction, say), report without waiting for that thread."""
        if not self._lock.acquire(blocking=False):
            if self.error is not None:
                raise self.error
            return self.done
        try:
            self._guarded(block=False)
        finally:
            self._lock.release()
        return self.done

    def advance_if_free(self) -> bool:
        """Advance without blocking unless another thread is advancing;
        True if a round completed. An error is kept, not raised."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            before = self.at
            if not self.finished:
                try:
                    self._guarded(block=False)
                except Exception:  # kept in self.error for test/wait
                    pass
            return self.at != before or self.finished
        finally:
            self._lock.release()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until complete and return True; with ``timeout`` (seconds)
        poll instead, returning False if the deadline passes first."""
        if timeout is None:
            with self._lock:
                self._guarded(block=True)
            return True
        return poll(self.test, timeout)


class Execution(_Advancing):
    """A schedule in flight: post a round, test it, run its local steps,
    post the next (the protocol of :class:`_Advancing`)."""

    def __init__(self, steps: tuple[Step, ...], comm: MPI.Comm,
                 tag: int) -> None:
        super().__init__()
        self._steps = steps
        self._comm = comm
        self._tag = tag
        self.restart()

    def restart(self, tag: int | None = None) -> None:
        """Run the steps from the first again (a persistent collective's
        next start, or a plan's next nonblocking call on its new ``tag``;
        only once finished): post the first round, and leave the rest to
        ``test``/``wait``/the progress thread (which may still hold the
        finished run: hence the lock)."""
        with self._lock:
            if tag is not None:
                self._tag = tag
            self._next = 0
            self._posted = False  # the current step's messages are posted
            self._requests: list[MPI.Request] = []
            self.done = False
            self.error = None
            try:
                self._advance(block=False, start=True)
            except Exception as exc:  # raised by test/wait, as any later
                self.error = exc

    @property
    def steps(self) -> tuple[Step, ...]:
        return self._steps

    @property
    def at(self) -> int:
        """The index of the step being run (as :class:`Cursor`'s)."""
        return self._next

    def _post(self, step: Step) -> None:
        comm, tag = self._comm, self._tag
        if step.prepared:
            MPI.Prequest.Startall(step.prepared)
            self._requests = list(step.prepared)
        elif step.call is not None:
            self._requests = [step.call()]
        else:
            self._requests = [comm.Irecv(b, p, tag) for b, p in step.recvs] \
                + [comm.Isend(b, p, tag) for b, p in step.sends]
        self._posted = True

    def _advance(self, block: bool, start: bool = False) -> None:
        """Post, complete and run steps in order, waiting for each step's
        fence and messages (``block``) or stopping at the first that is
        not yet done; ``start``: stop once the first messages are posted
        (what a launch does, without testing them)."""
        while self._next < len(self._steps):
            step = self._steps[self._next]
            if not self._posted:
                if step.ready is not None:
                    if block:
                        step.ready.synchronize()
                    elif not step.ready.done:
                        self.fence = step.ready
                        return
                    self.fence = None
                self._post(step)
                if start and self._requests:
                    return
            if self._requests:
                if block:
                    MPI.Request.Waitall(self._requests)
                elif not MPI.Request.Testall(self._requests):
                    return
                self._requests = []
            self._posted = False
            for fn in step.local:
                fn()
            self._next += 1
        self.done = True

    def pending(self) -> list[str]:
        """The operations of the current round not yet complete."""
        with self._lock:
            if self.finished:
                return []
            if not self._posted:
                return [f"device work before step {self._next}"]
            step = self._steps[self._next]
            what = ["the MPI library's call"] if step.call is not None \
                else _message_names(step)
            return [w for req, w in zip(self._requests, what)
                    if not req.Test()]


class ShortRound(_Advancing):
    """A prepared schedule of one short round of messages (or none), run
    with no :class:`Execution` loop: :meth:`restart` runs the local steps
    before the round and starts its persistent requests; completing them
    runs the local steps of the round and after it (all of them at
    :meth:`restart` when there are no messages). Eager messages leave
    nothing to advance but those last steps: the caller's ``test``/``wait``
    runs them, or the progress thread when a generalized request waits on
    it (:mod:`mpicoll.engine.requests`)."""

    at = 0  # one round: "a round completed" is "finished"
    steps = ()  # no position to record (mpicoll.guard.recorder)

    def __init__(self, before: list, requests: tuple, after: list,
                 names: list[str]) -> None:
        super().__init__()
        self._before = before
        self._requests = list(requests)  # receives first, then sends
        self._after = after
        self._names = names  # what each request is, in words

    def restart(self) -> None:
        """Start a run (only once the previous one is finished); an error
        in a local step is kept for ``test``/``wait``, as
        :meth:`Execution.restart` keeps it."""
        with self._lock:
            self.done = False
            self.error = None
            try:
                for fn in self._before:
                    fn()
            except Exception as exc:
                self.error = exc
                return
            if self._requests:
                MPI.Prequest.Startall(self._requests)
            else:
                self.done = True

    def _advance(self, block: bool) -> None:
        if self.done:
            return
        if block:
            MPI.Request.Waitall(self._requests)
        elif not MPI.Request.Testall(self._requests):
            return
        for fn in self._after:
            fn()
        self.done = True

    def pending(self) -> list[str]:
        """The messages of the round not yet complete."""
        with self._lock:  # the progress thread may be testing them
            if self.finished:
                return []
            return [w for req, w in zip(self._requests, self._names)
                    if not req.Test()]
