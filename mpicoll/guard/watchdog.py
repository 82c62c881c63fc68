"""Deadlines: no collective call waits forever.

With ``MPICOLL_TIMEOUT=SECONDS`` or ``mpicoll.Comm(comm, timeout=SECONDS)``
every collective call on the communicator has a deadline: blocking calls
are made in their nonblocking form and polled (a native call as the MPI
library's ``I`` call, a hand-built one as its schedule's execution), and
``Work.wait()`` with no timeout of its own waits at most that long. While
it waits a rank answers *where are you* queries from its peers.

When the deadline passes, the rank asks every peer where it is (one
8-byte message each on the private communicator, reserved tags) and
listens for a short grace period (a quarter of the timeout, 0.2 s to
2 s), still testing its own call. A peer waiting in a call with a
deadline answers with its call's sequence number and collective; one that
does not answer is not inside an mpicoll call on this communicator (it
has not arrived: busy, blocked in something else, stopped or dead). The
rank then raises :class:`~mpicoll.errors.CollectiveTimeoutError` naming
the collective, its sequence number, the ranks that have not arrived,
the ranks at other calls, and (hand-built algorithms) the messages still
pending.

What happens next is ``MPICOLL_ON_TIMEOUT`` / ``on_timeout=``:
``"abort"`` (the default, as NCCL's watchdog does: the message goes to
stderr and ``MPI_Abort`` ends the whole job, since a communicator with a
collective half done cannot be used again) or ``"raise"`` (the error is
raised and the communicator is left to the caller, the call still posted:
catch it to report, then end the job or stop using the communicator).

Costs: a blocking call under a deadline is an ``I`` call plus a test loop
(spinning for the first millisecond, then sleeping up to 1 ms between
tests, so a long call may return up to 1 ms late) and it is not replayed.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from mpi4py import MPI

from mpicoll.collectives import COLLECTIVES
from mpicoll.errors import CollectiveTimeoutError, spans

ACTIONS = ("abort", "raise")
SPIN = 1e-3  # seconds of back-to-back tests before sleeping between them
NAMES = tuple(COLLECTIVES)  # a collective's number in a reply
#: seconds between writing why and aborting: the launcher forwards a rank's
#: output through a pipe, and an abort that kills the job first loses it
#: (seen with MPICH's hydra on a loaded machine: the job ended, stderr empty)
ABORT_GRACE = 0.5


class Watchdog:
    """Deadlines for one communicator's calls: ``timeout`` seconds, then
    ``action`` (``"abort"`` or ``"raise"``). ``comm`` is the private
    communicator; ``tags`` the two tags reserved for queries and replies."""

    def __init__(self, comm, rank: int, timeout: float, action: str,
                 tags: tuple[int, int]) -> None:
        self.comm = comm
        self.rank = rank
        self.timeout = timeout
        self.action = action
        self.query_tag, self.reply_tag = tags
        self._replies: list[MPI.Request] = []  # answers still in flight
        self._here: tuple[int, int] = (0, -1)  # (seq, collective number)

    def wait(self, test, seq: int, collective: str, where: dict,
             pending=None) -> None:
        """Call ``test()`` until it returns True, answering queries; past
        the deadline, ask the peers where they are and raise or abort.
        ``pending()`` (optional) lists the messages still outstanding."""
        self._here = (seq, NAMES.index(collective)
                      if collective in COLLECTIVES else -1)
        try:
            if self._poll(test, time.monotonic() + self.timeout):
                return
            answers = self._ask(seq, test)
            if answers is None:  # it completed while we asked
                return
            error = self._error(seq, collective, answers,
                                pending() if pending else (), where)
        finally:
            self._here = (0, -1)
        _fail(error, self.action)

    def complete(self, request, seq: int, collective: str,
                 where: dict) -> None:
        """Wait for an MPI request under the deadline."""
        self.wait(request.Test, seq, collective, where)

    # ------------------------------------------------------------ queries

    def serve(self) -> None:
        """Answer every query that has arrived: ``(query's seq, this
        rank's call seq, its collective number)``."""
        comm, status = self.comm, MPI.Status()
        while comm.Iprobe(MPI.ANY_SOURCE, self.query_tag, status):
            source = status.Get_source()
            asked = np.empty(1, np.int64)
            comm.Recv(asked, source, self.query_tag)
            answer = np.array([asked[0], *self._here], np.int64)
            self._replies.append(comm.Isend(answer, source, self.reply_tag))
        if self._replies:
            self._replies = [r for r in self._replies if not r.Test()]

    def _poll(self, test, deadline: float) -> bool:
        return _poll(test, deadline, self.serve)

    def _ask(self, seq: int, test) -> dict | None:
        """Every peer's answer ``{rank: (seq, collective number)}`` within
        the grace period, or None if ``test()`` turned True meanwhile."""
        comm, size = self.comm, self.comm.Get_size()
        peers = [q for q in range(size) if q != self.rank]
        asked = np.array([seq], np.int64)
        for q in peers:
            comm.Isend(asked, q, self.query_tag).Free()
        answers: dict[int, tuple[int, int]] = {}
        status, answer = MPI.Status(), np.empty(3, np.int64)
        end = time.monotonic() + min(2.0, max(0.2, self.timeout / 4))
        while len(answers) < len(peers) and time.monotonic() < end:
            if test():
                return None
            self.serve()
            while comm.Iprobe(MPI.ANY_SOURCE, self.reply_tag, status):
                source = status.Get_source()
                comm.Recv(answer, source, self.reply_tag)
                if answer[0] == seq:  # not a late answer to an old query
                    answers[source] = (int(answer[1]), int(answer[2]))
            time.sleep(1e-4)
        return answers

    def _error(self, seq: int, collective: str, answers: dict, pending,
               where: dict) -> CollectiveTimeoutError:
        size = self.comm.Get_size()
        missing = [q for q in range(size)
                   if q != self.rank and q not in answers]
        mine = self._here
        here = [q for q in range(size) if q == self.rank
                or answers.get(q) == mine]
        elsewhere = {q: a for q, a in answers.items() if a != mine}
        parts = [f"call #{seq} not complete after {self.timeout:g} s"]
        if missing:
            parts.append(f"not arrived: {_ranks(missing)} (no answer: "
                         f"not inside an "
                         f"mpicoll call on this communicator; busy, blocked "
                         f"elsewhere, stopped or dead)")
        if elsewhere:
            parts.append("at other calls: " + "; ".join(
                f"rank {q} at {_call(*elsewhere[q])}"
                for q in sorted(elsewhere)))
        parts.append(f"waiting in it: {_ranks(here)}")
        if pending:
            parts.append("still pending here: " + ", ".join(pending))
        return CollectiveTimeoutError(
            "; ".join(parts), pending=pending, missing=missing, seq=seq,
            **where)


def bounded(request, what: str, *, timeout: float, action: str,
            where: dict) -> None:
    """Wait for ``request``, a step mpicoll takes on its own before any
    call can be asked about (``what``: creating its private communicator,
    the first collective on a communicator), at most ``timeout`` seconds,
    then ``action`` as :meth:`Watchdog.wait` does. No peer can be asked
    where it is yet, so the report says that a rank of the communicator
    has not arrived, not which one."""
    if _poll(request.Test, time.monotonic() + timeout):
        return
    _fail(CollectiveTimeoutError(
        f"{what} not complete after {timeout:g} s: a rank of the "
        f"communicator has not arrived (not at its first collective call "
        f"on it: busy, blocked elsewhere, stopped or dead)", seq=0,
        **where), action)


def _poll(test, deadline: float, serve=None) -> bool:
    """Call ``test()`` (and ``serve()``) until it returns True (True) or
    ``deadline`` passes (False): back to back for :data:`SPIN` seconds,
    then sleeping between tests, from 10 µs up to 1 ms."""
    start = time.monotonic()
    pause = 1e-5
    while not test():
        if serve is not None:
            serve()
        now = time.monotonic()
        if now >= deadline:
            return False
        if now - start > SPIN:
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)
    return True


def _fail(error: CollectiveTimeoutError, action: str):
    """Raise ``error``, or with ``action`` ``"abort"`` write it to stderr
    and abort the job."""
    if action == "abort":
        sys.stderr.write(f"{error}\nmpicoll: aborting the job "
                         f"(MPICOLL_ON_TIMEOUT=raise leaves it to the "
                         f"program)\n")
        sys.stderr.flush()
        time.sleep(ABORT_GRACE)
        MPI.COMM_WORLD.Abort(1)
    raise error


def _ranks(ranks: list[int]) -> str:
    return f"{'ranks' if len(ranks) > 1 else 'rank'} {spans(ranks)}"


def _call(seq: int, number: int) -> str:
    if seq == 0:
        return "no collective"
    name = NAMES[number] if 0 <= number < len(NAMES) else "a collective"
    return f"call #{seq} ({name})"
