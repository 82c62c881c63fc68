"""The progress thread: hand-built nonblocking collectives advance while
the caller computes.

MPI moves the messages of a round already posted, but only mpicoll can see
that a round finished, run its local steps (a reduction, a copy) and post
the next. Without help that happens only inside ``Work.test()`` /
``wait()``. Here one daemon thread per process does it for every
:class:`~mpicoll.engine.executor.Execution` in flight, on every
communicator, so the caller's thread is free between launching a
collective and waiting for it.

One thread per process, not per communicator: MPI progress and the thread
level are per process, and one thread keeps the cost the same however
many communicators there are. It never blocks on one collective (it tests,
and skips an execution another thread is advancing), so a slow collective
does not hold up the others.

What it costs. The thread sleeps on a condition variable while nothing is
in flight (no CPU), and is woken only by a collective due before its
next look. It leaves a collective alone for its first
``GRACE`` (1 ms) in flight (``LAZY_GRACE``, 10 ms, for one that needs
no progress, only finishing: a short hand-built call, whose generalized
request, :mod:`mpicoll.engine.requests`, the thread completes if the
caller waits on it through mpi4py's functions; so that calls made one
after another do not wake it each time): a caller that waits within
that time (an ``I*`` call or a persistent ``Start`` soon followed by its
wait) finishes it in its own thread, with no hand-over between threads (a hand-over
made an ``Iallreduce`` and its ``wait`` up to 3x the blocking call at
128 KiB on 2 ranks; ``bench/peers.py``'s ``mpicoll nonblocking`` column
shows what remains). Past ``GRACE`` it tests every execution in turn
and, when no round finished, sleeps ``MIN_PAUSE`` doubling up to
``MAX_PAUSE`` seconds (a finished round resets the pause), so an idle
round costs a few microseconds of one core per pause, and a finished
round waits at most ``MAX_PAUSE`` for its successor to be posted. A
schedule on device arrays is advanced from its launch (no grace: its
rounds wait on device work, not on the caller), and when every execution
in flight stands at a fence (device work not yet complete), the thread
waits on the oldest one's event (a CUDA event synchronize, which releases
the GIL) instead of polling: it sees the device work done when it is,
and leaves the GIL to the caller's thread meanwhile. It
takes the GIL to run: NumPy and MPI calls release it, and while the
caller runs pure Python the interpreter hands it over at its switch
interval (see below), so rounds advance at that pace then.
A blocking MPI wait would spin a core inside MPICH, which is why it
sleeps rather than waits in MPI. While anything is in flight the
interpreter's GIL switch interval is cut to ``SWITCH_INTERVAL`` (0.5 ms;
restored when nothing is): MPICH copies large shared-memory messages
inside the thread's test calls, with the GIL held, and at Python's 5 ms
the caller's thread stalled for milliseconds at a time (in
``bench/overlap.py``, the bucketer's launches between layers).

When it runs. It needs ``MPI_THREAD_MULTIPLE`` (mpi4py's default), since
the caller keeps making MPI calls while it tests. At a lower thread level,
or with ``MPICOLL_PROGRESS_THREAD=0`` in the environment (read at first
use) or :func:`set_enabled(False) <set_enabled>`, there is no thread and
hand-built nonblocking collectives advance only inside ``test()`` /
``wait()``, as MPI's own nonblocking collectives may. Explain mode logs
which of the two applies, once. Blocking calls never involve the thread.

At exit the thread is stopped and joined by an ``atexit`` handler, which
runs before mpi4py finalizes MPI (mpi4py finalizes from a C-level exit
hook, after every Python ``atexit`` handler), so no MPI call is in flight
in the thread during ``MPI_Finalize``. Collectives still in flight at
exit are abandoned, as MPI requests left pending would be.
"""

from __future__ import annotations

import atexit
import functools
import logging
import math
import os
import sys
import threading
import time

from mpi4py import MPI

from mpicoll.engine.executor import Execution

MIN_PAUSE = 2e-5  # seconds between idle passes, doubling up to
MAX_PAUSE = 5e-4
GRACE = 1e-3  # seconds an execution is left to its caller after launch
LAZY_GRACE = 0.01  # the same for one that needs no progress (submit)
SWITCH_INTERVAL = 5e-4  # seconds: the GIL hand-over while work is in flight

log = logging.getLogger("mpicoll")
_preference: bool | None = None  # set_enabled(); None: the environment
_environment: bool | None = None  # MPICOLL_PROGRESS_THREAD, read once
_running: ProgressThread | None = None
_start_lock = threading.Lock()
_explained = False  # _explain_once() has logged


