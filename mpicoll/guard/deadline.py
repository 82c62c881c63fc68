"""The default deadline: a watch thread, at no cost to the calls.

Every communicator mpicoll runs has a deadline unless the user turns it
off: :data:`DEFAULT_TIMEOUT` seconds, ``MPICOLL_TIMEOUT=SECONDS`` or
``timeout=SECONDS`` for another, ``0`` for none. Where MPI runs at
``MPI_THREAD_MULTIPLE`` (mpi4py's default) and the action is ``"abort"``
(the default) the calls themselves do nothing for it beyond what the
flight recorder does (:mod:`mpicoll.guard.recorder`: each call numbers
itself and marks the call this rank is blocked in). One daemon thread per
process does the rest: every :func:`period` seconds it

- answers its peers' where-are-you queries on every watched communicator
  (:class:`~mpicoll.guard.watchdog.Asking`; answering also writes this
  rank's trace file, :mod:`mpicoll.guard.dump`), and
- looks at the call each communicator is blocked in; once the same call
  has been seen blocked for the timeout, it asks every peer where it is
  and listens for :func:`~mpicoll.guard.watchdog.grace` seconds;
- between looks, waits on Python's signal wakeup pipe, so that the trace
  signal (``SIGUSR1``) writes the trace file at once even while the main
  thread is blocked inside MPI (:mod:`mpicoll.guard.dump`).

If a peer did not answer (stopped, dead, or holding the GIL in C code), is
blocked in another call, or is in no call at all (it has not arrived),
the thread writes the trace file and the report (stderr) and aborts
the job (``MPI_Abort``, as NCCL's watchdog does). If every rank is in the
same call, the call is slow, not stuck on a missing rank: the thread says
so once on stderr and looks again after another timeout.

``on_timeout="raise"``, and any deadline below ``MPI_THREAD_MULTIPLE``,
take the polled path of :mod:`mpicoll.guard.watchdog` instead (each
blocking call made nonblocking and tested, not replayed: some
microseconds per call); below ``MPI_THREAD_MULTIPLE`` the default
deadline is off.

At exit an ``atexit`` handler stops and joins the thread before mpi4py
finalizes MPI.
"""

from __future__ import annotations

import atexit
import sys
import threading
import time

from mpi4py import MPI

from mpicoll.guard import dump
from mpicoll.guard.watchdog import Asking, _fail, grace, sorted_answers

DEFAULT_TIMEOUT = 600.0  # seconds, as torch.distributed's NCCL default


def period(timeout: float) -> float:
    """Seconds between the thread's looks: a tenth of the shortest
    watched timeout, within 0.05 s to 1 s."""
    return min(1.0, max(0.05, timeout / 10))


class Watched:
    """One communicator under the thread's deadline: its ``asking``
    (:class:`~mpicoll.guard.watchdog.Asking`), ``timeout`` and
    ``where`` (rank and communicator, for the report)."""

    __slots__ = ("asking", "seen", "since", "timeout", "where")

    def __init__(self, asking: Asking, timeout: float, where: dict) -> None:
        self.asking = asking
        self.timeout = timeout
        self.where = where
        self.seen = 0  # the blocked call seen at the last look
        self.since = 0.0  # when it was first seen

    def look(self, now: float) -> None:
        """Serve queries; act on a call blocked past the timeout."""
        self.asking.serve()
        blocked = self.asking.recorder.blocked
        if blocked != self.seen:
            self.seen, self.since = blocked, now
            return
        if blocked and now - self.since >= self.timeout:
            self._expired(blocked)
            self.since = time.monotonic()  # slow: look again a timeout on

    def _expired(self, seq: int) -> None:
        asking = self.asking
        rec = asking.recorder

        def done() -> bool:
            return rec.blocked != seq

        answers = asking.ask(seq, done, grace(self.timeout))
        if answers is None:
            return
        missing, _here, elsewhere = sorted_answers(
            asking.rank, asking.comm.Get_size(), seq, asking.here()[2],
            answers)
        note = rec.note_at(seq)
        collective = note[0] if note is not None else "the next collective"
        if rec.doing is not None:  # a setup step of mpicoll's own
            collective = f"{collective} ({rec.doing})"
        where = {**self.where, "collective": collective}
        if not missing and not elsewhere:
            sys.stderr.write(
                f"mpicoll: rank {asking.rank}: call #{seq} ({collective}) "
                f"has taken over {self.timeout:g} s; every rank is in it, "
                f"so it is slow, not missing a rank: still waiting\n")
            sys.stderr.flush()
            return
        _fail(asking.error(seq, self.timeout, answers, (), where), "abort")


class _Thread(threading.Thread):
    def __init__(self) -> None:
        super().__init__(name="mpicoll-watch", daemon=True)
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set() and not MPI.Is_finalized():
            with _lock:
                watched = list(_watched.values())
            for item in watched:
                with _lock:
                    if id(item) not in _watched:
                        continue  # freed meanwhile
                    try:
                        item.look(time.monotonic())
                    except Exception as exc:  # never again: say so once
                        del _watched[id(item)]
                        sys.stderr.write(
                            f"mpicoll: rank {item.asking.rank}: the "
                            f"deadline of a communicator stopped: {exc!r}\n")
            pause = period(min((w.timeout for w in watched), default=60.0))
            if not dump.listening():
                self.stop.wait(pause)
            elif dump.wait_for_signal(pause) and not self.stop.is_set():
                dump.dump("signal")  # the main thread may be inside MPI


_lock = threading.RLock()  # held while a communicator is looked at
_watched: dict[int, Watched] = {}
_thread: _Thread | None = None


def watch(asking: Asking, timeout: float, where: dict) -> Watched:
    """Put a communicator under the thread's deadline (the thread starts
    with the first); :func:`unwatch` before freeing it."""
    global _thread
    item = Watched(asking, timeout, where)
    asking.on_query = _dump_on_query
    with _lock:
        _watched[id(item)] = item
        if _thread is None:
            _thread = _Thread()
            _thread.start()
            atexit.register(_stop)
    return item


def unwatch(item: Watched) -> None:
    """Take a communicator off the thread's deadline (waits for a look
    at it in progress)."""
    with _lock:
        _watched.pop(id(item), None)


_last_dump = 0.0


def _dump_on_query() -> None:
    """A peer asks where this rank is: write the trace file (at most once
    a second, however many peers ask)."""
    global _last_dump
    now = time.monotonic()
    if now - _last_dump > 1.0:
        _last_dump = now
        dump.dump("query")


def _stop() -> None:
    global _thread
    thread, _thread = _thread, None
    if thread is not None:
        thread.stop.set()
        dump.wake()
        thread.join()