class ProgressThread:
    """The thread and the executions it advances."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active: list[Execution] = []
        self._saved_interval: float | None = None
        self._stopping = False
        self._wake_at = math.inf  # when the sleeping thread looks next
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name="mpicoll-progress")
        self._thread.start()

    def submit(self, execution: Execution, delay: float) -> None:
        execution.due = time.monotonic() + delay
        with self._cond:
            if not self._active:
                self._shorten_switch_interval()
            if not execution.queued:  # a plan's execution runs again
                execution.queued = True
                self._active.append(execution)
            if execution.due < self._wake_at:  # else it wakes in time
                self._cond.notify()

    def hurry(self) -> None:
        """Look again now: a caller has started waiting."""
        with self._cond:
            self._cond.notify()

    def _shorten_switch_interval(self) -> None:
        """While collectives are in flight, hand the GIL over every
        ``SWITCH_INTERVAL`` instead of Python's 5 ms: MPICH copies large
        shared-memory messages inside the test calls, holding the GIL, and
        a caller waiting 5 ms for it loses the time the thread saves."""
        self._saved_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._saved_interval, SWITCH_INTERVAL))

    def _restore_switch_interval(self) -> None:
        if self._saved_interval is not None:
            sys.setswitchinterval(self._saved_interval)
            self._saved_interval = None

    def stop(self) -> None:
        """Stop the thread after its current pass and join it."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join()

    def _loop(self) -> None:
        pause = MIN_PAUSE
        while True:
            with self._cond:
                while not self._active and not self._stopping:
                    self._wake_at = math.inf
                    self._cond.wait()
                if self._stopping:
                    self._restore_switch_interval()
                    return
                active = list(self._active)
            moved = False
            now = time.monotonic()
            for execution in active:
                if now >= execution.due:
                    moved |= execution.advance_if_free()
            # Hold no finished execution (its plan and the caller's buffers)
            # past this pass, asleep.
            active = execution = None
            with self._cond:  # also those the caller finished in wait()
                for e in self._active:
                    e.queued = not e.finished
                self._active = [e for e in self._active if e.queued]
                if not self._active:
                    self._restore_switch_interval()
                    continue
                if moved:
                    pause = MIN_PAUSE
                    continue
                now = time.monotonic()
                due = min(e.due for e in self._active)
                fence = None
                if due > now:  # young ones alone: wake when the first is due
                    sleep = due - now
                elif all(e.fence is not None for e in self._active):
                    fence = self._active[0].fence  # all wait on the device
                    self._wake_at = now  # a submit meanwhile: seen after
                elif any(e.waited for e in self._active):
                    sleep = MIN_PAUSE  # a caller waits: no backing off
                else:  # some are being advanced: poll them
                    sleep = pause
                    pause = min(2 * pause, MAX_PAUSE)
                if fence is None:
                    self._wake_at = now + sleep
                    self._cond.wait(sleep)
                    continue
            fence.synchronize()  # the GIL released, as the device works
            pause = MIN_PAUSE


def set_enabled(on: bool | None) -> None:
    """Use the progress thread for collectives launched from now on (True),
    not (False), or as ``MPICOLL_PROGRESS_THREAD`` says (None). Collectives
    already in flight keep the mode they started with. True cannot
    override a thread level below ``MPI_THREAD_MULTIPLE``."""
    global _preference
    _preference = on


def enabled() -> bool:
    """Whether a hand-built nonblocking collective launched now gets the
    progress thread."""
    global _environment
    wanted = _preference
    if wanted is None:
        if _environment is None:
            _environment = os.environ.get(
                "MPICOLL_PROGRESS_THREAD", "1").strip().lower() not in (
                    "0", "false", "no", "off")
        wanted = _environment
    return wanted and _thread_multiple()


@functools.cache
def _thread_multiple() -> bool:
    """The thread level is set once, when MPI starts."""
    return MPI.Query_thread() >= MPI.THREAD_MULTIPLE


def submit(execution: Execution, lazy: bool = False,
           at_once: bool = False) -> bool:
    """Hand ``execution`` to the progress thread (started on first use);
    False, and nothing done, when the thread is off. ``lazy``: it needs no
    progress, only finishing if its caller does not (a generalized
    request, :mod:`mpicoll.engine.requests`, waited on where mpicoll's
    code does not run): the thread leaves it for ``LAZY_GRACE`` instead
    of ``GRACE``, so that calls made one after another do not each wake
    it. ``at_once``: no grace (a schedule on device arrays, whose rounds
    wait for device work the caller does not wait for)."""
    global _running
    if execution.finished:
        return False
    if not enabled():
        _explain_once()
        return False
    if _running is None:
        with _start_lock:
            if _running is None:
                _running = ProgressThread()
                atexit.register(_shutdown)
                _explain_once()
    _running.submit(execution, 0.0 if at_once else
                    LAZY_GRACE if lazy else GRACE)
    return True


def wait_for(execution: Execution) -> None:
    """Block until the progress thread has finished ``execution`` (one
    it advances: ``execution.queued``), polling it without backing off
    meanwhile; its error, if any, is left for ``execution.wait()``.
    Returns at once once the thread is stopped (at exit, before an
    ``atexit`` handler of the program's may still wait): the caller then
    finishes the execution itself."""
    running = _running
    if running is None:
        return
    done = threading.Event()
    execution.waited = True
    execution.on_finished(done.set)
    running.hurry()
    done.wait()


def _shutdown() -> None:
    global _running
    if _running is not None:
        _running.stop()
        _running = None


def _explain_once() -> None:
    """Log (INFO on the ``mpicoll`` logger: explain mode) how hand-built
    nonblocking collectives progress, the first time one is launched."""
    global _explained
    if _explained:
        return
    _explained = True
    if _running is not None:
        log.info("[mpicoll] hand-built nonblocking collectives progress on "
                 "a background thread (MPICOLL_PROGRESS_THREAD=0 turns it "
                 "off)")
    else:
        level = MPI.Query_thread()
        why = ("turned off" if level >= MPI.THREAD_MULTIPLE else
               f"MPI thread level {level} is below MPI_THREAD_MULTIPLE")
        log.info("[mpicoll] no progress thread (%s): hand-built "
                 "nonblocking collectives advance only in test()/wait()",
                 why)
